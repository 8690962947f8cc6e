"""Keep the GRPO prompts that can teach: an offline pass-rate filter with the SFT adapter (GPU, vLLM).

GRPO learns nothing from a group whose completions all score the same: the advantages are all zero. For a
small model most GSM8K prompts are such groups (never solved), so this samples ``--samples`` completions
per training prompt from the run's SFT adapter at the GRPO sampling settings, scores them with the run's
own rewards, and keeps the prompts solved at least once and (``--keep mixed``, the default) not every
time: each kept prompt has a real chance of a group with an accuracy spread. This is the offline form of
DAPO's dynamic sampling (which drops zero-spread groups online and samples more prompts), a
difficulty filter as in Skywork-OR1 / Polaris.

The run's ``data/train.parquet`` is replaced by the kept rows (the full table stays as
``data/train.full.parquet``; running again filters that full table again); a summary JSON goes to stdout
and ``data/passrate.json``.

    python bench/passrate_filter.py --run runs/gemma --samples 8

The product form of this script is `grpo filter` (cli/passrate.py, cli/vllm_generate.py ``sample_all``): it
leaves train.parquet alone (SFT reads its worked solutions) and writes the kept rows to
``data/grpo_prompts.parquet``, which `grpo grpo` trains on while it matches train.parquet; it seeds from
the run's config and also samples through HF generate without a GPU. This script stays as it ran for
rounds 2 and 3 of bench/learning-gpu.md (seed 0, train.parquet replaced), so that
bench/h200_learning_levers.sh reproduces them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True, type=Path)
    p.add_argument("--samples", type=int, default=8, help="completions per prompt (default 8)")
    p.add_argument("--adapter", default="sft", help="which adapter samples: sft or grpo (default sft)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="default: the run's GRPO budget")
    p.add_argument("--keep", choices=("mixed", "solved"), default="mixed")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.5)
    p.add_argument("--max-num-seqs", type=int, default=1024, help="vLLM max_num_seqs (default 1024)")
    p.add_argument("--limit", type=int, default=None, help="filter only the first N prompts (drop the rest)")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")

    import pandas as pd
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    from cli import generation, loading, prompting, scoring
    from cli.models import resolve_model
    from cli.rundir import RunDir, run_config
    from cli.vllm_generate import _lora_rank

    rd = RunDir(args.run)
    cfg = run_config(rd)
    spec = cfg.format_spec()
    full = rd.data_dir / "train.full.parquet"
    src = full if full.exists() else rd.data_dir / "train.parquet"
    df = pd.read_parquet(src)
    if args.limit:
        df = df.iloc[: args.limit].reset_index(drop=True)
    adapters = rd.adapters()
    if args.adapter not in adapters:
        print(f"error: no {args.adapter} adapter in {rd.path}", file=sys.stderr)
        return 2
    base = resolve_model(cfg, rd)
    tok = loading.load_tokenizer(base, spec)
    budget = args.max_new_tokens or cfg.grpo.max_completion_length or 256
    questions = [str(q) for q in df["question"]]
    answers = [str(a).strip() for a in df["answer"]]
    ids = [tok(prompting.prompt_text(tok, spec, q), add_special_tokens=False)["input_ids"] for q in questions]
    llm = LLM(
        model=str(base),
        tokenizer=str(base),
        max_model_len=max(len(x) for x in ids) + budget,
        gpu_memory_utilization=args.gpu_memory_utilization,
        enable_lora=True,
        max_lora_rank=_lora_rank({args.adapter: adapters[args.adapter]}),
        max_loras=1,
        max_num_seqs=args.max_num_seqs,
        seed=0,
    )
    eos = generation._eos_ids(tok)
    g = cfg.grpo
    params = SamplingParams(
        n=args.samples,
        temperature=g.temperature,
        min_p=g.min_p,
        top_p=g.top_p,
        max_tokens=budget,
        stop_token_ids=eos or None,
        skip_special_tokens=False,
        seed=0,
    )
    t0 = time.perf_counter()
    results = llm.generate(
        [{"prompt_token_ids": x} for x in ids],
        params,
        lora_request=LoRARequest(args.adapter, 1, str(adapters[args.adapter])),
        use_tqdm=False,
    )
    gen_s = time.perf_counter() - t0
    comps, golds = [], []
    for res, ans in zip(results, answers, strict=True):
        for o in res.outputs:
            kept = generation._trim(list(o.token_ids), eos, tok.pad_token_id)
            comps.append(tok.decode(kept, skip_special_tokens=False))
            golds.append(ans)
    sc = scoring.score(spec, comps, golds)
    n = args.samples
    solved = [sum(sc.correct[i * n : (i + 1) * n]) for i in range(len(df))]
    keep = [i for i, k in enumerate(solved) if k > 0 and (args.keep == "solved" or k < n)]
    if not keep:
        print("error: no prompt was solved by any sample; nothing to keep", file=sys.stderr)
        return 1
    if not full.exists():
        os.replace(rd.data_dir / "train.parquet", full)
    tmp = rd.data_dir / ".train.parquet.partial"
    df.iloc[keep].reset_index(drop=True).to_parquet(tmp)
    os.replace(tmp, rd.data_dir / "train.parquet")
    summary = {
        "prompts": len(df),
        "samples": n,
        "kept": len(keep),
        "keep": args.keep,
        "solved_histogram": {str(k): v for k, v in sorted(Counter(solved).items())},
        "sample_accuracy": round(sum(sc.correct) / len(sc.correct), 4),
        "format_rate": round(sum(sc.format_ok) / len(sc.format_ok), 4),
        "generation_seconds": round(gen_s, 1),
        "mean_tokens": round(sum(len(o.token_ids) for r in results for o in r.outputs) / len(comps), 1),
    }
    (rd.data_dir / "passrate.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
