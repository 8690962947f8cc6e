"""cli/models/pad.py: the pad a run uses, chosen from the vocabulary when the tokenizer's is missing or EOS.

The choice on small in-memory tokenizers (table-driven, one line per case), then the real thing: a tiny
Qwen2 whose tokenizer has pad = eos and ``<|fim_pad|>`` only in its vocabulary (as transformers builds
Qwen2.5's from a GGUF) goes through `grpo prep` and `grpo sft` under both backends, and Unsloth's own
GPU-loader check (``unsloth_zoo.pad_token.fix_pad_token``, which the CPU fallback skips) is run on both
tokenizers.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import REPO, SAMPLES, cli_env, grpo_cli, invoke, ok, tiny_qwen2_pad_eos

from cli.common import GrpoError
from cli.models import pad

EOS, BOS, UNK = "<|endoftext|>", "<s>", "<unk>"


def _tokenizer(vocab: list[str], *, added: tuple[str, ...] = (EOS,), pad_token: str | None = EOS, **special):
    """A word-level tokenizer over ``vocab`` (ids in list order); ``added``: its special added tokens."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({t: i for i, t in enumerate(vocab)}, unk_token=vocab[0]))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in added])
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=EOS, pad_token=pad_token, **special)


WORDS = ["a", "b", "keypad", "c"]
CASES = [
    # (vocabulary, tokenizer's pad, extra special tokens, embedding rows, expected pad, why)
    ([EOS, *WORDS, "<|fim_pad|>"], EOS, {}, None, "<|fim_pad|>", "a pad token"),  # Qwen2.5 from GGUF
    ([EOS, *WORDS, "<|fim_pad|>", "<pad>"], None, {}, None, "<pad>", "a pad token"),  # no pad; <pad> first
    ([EOS, *WORDS, "<|vision_pad|>"], EOS, {}, None, "<|vision_pad|>", "a pad token"),  # any bracketed *pad*
    ([EOS, *WORDS, "<|reserved_special_token_0|>", "<|reserved_special_token_1|>"], None, {}, None,
     "<|reserved_special_token_1|>", "an unused reserved token"),  # Llama 3 base: the last reserved one
    ([EOS, UNK, *WORDS], EOS, {"unk_token": UNK}, None, UNK, "the unknown token"),  # Llama 2 style
    ([EOS, *WORDS, "<|pad|>"], "<|pad|>", {}, None, "<|pad|>", "the tokenizer's own"),  # a good pad is kept
    ([EOS, *WORDS, "<|fim_pad|>", "<pad>"], EOS, {}, 6, "<|fim_pad|>", "a pad token"),  # <pad> has no row
    ([BOS, EOS, *WORDS, "<unused0>"], EOS, {"bos_token": BOS}, None, "<unused0>", "an unused reserved"),
]  # fmt: skip


@pytest.mark.parametrize(("vocab", "own", "special", "rows", "want", "why"), CASES)
def test_pad_choice(vocab, own, special, rows, want, why) -> None:
    tok = _tokenizer(vocab, pad_token=own, **special)
    size = len(tok)
    choice = pad.choose(tok, rows=rows)
    assert (choice.token, choice.id) == (want, vocab.index(want)) and choice.why.startswith(why)
    assert choice.changed == (want != own)
    pad.apply(tok, choice)
    # Same id, same vocabulary size (no new embedding row); the pad is now one token, skipped when decoding.
    assert tok.pad_token == want and tok.pad_token_id == vocab.index(want) and len(tok) == size
    ids = tok(f"a {want} b", add_special_tokens=False)["input_ids"]
    assert ids == [vocab.index(t) for t in ("a", want, "b")]
    assert tok.decode([vocab.index("a"), tok.pad_token_id], skip_special_tokens=True).strip() == "a"


def test_pad_choice_refuses_to_add_a_token() -> None:
    """Nothing to pad with: one line that names the way out, and no token added (no resize)."""
    tok = _tokenizer([EOS, *WORDS])  # "keypad" names no pad: it is a word
    with pytest.raises(GrpoError, match=r"pad_token: TOKEN.*does not add a token"):
        pad.choose(tok)
    assert len(tok) == 1 + len(WORDS)
    tok = _tokenizer([BOS, EOS, *WORDS], bos_token=BOS, unk_token=BOS)  # BOS as pad would mask every prompt
    with pytest.raises(GrpoError, match="no pad-named, reserved or unknown token"):
        pad.choose(tok)


def test_pad_from_the_config() -> None:
    tok = _tokenizer([EOS, *WORDS, "<|fim_pad|>"])
    choice = pad.choose(tok, requested="c")
    assert (choice.token, choice.id, choice.why) == ("c", 4, "pad_token in the config")
    with pytest.raises(GrpoError, match="is an EOS or BOS token"):
        pad.choose(tok, requested=EOS)
    with pytest.raises(GrpoError, match="not in the tokenizer's vocabulary"):
        pad.choose(tok, requested="<nope>")
    with pytest.raises(GrpoError, match="past the model's 3 embedding rows"):
        pad.choose(tok, requested="c", rows=3)
    # A model config's own EOS ids count as EOS too (Qwen2.5 Instruct stops at <|im_end|>).
    tok = _tokenizer([EOS, *WORDS, "<|im_end|>", "<|fim_pad|>"], pad_token="<|im_end|>")
    assert pad.choose(tok, eos_ids=[5]).token == "<|fim_pad|>"


@pytest.fixture(scope="module")
def pad_eos_run(tmp_path_factory):
    """The tiny Qwen2 with pad = eos, prepped (`grpo prep gsm8k --limit 16`)."""
    root = tmp_path_factory.mktemp("pad-eos")
    model = tiny_qwen2_pad_eos(root / "qwen2")
    run = root / "run"
    src = SAMPLES / "gsm8k_train.jsonl"
    result = invoke("prep", "gsm8k", "--source", src, "--limit", "16", "--model", model, "--run", run)
    assert result.exit_code == 0, result.output
    assert "pad token: <|fim_pad|> (id 600" in result.output  # said at the first stage
    return model, run


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["unsloth", "hf"])
def test_pad_eos_tokenizer_trains(pad_eos_run, backend, tmp_path) -> None:
    """SFT under either backend pads with <|fim_pad|>: said in one line, kept in the manifest, saved with the
    adapter; the embeddings keep their 601 rows."""
    import shutil

    from transformers import AutoTokenizer

    model, prepped = pad_eos_run
    run = tmp_path / "run"
    shutil.copytree(prepped, run)
    out = ok(grpo_cli("sft", "--run", str(run), "--backend", backend, "--max-steps", "1"))
    said = "pad token: <|fim_pad|> (id 600, a pad token of its vocabulary); the tokenizer had pad = eos"
    assert said in out
    recorded = json.loads((run / "manifest.json").read_text())["tokenizer"]
    assert recorded["pad_token"] == "<|fim_pad|>" and recorded["pad_token_id"] == 600
    assert recorded["tokenizer_pad"] == "<|endoftext|>" and recorded["eos_token"] == "<|endoftext|>"
    saved = AutoTokenizer.from_pretrained(run / "sft" / "adapter")
    assert (saved.pad_token, saved.pad_token_id, len(saved)) == ("<|fim_pad|>", 600, 601)
    adapter = json.loads((run / "sft" / "adapter" / "adapter_config.json").read_text())
    assert not adapter.get("modules_to_save")  # nothing resized, no embedding trained
    # Unsloth read the run's tokenizer from <run>/base/tokenizer; the hf backend needs no copy.
    assert (run / "base" / "tokenizer" / "tokenizer.json").is_file() == (backend == "unsloth")


UNSLOTH_CHECK = """
import json, sys
import unsloth  # noqa: F401  (unsloth_zoo needs it first)
from transformers import AutoConfig, AutoTokenizer
from unsloth_zoo.pad_token import fix_pad_token
model_dir, ours = sys.argv[1], sys.argv[2]
config = AutoConfig.from_pretrained(model_dir)
try:
    fix_pad_token(AutoTokenizer.from_pretrained(model_dir), model_config=config)
    raw = "accepted"
except RuntimeError as exc:
    raw = str(exc)
result = fix_pad_token(AutoTokenizer.from_pretrained(ours), model_config=config)
print(json.dumps({"raw": raw, "ours_changed": result["changed"]}))
"""


@pytest.mark.slow
def test_unsloth_gpu_check_refuses_pad_eos_and_accepts_the_runs_pad(pad_eos_run, tmp_path) -> None:
    """The check Unsloth's GPU loader runs refuses the tokenizer as it comes and leaves the run's alone."""
    from transformers import AutoTokenizer

    model, _ = pad_eos_run
    tok = AutoTokenizer.from_pretrained(model)
    pad.for_path(tok, model)
    tok.save_pretrained(tmp_path / "ours")
    proc = subprocess.run(
        [sys.executable, "-c", UNSLOTH_CHECK, str(model), str(tmp_path / "ours")],
        cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdict = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "Could not find a valid pad token" in verdict["raw"]
    assert verdict["ours_changed"] is False
