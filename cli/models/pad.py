"""The pad token a run uses: the tokenizer's own when it differs from EOS, else one from its vocabulary.

Real tokenizers often come with pad = EOS or with no pad (Qwen2.5 folders saved from a GGUF, Llama 3 base
models). Unsloth's GPU loader (``unsloth_zoo.pad_token.fix_pad_token``, 2026.10.9) then searches the
*added* tokens for a pad-like one; a tokenizer converted from a GGUF lists only a few added tokens, so it
adds a new token and stops, because the embeddings have no row for it. Its CPU fallback does not run that
check. With pad = EOS the padded positions also look like the end of an answer to any code that finds EOS
by id.

So every stage chooses the pad the same way, before a model loads (:func:`choose`), from the vocabulary
the embeddings already cover: a token whose name says pad, else an unused reserved token, else the unknown
token. It never adds a token: that would resize the embeddings, so it is refused with one line saying how
to name a token instead (``pad_token:`` in the run's config). The choice is deterministic, so SFT, GRPO,
eval and export, which each load the tokenizer, agree; the adapters carry the tokenizer with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.common import GrpoError
from cli.run.rundir import RunDir

AUTO = "auto"
# Tokens that name themselves a pad, best first: Llama 3.1 / 4, Gemma and Mistral, BERT-style, Qwen2.5-Coder's
# fill-in-the-middle pad, Granite, DeepSeek. Any other bracketed "*pad*" token (<|vision_pad|>) comes next.
PAD_NAMES = (
    "<|finetune_right_pad_id|>",
    "<|finetune_right_pad|>",
    "<pad>",
    "<|pad|>",
    "[PAD]",
    "<PAD>",
    "<|fim_pad|>",
    "<fim_pad>",
    "<｜▁pad▁｜>",
)
# Families of tokens a vocabulary reserves unused: Llama 3, Phi-3, Phi-4, Gemma, Mistral.
RESERVED_PREFIXES = (
    "<|reserved_special_token_",
    "<|reserved",
    "<|placeholder",
    "<|dummy_",
    "<unused",
    "[control_",
)
_OPEN, _CLOSE = ("<", "["), (">", "]")


@dataclass(frozen=True)
class PadChoice:
    """The pad a run uses and why; ``changed``: it is not the tokenizer's own."""

    token: str
    id: int
    why: str
    before: str | None  # the tokenizer's own pad (None: it had none)
    eos: str | None

    @property
    def changed(self) -> bool:
        return self.token != self.before

    def line(self) -> str:
        """The one line a stage prints when it pads with another token than the tokenizer's own."""
        was = "no pad token" if self.before is None else f"pad = eos {self.before}"
        return f"pad token: {self.token} (id {self.id}, {self.why}); the tokenizer had {was}"

    def record(self) -> dict[str, Any]:
        """What the run's manifest keeps (``tokenizer``)."""
        return {
            "pad_token": self.token,
            "pad_token_id": self.id,
            "why": self.why,
            "tokenizer_pad": self.before,
            "eos_token": self.eos,
        }


def _bracketed(token: str) -> bool:
    return token.startswith(_OPEN) and token.endswith(_CLOSE)


def _eos_ids(tok: Any, extra: Any = None) -> set[int]:
    ids: set[int] = set()
    for value in (getattr(tok, "eos_token_id", None), extra):
        for v in value if isinstance(value, (list, tuple, set)) else [value]:
            if isinstance(v, int) and not isinstance(v, bool):
                ids.add(v)
    return ids


def choose(tok: Any, *, rows: int | None = None, requested: str = AUTO, eos_ids: Any = None) -> PadChoice:
    """The pad for ``tok``: the config's ``pad_token``, else the tokenizer's own when it differs from every
    EOS, else the best token of its vocabulary (see the module docs). ``rows``: the model's embedding rows
    (a pad id must be below it); ``eos_ids``: the model config's EOS ids, if any."""
    vocab: dict[str, int] = tok.get_vocab()
    eos = _eos_ids(tok, eos_ids)
    bos = getattr(tok, "bos_token_id", None)
    before = tok.pad_token

    def usable(token: str) -> bool:
        i = vocab.get(token)
        return i is not None and i not in eos and i != bos and (rows is None or i < rows)

    def pick(token: str, why: str) -> PadChoice:
        return PadChoice(token, vocab[token], why, before, getattr(tok, "eos_token", None))

    if requested and requested != AUTO:
        if not usable(requested):
            what = (
                "is not in the tokenizer's vocabulary" if requested not in vocab else "is an EOS or BOS token"
            )
            if requested in vocab and rows is not None and vocab[requested] >= rows:
                what = f"has id {vocab[requested]}, past the model's {rows} embedding rows"
            raise GrpoError(
                f"pad_token {requested!r} (config) {what}: name another token, or pad_token: auto"
            )
        return pick(requested, "pad_token in the config")
    if before is not None and usable(before):
        return pick(before, "the tokenizer's own")
    added = {getattr(t, "content", str(t)) for t in tok.added_tokens_decoder.values()}
    for name in PAD_NAMES:
        if usable(name):
            return pick(name, "a pad token of its vocabulary")
    # Added tokens first (the model's own specials), then the rest; lowest id first within each.
    ordered = sorted(vocab, key=lambda t: (t not in added, vocab[t]))
    for token in ordered:
        if _bracketed(token) and "pad" in token.lower() and usable(token):
            return pick(token, "a pad token of its vocabulary")
    reserved = [t for t in ordered if t.startswith(RESERVED_PREFIXES) and _bracketed(t) and usable(t)]
    if reserved:  # the last of a reserved block is the least likely to be given a use by a later release
        return pick(max(reserved, key=lambda t: vocab[t]), "an unused reserved token")
    unk = getattr(tok, "unk_token", None)
    if unk is not None and usable(unk):
        return pick(unk, "the unknown token")
    had = "no pad token" if before is None else f"pad = eos ({before})"
    raise GrpoError(
        f"the tokenizer has {had} and its vocabulary has no pad-named, reserved or unknown token to pad "
        "with: name one of its tokens in the run's config (pad_token: TOKEN); grpo does not add a token, "
        "which would resize the embeddings"
    )


def apply(tok: Any, choice: PadChoice) -> Any:
    """Set the chosen pad on ``tok``. A pad that is a plain vocabulary token becomes a special added token
    (same id), so it is encoded whole and skipped when decoding, as the tokenizer saved and loaded again
    treats it; the vocabulary's size does not change."""
    from tokenizers import AddedToken

    size = len(tok)
    if choice.token not in {getattr(t, "content", str(t)) for t in tok.added_tokens_decoder.values()}:
        tok.backend_tokenizer.add_special_tokens([AddedToken(choice.token, special=True, normalized=False)])
    if tok.pad_token != choice.token:
        tok.pad_token = choice.token
    if len(tok) != size or tok.pad_token_id != choice.id:  # a new token would need a new embedding row
        raise GrpoError(f"setting pad {choice.token!r} changed the vocabulary ({size} → {len(tok)} tokens)")
    return tok


def sync_model(model: Any, choice: PadChoice) -> None:
    """The model's config and generation config name the same pad id as the tokenizer."""
    for cfg in (getattr(model, "config", None), getattr(model, "generation_config", None)):
        if cfg is not None:
            cfg.pad_token_id = choice.id


def model_limits(path: str | Path) -> tuple[int | None, Any]:
    """(embedding rows, EOS ids) from the model's ``config.json`` (text config for multimodal ones), or
    (None, None) when there is none (an adapter folder, a hub id not in the cache)."""
    import json

    try:
        data = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return None, None
    text = data.get("text_config") if isinstance(data.get("text_config"), dict) else {}
    rows = text.get("vocab_size") or data.get("vocab_size")
    return (rows if isinstance(rows, int) else None), text.get("eos_token_id", data.get("eos_token_id"))


def for_path(tok: Any, path: str | Path, requested: str = AUTO) -> PadChoice:
    """:func:`choose` with the limits of the model at ``path``, applied to ``tok``."""
    rows, eos = model_limits(path)
    choice = choose(tok, rows=rows, requested=requested, eos_ids=eos)
    apply(tok, choice)
    return choice


def say(choice: PadChoice) -> None:
    """One line on the terminal when the pad is not the tokenizer's own (rank 0)."""
    from cli.run.console import err_console
    from cli.run.ranks import is_main

    if choice.changed and is_main():
        err_console.print(choice.line())


def report(run: RunDir, choice: PadChoice) -> None:
    """:func:`say` it, and keep it in the run's manifest (``tokenizer``): the training stages do."""
    say(choice)
    run.record("tokenizer", choice.record())
