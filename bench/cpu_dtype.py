"""bf16 against float32 weights on the CPU: a GRPO step's two halves, sampling and a LoRA backward.

    python bench/cpu_dtype.py [--model ~/.cache/grpo/gemma3-270m] [--rounds 5] [--tokens 100]

Why: ``dtype: auto`` on a CPU picks bf16 only where the CPU multiplies bf16 natively (AVX512-BF16 or AMX,
``cli.train.hardware.cpu_bf16``); this is the measurement behind that rule. The model (an HF folder; the
default is where ``grpo`` imports the built-in gemma3-270m, so run the CPU recipe's ``grpo prep`` once first)
is loaded twice, in bf16 and in float32, each with the CPU preset's LoRA (r 16 on the seven projections,
float32 adapters as PEFT makes them). Each round, alternating which dtype goes first:

- ``generate``: 4 prompts of ~110 tokens, exactly ``--tokens`` new tokens each, sampled with the KV cache
  (what TRL's GRPO does without vLLM);
- ``train``: one forward and backward of the 4 finished sequences through the LoRA model (loss: mean
  log-prob of the sequences), as the trainer's loss pass does.

Prints each half's median seconds per dtype and the median of the per-round bf16/float32 ratios. Writes
nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

PROMPT = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May? "
)
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def load(path: str, dtype: Any) -> Any:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    return get_peft_model(model, LoraConfig(r=16, lora_alpha=16, target_modules=TARGETS, use_rslora=True))


def one_round(model: Any, batch: Any, tokens: int, pad: int) -> tuple[float, float]:
    import torch
    from transformers import GenerationConfig

    cfg = GenerationConfig(
        max_new_tokens=tokens, min_new_tokens=tokens, do_sample=True, temperature=1.0, min_p=0.1,
        use_cache=True, pad_token_id=pad,
    )  # fmt: skip
    torch.manual_seed(0)
    model.eval()
    t0 = time.perf_counter()
    with torch.no_grad():
        seqs = model.generate(**batch, generation_config=cfg)
    t1 = time.perf_counter()
    model.train()
    logits = model(input_ids=seqs).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, seqs[:, 1:, None]).mean()
    (-logp).backward()
    model.zero_grad(set_to_none=True)
    return t1 - t0, time.perf_counter() - t1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(Path.home() / ".cache" / "grpo" / "gemma3-270m"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=100)
    args = ap.parse_args()
    if not (Path(args.model) / "config.json").is_file():
        raise SystemExit(
            f"error: no HF model at {args.model}: run `grpo prep gsm8k --model gemma3-270m --preset cpu` "
            "once (it imports the GGUF there), or pass --model"
        )
    import torch
    from transformers import AutoTokenizer

    from cli.train import cpu_bf16

    tok = AutoTokenizer.from_pretrained(args.model)
    batch = tok([PROMPT * 3] * 4, return_tensors="pt")
    models = {"bfloat16": load(args.model, torch.bfloat16), "float32": load(args.model, torch.float32)}
    one_round(models["bfloat16"], batch, 4, tok.pad_token_id)  # warm-up: first calls allocate
    one_round(models["float32"], batch, 4, tok.pad_token_id)
    times: dict[str, dict[str, list[float]]] = {d: {"generate": [], "train": []} for d in models}
    for r in range(args.rounds):
        order = ["bfloat16", "float32"] if r % 2 == 0 else ["float32", "bfloat16"]
        for d in order:
            gen, train = one_round(models[d], batch, args.tokens, tok.pad_token_id)
            times[d]["generate"].append(gen)
            times[d]["train"].append(train)
    shape = f"4 x {batch['input_ids'].shape[1]} prompt tokens + {args.tokens} sampled"
    print(f"CPU bf16 native (avx512_bf16/amx_bf16): {cpu_bf16()}; threads {torch.get_num_threads()}; "
          f"{shape}; {args.rounds} rounds")  # fmt: skip
    print(f"{'half':<10} {'bf16 s':>8} {'fp32 s':>8} {'bf16/fp32':>10}")
    for half in ("generate", "train"):
        b, f = times["bfloat16"][half], times["float32"][half]
        ratio = statistics.median(x / y for x, y in zip(b, f, strict=True))
        print(f"{half:<10} {statistics.median(b):>8.2f} {statistics.median(f):>8.2f} {ratio:>9.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
