"""A random Qwen2 whose tokenizer is laid out as the one transformers builds from a Qwen2.5 GGUF:
pad = eos = ``<|endoftext|>``, three added tokens, and ``<|fim_pad|>`` in the vocabulary but not added
(the learning issue's item 3: the tokenizer Unsloth's GPU loader refused).

    python bench/gpu/pad_eos_model.py --out /tmp/pad-eos      # 2 layers, hidden 256 (heads vLLM can serve)

tests/helpers.py builds its CPU model with the same function (hidden 64); bench/gpu/h200_pad_eos.sh trains
this one under both backends on a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build(dest: Path, *, hidden: int = 64, heads: int = 4, kv_heads: int = 2, layers: int = 2) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from cli.models import training_text as _training_text

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tok.train_from_iterator(_training_text(), trainer=trainer)
    data = json.loads(tok.to_str())
    data["model"]["vocab"]["<|fim_pad|>"] = len(data["model"]["vocab"])  # a plain vocabulary entry
    fast = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(data)),
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        model_max_length=2048,
    )
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(fast), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=2048,
        tie_word_embeddings=True, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
        bos_token_id=None,
    )  # fmt: skip
    Qwen2ForCausalLM(config).save_pretrained(dest)
    fast.save_pretrained(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--layers", type=int, default=2)
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    build(args.out, hidden=args.hidden, heads=args.heads, kv_heads=args.kv_heads, layers=args.layers)
    print(f"{args.out}: pad = eos = <|endoftext|>, hidden {args.hidden}, {args.layers} layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
