"""Write a random-weight, Qwen3-4B-shaped model + a small BPE tokenizer to a folder, quickly.

    python bench/gpu/make_random_model.py --out /tmp/qwen3-4b-random            # 4.0 B params, bf16, ~8 GB
    python bench/gpu/make_random_model.py --out /tmp/qwen3-small --layers 2 --hidden 256 --intermediate 512 \
        --heads 4 --kv-heads 2 --head-dim 64                        # a CPU-sized check of this script

Used by bench/gpu/h200_grpo_plain.py and `grpo grpo --model <out>` to measure step time and memory of the
seed-000 GRPO configuration without downloading weights. Shapes default to Qwen3-4B (hidden 2560,
intermediate 9728, 36 layers, 32 heads, 8 KV heads, head_dim 128, vocab 151936, tied embeddings).
The model is built on the meta device (no CPU init of 4 B parameters), materialised with
``to_empty`` on the GPU when there is one, and filled with N(0, 0.02) (norm weights 1). The tokenizer is
the project's tiny byte-level BPE (vocab ~1 K): the model's vocabulary may be larger than the
tokenizer's, which only changes what sampled ids decode to.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="destination folder (replaced if it exists)")
    p.add_argument("--hidden", type=int, default=2560)
    p.add_argument("--intermediate", type=int, default=9728)
    p.add_argument("--layers", type=int, default=36)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--max-position", type=int, default=40960)
    p.add_argument("--seed", type=int, default=3407)
    p.add_argument("--device", default="auto", help="auto (cuda when available), cuda or cpu")
    args = p.parse_args(argv)

    sys.path.insert(0, str(REPO))  # cli.models.resolve (tokenizer) and py_rewards.spec without an install
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from cli.models import build_tiny_tokenizer
    from cli.run import atomic_dir
    from py_rewards.spec import get_spec

    t0 = time.perf_counter()
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    tokenizer = build_tiny_tokenizer(get_spec("seed000"))
    vocab = max(args.vocab, len(tokenizer))
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        head_dim=args.head_dim,
        max_position_embeddings=args.max_position,
        tie_word_embeddings=True,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        torch_dtype="bfloat16",
    )
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # bf16 from the start: no 16 GB fp32 detour on the GPU
    try:
        with torch.device("meta"):
            model = Qwen3ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model = model.to_empty(device=device)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.normal_(0.0, 0.02, generator=gen)
        # Buffers (rotary inv_freq) were not initialised by to_empty: recompute them.
        for module in model.modules():
            if hasattr(module, "rope_init_fn") and hasattr(module, "inv_freq"):
                inv_freq, scaling = module.rope_init_fn(module.config, device)
                module.inv_freq = inv_freq
                module.original_inv_freq = inv_freq
                module.attention_scaling = scaling
    model.tie_weights()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    n_params = sum(p.numel() for p in model.parameters())
    built = time.perf_counter() - t0
    with atomic_dir(args.out) as tmp:
        model.save_pretrained(tmp, max_shard_size="4GB")
        tokenizer.save_pretrained(tmp)
    info = {
        "out": str(args.out),
        "params": n_params,
        "device": device,
        "build_seconds": round(built, 1),
        "total_seconds": round(time.perf_counter() - t0, 1),
        "vocab": vocab,
        "tokenizer_vocab": len(tokenizer),
    }
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
