"""cli/models/gguf_import.py (+ gguf_file.py, gguf_tokenizer.py): `--model FILE.gguf`.

Bad files first (written here with the ``gguf`` package's writer, then broken): one line naming the file and
why, nothing in the cache. Then the round trip on tiny Qwen3 / Qwen2 / Llama models: our own exporter
(llama.cpp's converter) writes each as a GGUF, `grpo prep --model FILE.gguf` imports it through transformers'
GGUF loader, and the imported folder must be the model we started from: the same added and special tokens
(the GGUF's control / user-defined token types), the same token ids on real text, the same weights up to
bf16 rounding; a second stage finds it without converting again, a copy of the file without importing again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers import SAMPLES, invoke, needs_gguf, one_error_line, tiny_llama, tiny_qwen2_pad_eos


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty GRPO_CACHE: imports land here, not in the user's ~/.cache/grpo."""
    root = tmp_path / "cache"
    monkeypatch.setenv("GRPO_CACHE", str(root))
    return root


def _written_gguf(path: Path, arch: str = "qwen2") -> Path:
    """A small, whole GGUF (metadata, a vocabulary, two tensors) from the ``gguf`` package's writer."""
    import numpy as np
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), arch)
    writer.add_block_count(1)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["<|endoftext|>", "a", "b"])
    writer.add_token_types([3, 1, 1])
    writer.add_tensor("token_embd.weight", np.ones((3, 8), dtype=np.float32))
    writer.add_tensor("output_norm.weight", np.ones((8,), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _broken(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Broken files and the words their error line must hold."""
    good = _written_gguf(tmp_path / "good.gguf").read_bytes()
    cases = {
        "magic": (b"GGML" + good[4:], "is not a GGUF file (it starts with b'GGML'"),
        "header": (good[:60], "is cut short: the file ends inside its header"),
        "data": (good[:-16], "is cut short: its tensors need"),
        "version": (good[:4] + (1).to_bytes(4, "little") + good[8:], "is GGUF version 1"),
        "tiny": (good[:10], "too short for a GGUF header"),
    }
    out = {}
    for name, (data, words) in cases.items():
        (tmp_path / f"{name}.gguf").write_bytes(data)
        out[name] = (tmp_path / f"{name}.gguf", words)
    return out


def test_bad_gguf_files_are_one_line_before_anything_is_written(tmp_path, cache) -> None:
    from cli.common import GrpoError
    from cli.models.gguf_import import import_gguf

    cases = _broken(tmp_path)
    cases["arch"] = (_written_gguf(tmp_path / "arch.gguf", arch="nosuch"), "architecture 'nosuch' is not one")
    cases["missing"] = (tmp_path / "none.gguf", "does not exist")
    (tmp_path / "dir.gguf").mkdir()
    cases["dir"] = (tmp_path / "dir.gguf", "is not a file")
    for name, (path, words) in cases.items():
        with pytest.raises(GrpoError) as err:
            import_gguf(path)
        assert words in str(err.value) and str(path) in str(err.value), (name, str(err.value))
    assert not cache.exists() or not any(cache.rglob("*"))  # nothing written, not even a temp folder


def test_bad_gguf_through_the_cli(tmp_path, cache) -> None:
    """`grpo prep --model broken.gguf`: one `error:` line, no traceback, no cache folder."""
    path, words = _broken(tmp_path)["data"]
    src = SAMPLES / "gsm8k_train.jsonl"
    line = one_error_line(
        invoke("prep", "gsm8k", "--source", src, "--model", path, "--run", tmp_path / "run")
    )
    assert words in line and "data.gguf" in line
    assert not cache.exists() or not any(cache.rglob("*"))


def _original(kind: str, root: Path) -> Path:
    from cli.models.resolve import build_tiny
    from py_rewards.spec import get_spec

    if kind == "qwen3":
        return build_tiny(root / "qwen3", get_spec("seed000"))
    return tiny_llama(root / "llama") if kind == "llama" else tiny_qwen2_pad_eos(root / "qwen2")


def _added(tok) -> dict[int, tuple[str, bool]]:
    return {i: (t.content, t.special) for i, t in tok.added_tokens_decoder.items()}


@pytest.mark.slow
@needs_gguf
@pytest.mark.parametrize("kind", ["qwen3", "qwen2", "llama"])
def test_gguf_round_trip(kind, tmp_path, cache) -> None:
    import shutil

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cli.export.gguf import convert_many

    original = _original(kind, tmp_path)
    gguf = tmp_path / f"{kind}-f16.gguf"
    convert_many(original, [(gguf, "f16")])
    src = SAMPLES / "gsm8k_train.jsonl"
    args = ("prep", "gsm8k", "--source", src, "--limit", "8", "--model", gguf)
    result = invoke(*args, "--run", tmp_path / "run")
    assert result.exit_code == 0, result.output
    assert "importing the GGUF" in result.output and "imported in" in result.output
    (folder,) = [p for p in (cache / "gguf").iterdir() if not p.name.startswith(".")]
    record = json.loads((folder / "grpo-import.json").read_text())
    assert record["sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert folder.name.endswith(record["sha256"][:12])

    # The tokenizer as the original has it: added tokens with their special flag (from the GGUF's control /
    # user-defined token types), the special tokens, the same ids on real text.
    mine, theirs = AutoTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(original)
    assert _added(mine) == _added(theirs) and len(mine) == len(theirs)
    for role in ("eos_token", "pad_token", "bos_token"):
        assert getattr(mine, role) == getattr(theirs, role), role
    texts = [json.loads(line)["answer"] for line in src.read_text().splitlines()[:40]]
    texts.append("<|endoftext|>Q<start_working_out>x<end_working_out><SOLUTION>18</SOLUTION>")
    assert [mine(t)["input_ids"] for t in texts] == [theirs(t)["input_ids"] for t in texts]

    # The weights, up to the f16 file and the bf16 folder.
    a = AutoModelForCausalLM.from_pretrained(original, dtype=torch.float32)
    b = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    sa, sb = a.state_dict(), b.state_dict()
    assert set(sa) == set(sb)
    assert all(torch.allclose(sa[k], sb[k], rtol=1e-2, atol=1e-3) for k in sa)
    ids = torch.tensor([theirs(texts[0])["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(a(ids).logits, b(ids).logits, atol=0.05)

    # A later stage finds the folder by the file's (path, size, mtime); a copy is hashed, not imported again.
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    again = invoke(*args, "--run", tmp_path / "run2")
    assert again.exit_code == 0 and "importing" not in again.output and "hashing" not in again.output
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(gguf, copy)
    moved = invoke(
        "prep", "gsm8k", "--source", src, "--limit", "8", "--model", copy, "--run", tmp_path / "run3"
    )
    assert moved.exit_code == 0 and "hashing" in moved.output and "importing" not in moved.output
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert len(json.loads((folder / "grpo-import.json").read_text())["seen"]) == 2
    assert [p.name for p in (cache / "gguf").iterdir()] == [folder.name]  # no temp folder left
