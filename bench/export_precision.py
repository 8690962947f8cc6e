"""Where an export loses the fine-tune: merge precision, weight rounding, 16-bit arithmetic (CPU).

Greedy completions of held-out prompts from the run's adapter, decoded several ways, each compared token by
token with the float32 reference (base + adapter, float32), as `grpo export --verify` compares artifacts:

- ``merge_bf16``            what export did before: merged into the bf16 base in bf16, decoded in bf16;
- ``ref_bf16``              no merge at all: base + adapter decoded in bf16 (16-bit arithmetic alone);
- ``merge_fp32``            merged in float32, decoded in float32 (should equal the reference);
- ``merge_fp32_bf16w``      merged in float32, weights rounded to bf16 once, decoded in float32: what the
                            merged-16bit artifact holds, judged the way `grpo export` now judges it;
- ``merge_fp32_bf16``       the same artifact decoded in bf16 (how a user running it in 16 bits sees it).

    python bench/export_precision.py --run runs/gemma --prompts 8 --tokens 64
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--stage", default="sft", help="which adapter: sft or grpo")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    import torch

    from cli.eval import scoring
    from cli.infer import generation, prompting
    from cli.models import loading, resolve_model
    from cli.run import RunDir, fallback_rows, run_config

    rd = RunDir(args.run)
    cfg = run_config(rd)
    spec = cfg.format_spec()
    base_path = resolve_model(cfg, rd)
    adapter = rd.adapters()[args.stage]
    tok = loading.load_tokenizer(base_path, spec)
    rows = fallback_rows(args.prompts)
    prompts = [prompting.prompt_text(tok, spec, r["question"]) for r in rows]
    tokens: dict[str, list[list[int]]] = {}
    fmt: dict[str, float] = {}

    def decode(model: object, name: str) -> None:
        t0 = time.perf_counter()
        gens = generation.hf_generate(model, tok, prompts, max_new_tokens=args.tokens)
        tokens[name] = [g.tokens for g in gens]
        sc = scoring.score(spec, [g.text for g in gens], [r["answer"] for r in rows])
        fmt[name] = sc.mean("format")
        print(f"{name}: {time.perf_counter() - t0:.0f} s, format reward {fmt[name]:.3f}", flush=True)

    fp32, bf16 = torch.float32, torch.bfloat16
    merged = loading.attach_adapter(loading.load_hf(base_path, dtype=fp32, device="cpu"), adapter)
    merged = merged.merge_and_unload()
    decode(loading.attach_adapter(loading.load_hf(base_path, dtype=fp32, device="cpu"), adapter), "ref_fp32")
    decode(merged, "merge_fp32")
    rounded = copy.deepcopy(merged).to(bf16)
    decode(rounded, "merge_fp32_bf16")
    decode(rounded.to(fp32), "merge_fp32_bf16w")
    del merged, rounded
    gc.collect()
    decode(loading.attach_adapter(loading.load_hf(base_path, dtype=bf16, device="cpu"), adapter), "ref_bf16")
    old = loading.attach_adapter(
        loading.load_hf(base_path, dtype=bf16, device="cpu"), adapter
    ).merge_and_unload()
    decode(old, "merge_bf16")
    out = {
        "run": str(args.run),
        "stage": args.stage,
        "prompts": len(rows),
        "tokens": args.tokens,
        "vs_ref_fp32": {},
    }
    for name, toks in tokens.items():
        if name == "ref_fp32":
            continue
        agree = generation.token_agreement(tokens["ref_fp32"], toks)
        out["vs_ref_fp32"][name] = {**{k: round(v, 4) for k, v in agree.items()}, "format_reward": fmt[name]}
        print(f"ref_fp32 vs {name}: " + " ".join(f"{k} {100 * v:.1f}%" for k, v in agree.items()))
    out["format_reward_ref_fp32"] = fmt["ref_fp32"]
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
