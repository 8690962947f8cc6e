"""How far bf16 arithmetic moves a model's token log-probs, on the CPU: a proxy for the IS floor per model.

On the GPU, ``bench/gpu/is_floor.py`` scores the same vLLM samples on the trainer's side: what is left once
the trainer scores the sampled distribution is the bf16 forward itself (two implementations, vLLM's and
the trainer's, rounding differently): 0.0089 nats per token for Qwen2.5-Coder-1.5B-Instruct (round 4).
Gemma-3-270M ran at 0.017 under the same scoring (round 15), and its floor was not measured on the GPU.
This script asks the CPU how far bf16 moves each model's log-probs, the same way for both models:

- completions are sampled once from the model in float32 (temperature 1, ``--min-p``, the seed-000 template);
- the same tokens are scored over the sampled kept set (cli/train/lm_head.py, as the trainer scores them) by
  the model in float32 (the reference) and in bf16 under two attention implementations (``sdpa`` and
  ``eager``): two bf16 implementations of one model, as the trainer and vLLM are;
- per pair: the per-token |difference| (mean, 99th percentile) and the sequence ratio exp(sum).

CPU kernels are not the GPU's, so the absolute numbers are a proxy; the ratio between two models measured
here the same way is the point. Run from the repo root (2 cores: a few minutes per model):

    python bench/bf16_drift.py --model gemma3-270m --data ../shared/data/gsm8k/test.jsonl --out OUT.json
    python bench/bf16_drift.py --model MODEL.gguf --data ../shared/data/gsm8k/test.jsonl --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def resolve(name: str) -> str:
    """An HF folder for ``name``: a folder as is; a .gguf or ``gemma3-270m`` through the product's import."""
    if name in ("gemma3-270m", "gemma-3-270m"):
        from cli.models import materialize_gemma

        return str(materialize_gemma())
    if name.lower().endswith(".gguf"):
        from cli.models import import_gguf

        return str(import_gguf(Path(name)))
    return name


def sample(
    model: Any, tok: Any, prompt_ids: list[list[int]], min_p: float, max_tokens: int
) -> list[list[int]]:
    """One completion per prompt from the float32 model (left-padded batches of 8)."""
    import torch

    out: list[list[int]] = []
    torch.manual_seed(3407)
    for i in range(0, len(prompt_ids), 8):
        batch = prompt_ids[i : i + 8]
        width = max(len(p) for p in batch)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        with torch.no_grad():
            gen = model.generate(
                input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, min_p=min_p,
                max_new_tokens=max_tokens, pad_token_id=pad,
            )  # fmt: skip
        for row in gen[:, width:].tolist():
            stop = [j for j, t in enumerate(row) if t in (tok.eos_token_id, pad)]
            out.append(row[: stop[0] + 1] if stop else row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="HF folder, a llama.cpp .gguf, or gemma3-270m")
    ap.add_argument("--data", required=True, help="GSM8K-style jsonl (question, answer)")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--min-p", type=float, default=0.1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch
    from is_floor import _score, _stats
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cli.train import Support
    from py_rewards.spec import get_spec

    t0 = time.perf_counter()
    path = resolve(args.model)
    spec = get_spec("seed000")
    tok = AutoTokenizer.from_pretrained(path)
    tok.chat_template = spec.chat_template()
    rows = [json.loads(x) for x in Path(args.data).read_text().splitlines()[: args.prompts]]
    prompt_ids = [
        tok(
            tok.apply_chat_template(spec.messages(r["question"]), tokenize=False, add_generation_prompt=True),
            add_special_tokens=False,
        )["input_ids"]
        for r in rows
    ]
    ref = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa").eval()
    completions = sample(ref, tok, prompt_ids, args.min_p, args.max_tokens)
    seqs = [(p, c) for p, c in zip(prompt_ids, completions, strict=True) if c]
    kept = Support(temperature=1.0, min_p=args.min_p)
    scores = {"fp32": _score(ref, seqs, kept, fp32=True)}
    del ref
    for attn in ("sdpa", "eager"):
        m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, attn_implementation=attn).eval()
        scores[f"bf16-{attn}"] = _score(m, seqs, kept, fp32=False)
        del m
    pairs = {
        "bf16-sdpa vs fp32": ("bf16-sdpa", "fp32"),
        "bf16-eager vs fp32": ("bf16-eager", "fp32"),
        "bf16-sdpa vs bf16-eager": ("bf16-sdpa", "bf16-eager"),
    }
    report: dict[str, Any] = {
        "model": args.model,
        "torch": torch.__version__,
        "sequences": len(seqs),
        "mean_completion_tokens": round(sum(len(c) for _, c in seqs) / max(len(seqs), 1), 1),
        "min_p": args.min_p,
    }
    for name, (a, b) in pairs.items():
        report[name] = _stats(list(zip(scores[a], scores[b], strict=True)))
        s = report[name]
        print(
            f"{args.model} {name:24s} |Δ| mean {s['logp_diff_mean']:.5f} p99 {s['logp_diff_p99']:.4f} "
            f"seq ratio {s['seq_ratio_min']:.3f}–{s['seq_ratio_max']:.3f}",
            flush=True,
        )
    report["seconds"] = round(time.perf_counter() - t0, 1)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
