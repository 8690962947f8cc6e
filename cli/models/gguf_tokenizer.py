"""The tokenizer inside a llama.cpp GGUF, rebuilt as the model's own HF tokenizer has it.

transformers' GGUF conversion gets the vocabulary and merges right but not the rest: its Qwen2 converter
adds three special tokens of its own (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``) and none of the
file's other control tokens (``<|fim_pad|>`` stays a plain vocabulary entry), names EOS after its own
default rather than the file's ``eos_token_id`` (Qwen2.5-Coder-Instruct: ``<|endoftext|>`` for the file's
``<|im_end|>``), and puts its own pre-tokenizer in place of the file's ``gpt-2``. :func:`restore_specials`
rebuilds those from the GGUF: its token types (llama.cpp's ``tokenizer.ggml.token_type``: 3 control →
special added token, 4 user-defined → added token, same ids) and its BOS / EOS / pad / unknown ids.

Gemma's SentencePiece vocabulary is rebuilt whole (:func:`gguf_spm_tokenizer`): transformers 5.17 splits it
into single characters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError

if TYPE_CHECKING:
    from cli.models.gguf_file import Header

NORMAL, CONTROL, USER_DEFINED = 1, 3, 4  # llama.cpp's token types (tokenizer.ggml.token_type)
# SentencePiece vocabularies that transformers 5.17 splits into characters (see gguf_spm_tokenizer).
GEMMA_ARCHS = ("gemma", "gemma2", "gemma3")


def from_gguf(header: Header) -> Any:
    """The HF tokenizer of the GGUF ``header`` describes, as the model's own tokenizer has it."""
    if header.architecture in GEMMA_ARCHS and header.get("tokenizer.ggml.model") == "llama":
        return gguf_spm_tokenizer(header.path)
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(header.path.parent), gguf_file=header.path.name)
    except Exception as exc:  # noqa: BLE001
        text = str(exc).strip().splitlines()
        raise GrpoError(
            f"{header.path}: transformers cannot build its tokenizer "
            f"({text[0] if text else type(exc).__name__})"
        ) from None
    return restore_specials(tok, header)


def restore_specials(tok: Any, header: Header) -> Any:
    """``tok`` (transformers' conversion) with the GGUF's own added tokens and special tokens.

    The added tokens become exactly the GGUF's: control tokens special, user-defined ones not (same ids);
    tokens transformers' converter adds on its own (Qwen2's ``<|im_start|>`` when the vocabulary has none)
    are dropped. BOS / EOS / pad / unknown are named by the GGUF's token ids; BOS only when the GGUF adds one.
    """
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tokens = header.tokens
    data = json.loads(tok.backend_tokenizer.to_str())
    vocab = data.get("model", {}).get("vocab")
    if isinstance(vocab, dict) and len(vocab) > len(tokens):
        raise GrpoError(f"{header.path}: transformers built {len(vocab)} tokens from its {len(tokens)}")
    data["added_tokens"] = [
        {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": kind == CONTROL}
        for i, (t, kind) in enumerate(zip(tokens, header.token_types, strict=False))
        if kind in (CONTROL, USER_DEFINED)
    ]  # fmt: skip
    if header.get("tokenizer.ggml.model") == "gpt2" and header.get("tokenizer.ggml.pre") == "gpt-2":
        # llama.cpp's `gpt-2` pre-tokenizer is GPT-2's byte-level split; transformers' Qwen2 and Llama
        # converters would put their own regex (digits one by one) in its place.
        data["normalizer"] = None
        data["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                 "use_regex": True}  # fmt: skip
    backend = Tokenizer.from_str(json.dumps(data))
    bos_id = header.get("tokenizer.ggml.bos_token_id")
    if header.get("tokenizer.ggml.add_bos_token") and isinstance(bos_id, int) and 0 <= bos_id < len(tokens):
        _prepend_bos(backend, tokens[bos_id], bos_id)
    named: dict[str, str | None] = {}
    keys = {
        "eos": "eos_token_id",
        "pad": "padding_token_id",
        "unk": "unknown_token_id",
        "bos": "bos_token_id",
    }
    for role, key in keys.items():
        i = header.get(f"tokenizer.ggml.{key}")
        named[f"{role}_token"] = tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else None
    if not header.get("tokenizer.ggml.add_bos_token", named["bos_token"] is not None):
        named["bos_token"] = (
            None  # the model takes no BOS (Qwen): a template writing `bos_token` must add none
        )
    if named["eos_token"] is None:
        named["eos_token"] = tok.eos_token
    context = header.get(f"{header.architecture}.context_length")
    own = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        model_max_length=int(context) if isinstance(context, int) else tok.model_max_length,
        padding_side="left",  # decoder-only generation pads on the left
        **named,
    )
    own.chat_template = tok.chat_template
    if len(own) != len(tokens):
        raise GrpoError(f"{header.path}: its tokenizer has {len(own)} tokens, the GGUF lists {len(tokens)}")
    return own


def _prepend_bos(backend: Any, bos: str, bos_id: int) -> None:
    """Make the tokenizer add BOS itself, as the GGUF says the model wants (``add_bos_token``; Llama 3), when
    transformers' converter did not: llama.cpp prepends it, and so does the model's own HF tokenizer."""
    from tokenizers import processors

    if backend.encode("a").ids[:1] == [bos_id]:
        return
    template = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)]
    )
    current = backend.post_processor
    backend.post_processor = template if current is None else processors.Sequence([current, template])


# ---- SentencePiece vocabularies (Gemma) --------------------------------------------------------------------
def _spm_merges(vocab: dict[str, int], scores: list[float], types: list[int]) -> list[tuple[str, str]]:
    """BPE merges of a sentencepiece vocabulary, in merge order (score = -merge rank)."""
    merges: list[tuple[float, int, int, str, str]] = []
    for piece, i in vocab.items():
        if types[i] != NORMAL or len(piece) < 2:
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
    user-defined pieces as added tokens, BOS prepended, the file's chat template.
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
            if ty == USER_DEFINED
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
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=tokens[bos_id],
        eos_token=tokens[eos_id],
        pad_token=tokens[pad_id],
        unk_token=bpe.unk_token,
        model_max_length=32768,
        padding_side="left",  # decoder-only generation pads on the left
    )
    fast.chat_template = scalar("tokenizer.chat_template")  # the model's own, when the file has one
    return fast
