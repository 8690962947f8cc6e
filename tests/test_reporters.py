"""`grpo.report_to`: a missing reporter package is one line before anything is saved or loaded, and the
reporters really log, offline, inside the run directory (TensorBoard event files; SwanLab in local mode)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pandas as pd
import pytest
from helpers import cli_env, fresh_copy, grpo_cli, invoke, one_error_line

from cli.train.reporters import PACKAGES

TINY_GRPO = ["--backend", "hf", "--gens", "2", "--max-completion-length", "8", "--max-steps", "2"]


@pytest.mark.parametrize("reporter", ["tensorboard", "swanlab"])
def test_a_missing_reporter_is_named_before_anything_is_saved(runner, tmp_path: Path, monkeypatch, reporter):
    real = importlib.util.find_spec
    gone = {PACKAGES[reporter][0], "tensorboardX"}
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in gone else real(name, *a)
    )
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    (run / "config.yaml").write_text("model: tiny\n")
    # A whole train.parquet (the run directory's own checks come first): only the reporter is missing.
    pd.DataFrame({"question": ["What is 2 + 2?"], "answer": ["4"]}).to_parquet(run / "data" / "train.parquet")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    # In this process (find_spec is patched here), with the same one-line contract as helpers.fails_fast.
    line = one_error_line(invoke("grpo", "--run", str(run), "--report-to", reporter))
    assert line == (
        f"error: grpo.report_to is {reporter!r} but the {reporter!r} package is not installed: "
        f"pip install 'grpo[{reporter}]'"
    )
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def _grpo(run: Path, *args: str):
    env = {k: v for k, v in cli_env().items() if not k.startswith(("SWANLAB_", "TENSORBOARD_"))}
    proc = grpo_cli("grpo", "--run", str(run), *TINY_GRPO, *args, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc


@pytest.mark.slow
def test_tensorboard_writes_event_files_in_the_run(prepped: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="no tensorboard extra: pip install 'grpo[tensorboard]'")
    run = fresh_copy(prepped, tmp_path)
    proc = _grpo(run, "--report-to", "tensorboard")
    assert f"TensorBoard event files → {run / 'logs' / 'tensorboard'}" in proc.stdout
    events = list((run / "logs" / "tensorboard").rglob("events.out.tfevents.*"))
    assert events and all(e.stat().st_size > 0 for e in events)


@pytest.mark.slow
def test_swanlab_logs_locally_in_the_run(prepped: Path, tmp_path: Path) -> None:
    pytest.importorskip("swanlab", reason="no swanlab extra: pip install 'grpo[swanlab]'")
    run = fresh_copy(prepped, tmp_path)
    proc = _grpo(run, "--report-to", "swanlab")
    assert f"SwanLab (local) → {run / 'logs' / 'swanlog'}" in proc.stdout
    runs = list((run / "logs" / "swanlog").glob("run-*"))
    assert len(runs) == 1, os.listdir(run / "logs")
    assert list(runs[0].rglob("*.swanlab")) and (runs[0] / "logs").is_dir()
