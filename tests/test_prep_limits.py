"""Hardening, round 1 (docs/history.md): prep refuses absurd input without reading it whole, and keeps only
prompts that leave room for a completion. Each failure is one line naming the file (and line), exit 2, and the
run directory as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import REPO, invoke, one_error_line

SAMPLE = REPO / "cli" / "data" / "samples" / "gsm8k_train.jsonl"


def _rows(n: int) -> list[str]:
    return SAMPLE.read_text().splitlines()[:n]


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in run.rglob("*") if p.is_file()}


def _prep(run: Path, source: Path, *extra: str):
    return invoke("prep", "gsm8k", "--source", source, "--model", "tiny", "--run", run, *extra)


def test_an_endless_line_is_refused_without_reading_it(tiny_run: Path, tmp_path: Path) -> None:
    """`--source` pointing at /dev/zero (here behind a .jsonl name) was read until memory ran out."""
    link = tmp_path / "zeros.jsonl"
    link.symlink_to("/dev/zero")
    before = _files(tiny_run)
    line = one_error_line(_prep(tiny_run, link))
    assert line == f"error: --source {link} is a character device, not a regular file: nothing read"
    assert _files(tiny_run) == before


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_line_over_the_cap_is_refused_naming_the_line(tiny_run: Path, tmp_path: Path, suffix: str) -> None:
    src = tmp_path / f"big{suffix}"
    head = "question,answer\n" + "a,1\n" if suffix == ".csv" else "\n".join(_rows(2)) + "\n"
    with open(src, "w") as fh:
        fh.write(head)
        fh.write("x" * (64 << 20))  # one 64 MiB line with no end: only its first MiB is read
    before = _files(tiny_run)
    result = _prep(tiny_run, src)
    line = one_error_line(result)
    assert result.exit_code == 2
    assert line.startswith(f"error: {src}: line 3 is longer than 1 MiB"), line
    assert line.endswith("nothing read past it")
    assert _files(tiny_run) == before


def test_a_huge_json_array_is_refused_by_size(tiny_run: Path, tmp_path: Path, monkeypatch) -> None:
    from cli.prep import files as data_files

    monkeypatch.setattr(data_files, "MAX_JSON_BYTES", 1000)
    src = tmp_path / "rows.json"
    src.write_text(json.dumps([json.loads(r) for r in _rows(20)]))
    line = one_error_line(_prep(tiny_run, src))
    assert "a .json array is read whole" in line and "convert it to JSON Lines" in line


def test_prompts_without_room_for_a_completion_are_dropped(tiny_run: Path, tmp_path: Path) -> None:
    """A 5 MB question was kept as a 2.5 M-token prompt at max_seq_length 2048."""
    import pandas as pd

    rows = [json.loads(r) for r in _rows(12)]
    long_q = {"question": "How many? " + "apple " * 3000, "answer": "x\n#### 3"}  # ~3K tokens
    src = tmp_path / "rows.parquet"
    pd.DataFrame([*rows, long_q]).to_parquet(src)
    result = _prep(tiny_run, src, "--eval-size", "2")
    assert result.exit_code == 0, result.output
    assert "1 prompt(s) dropped, longer than 1536 tokens: max_seq_length 2048 less 512" in result.output
    stats = json.loads((tiny_run / "data" / "stats.json").read_text())
    assert stats["cut_no_room_for_completion"] == 1
    assert stats["prompt_tokens_kept"]["max"] <= 1536
    kept = pd.read_parquet(tiny_run / "data" / "train.parquet")
    assert not kept["question"].str.startswith("How many? apple").any()


def test_a_file_whose_only_prompt_cannot_fit_writes_nothing(tiny_run: Path, tmp_path: Path) -> None:
    import pandas as pd

    src = tmp_path / "one.parquet"
    question = "Sum these: " + "1 + " * 400_000 + "1?"  # 1.6 MB, one row
    pd.DataFrame([{"question": question, "answer": "x\n#### 400001"}]).to_parquet(src)
    before = _files(tiny_run)
    result = _prep(tiny_run, src)
    line = one_error_line(result)
    assert result.exit_code == 2
    assert line.startswith(f"error: every prompt of {src} is longer than 1536 tokens"), line
    assert line.endswith("nothing written: raise max_seq_length")
    assert _files(tiny_run) == before
    assert os.path.exists(tiny_run / "base")
