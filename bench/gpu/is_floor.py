"""Where the trainer and the rollout engine disagree: the same vLLM samples scored by each way of scoring.

GRPO with vLLM rollouts weighs each completion by exp(trainer log-prob - engine log-prob) (TRL's
importance-sampling correction). This script samples completions from vLLM once (the run's model and SFT
adapter, served unmerged as Unsloth serves it, logprobs_mode processed_logprobs as TRL builds its engine),
then scores the very same tokens on the trainer's side in each of the ways a trainer can:

- ``trl-fp32-full``: float32 logits over the full vocabulary (TRL's fused Triton LM head);
- ``fp32-kept``:     float32 logits over the sampler's kept set (min_p / top_k / top_p);
- ``bf16-full``:     the LM head in bf16, as vLLM runs it, over the full vocabulary;
- ``bf16-kept``:     bf16 LM head over the kept set: what cli/train/lm_head.py does;
- ``merged-bf16``:   ``bf16-kept`` with the LoRA merged into the bf16 weights (what TRL's colocate sync
                     hands vLLM), against the unmerged adapter: the cost of the merge alone;
- ``twice``:         ``bf16-kept`` scored a second time (the trainer's own determinism).

With ``--fp32-head`` a second engine runs vLLM's LM head in float32 (``hf_overrides={"head_dtype":
"float32"}``, where this vLLM supports it for generation models) and the same ways score its samples.

For each: the mean and the 99th percentile of the per-token |difference|, the sequence-level ratio
exp(sum) (TRL's default ``sequence_mask``: mean, min, max, share outside [0.5, 2]) and the token-level
ratio range. Run on the GPU machine, repo root:

    python3 bench/gpu/is_floor.py --model HF_DIR --adapter RUN/sft/adapter --data gsm8k_test.jsonl \
        --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _stats(pairs: list[tuple[list[float], list[float]]]) -> dict[str, Any]:
    """Per-token |trainer - engine| and the ratios, over (trainer, engine) log-prob lists per sequence."""
    diffs: list[float] = []
    seq_log: list[float] = []
    tok_ratios: list[float] = []
    for trainer, engine in pairs:
        d = [t - e for t, e in zip(trainer, engine, strict=True) if math.isfinite(e)]
        diffs += [abs(x) for x in d]
        seq_log.append(sum(d))
        tok_ratios += [math.exp(x) for x in d]
    seq = [math.exp(x) for x in seq_log]
    diffs.sort()
    return {
        "tokens": len(diffs),
        "logp_diff_mean": round(statistics.fmean(diffs), 5),
        "logp_diff_p99": round(diffs[int(0.99 * (len(diffs) - 1))], 5),
        "seq_ratio_mean": round(statistics.fmean(seq), 4),
        "seq_ratio_median": round(statistics.median(seq), 4),
        "seq_ratio_min": round(min(seq), 4),
        "seq_ratio_max": round(max(seq), 4),
        "seq_outside_0.5_2": round(sum(not 0.5 <= r <= 2 for r in seq) / len(seq), 4),
        "token_ratio_min": round(min(tok_ratios), 4),
        "token_ratio_max": round(max(tok_ratios), 4),
    }


def _score(
    model: Any, seqs: list[tuple[list[int], list[int]]], support: Any, fp32: bool
) -> list[list[float]]:
    """Trainer-side log-probs of each completion (``fp32``: float32 logits as TRL's kernel; else bf16)."""
    import torch

    from cli.train import score_tokens

    causal = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = causal.get_output_embeddings()
    out = []
    with torch.no_grad():
        for prompt, completion in seqs:
            ids = torch.tensor([prompt + completion], device=head.weight.device)
            hidden = causal.base_model(input_ids=ids).last_hidden_state[0, len(prompt) - 1 : -1]
            targets = ids[0, len(prompt) :]
            weight = head.weight.float() if fp32 else head.weight
            lp = score_tokens(hidden.float() if fp32 else hidden, weight, None, targets, support)["log_probs"]
            out.append(lp.float().tolist())
    return out


def _compare(
    llm: Any, hf: Any, lora: Any, spec: Any, tok: Any, prompt_ids: list, min_p: float, max_tokens: int
) -> dict:
    """Sample once from ``llm``, score the same tokens each trainer way, compare (see the module docs)."""
    from vllm import SamplingParams

    from cli.train import Support

    params = SamplingParams(
        temperature=1.0, min_p=min_p, max_tokens=max_tokens, logprobs=0, seed=3407,
        stop=spec.stop_strings(tok.eos_token), include_stop_str_in_output=True,
    )  # fmt: skip
    res = llm.generate(
        [{"prompt_token_ids": p} for p in prompt_ids], params, lora_request=lora, use_tqdm=False
    )
    seqs, engine = [], []
    for p, r in zip(prompt_ids, res, strict=True):
        o = r.outputs[0]
        if o.token_ids:
            seqs.append((list(p), list(o.token_ids)))
            engine.append([float(next(iter(lp.values())).logprob) for lp in o.logprobs])
    kept = Support(temperature=1.0, min_p=min_p)
    ways = {
        "trl-fp32-full": _score(hf, seqs, Support(), fp32=True),
        "fp32-kept": _score(hf, seqs, kept, fp32=True),
        "bf16-full": _score(hf, seqs, Support(), fp32=False),
        "bf16-kept": _score(hf, seqs, kept, fp32=False),
    }
    twice = _score(hf, seqs, kept, fp32=False)
    table = {k: _stats(list(zip(v, engine, strict=True))) for k, v in ways.items()}
    table["twice"] = _stats(list(zip(twice, ways["bf16-kept"], strict=True)))  # the trainer against itself
    if lora is not None:
        hf.merge_adapter()  # in place, in bf16, as TRL's colocate sync does before load_weights
        merged = _score(hf, seqs, kept, fp32=False)
        hf.unmerge_adapter()
        table["merged-bf16"] = _stats(list(zip(merged, engine, strict=True)))
        table["merged-vs-unmerged"] = _stats(list(zip(merged, ways["bf16-kept"], strict=True)))
    mean_len = statistics.fmean(len(c) for _, c in seqs) if seqs else 0.0
    return {"sequences": len(seqs), "mean_tokens": round(mean_len, 1), **table}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="HF folder of the base model")
    ap.add_argument("--adapter", help="LoRA adapter (the run's sft/adapter); none: the base model")
    ap.add_argument("--data", required=True, help="GSM8K-style jsonl (question, answer)")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--min-p", type=float, default=0.1)
    ap.add_argument("--util", type=float, default=0.12, help="each engine's gpu_memory_utilization")
    ap.add_argument("--fp32-head", action="store_true", help="also a vLLM engine with an fp32 LM head")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
    sys.path.insert(0, str(REPO))
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from vllm import LLM
    from vllm.lora.request import LoRARequest

    from py_rewards.spec import get_spec

    spec = get_spec("seed000")
    tok = AutoTokenizer.from_pretrained(args.model)
    tok.chat_template = spec.chat_template()
    rows = [json.loads(x) for x in Path(args.data).read_text().splitlines()[: args.prompts]]
    prompts = [
        tok.apply_chat_template(spec.messages(r["question"]), tokenize=False, add_generation_prompt=True)
        for r in rows
    ]
    prompt_ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    t0 = time.perf_counter()
    common = {
        "model": args.model, "dtype": "bfloat16", "gpu_memory_utilization": args.util,
        "max_model_len": 2048, "seed": 0, "enable_lora": bool(args.adapter), "max_lora_rank": 64,
        "logprobs_mode": "processed_logprobs",
    }  # fmt: skip
    engines = {"bf16-head": LLM(**common)}
    if args.fp32_head:
        try:
            engines["fp32-head"] = LLM(**common, hf_overrides={"head_dtype": "float32"})
        except Exception as exc:  # noqa: BLE001 - an older vLLM: say so in the report
            print(f"fp32-head engine: {type(exc).__name__}: {exc}", flush=True)
    lora = LoRARequest("sft", 1, args.adapter) if args.adapter else None
    report: dict[str, Any] = {"model": args.model, "adapter": args.adapter, "prompts": len(rows)}
    hf = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16).cuda().eval()
    if args.adapter:
        hf = PeftModel.from_pretrained(hf, args.adapter).eval()
    for engine_name, llm in engines.items():
        for min_p in sorted({0.0, args.min_p}) if engine_name == "bf16-head" else [args.min_p]:
            key = f"{engine_name} min_p={min_p:g}"
            report[key] = _compare(llm, hf, lora, spec, tok, prompt_ids, min_p, args.max_tokens)
            for k, v in report[key].items():
                if isinstance(v, dict):
                    print(f"{key} {k:22s} " + " ".join(f"{a}={b}" for a, b in v.items()), flush=True)
    report["seconds"] = round(time.perf_counter() - t0, 1)
    Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
