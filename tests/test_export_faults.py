"""Hardening, round 1 (docs/history.md): `grpo export --allow-zero`, and an export whose run directory or
--out is read-only.

Before: the artifacts were written, then the command exited 1 (zero tensors) or 2 (the manifest could
not be written). Now a destination that cannot be written is refused before anything is built (one line,
exit 2, nothing written), and --allow-zero does what it says: the export succeeds with a warning."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import copy_run, invoke, one_error_line, train_adapter

FAST = ["--lora", "--verify", "1", "--verify-tokens", "4"]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """``folder`` cannot be written into, even by root (an immutable folder, as on a read-only mount)."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("cannot make a folder read-only for root here (chattr +i)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def _untrained(run_dir: Path, dest: Path) -> Path:
    run = copy_run(run_dir, dest)
    shutil.rmtree(run / "grpo")
    shutil.rmtree(run / "sft" / "adapter")
    train_adapter(str(run / "base" / "tiny"), run / "sft" / "adapter", steps=0, init_only=True)
    return run


def test_allow_zero_exports_with_a_warning(run_dir: Path, tmp_path: Path) -> None:
    run = _untrained(run_dir, tmp_path / "run")
    result = invoke("export", "--run", run, *FAST, "--allow-zero")
    assert result.exit_code == 0, result.output
    assert "error:" not in result.output
    report = json.loads((run / "export" / "verify.json").read_text())
    assert any(w.startswith("all-zero tensors kept (--allow-zero): lora") for w in report["warnings"])
    assert (run / "export" / "lora" / "adapter_model.safetensors").is_file()
    assert json.loads((run / "manifest.json").read_text())["stages"]["export"]["source"] == "sft"


def test_zero_tensors_in_a_built_artifact_write_nothing(run_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """The adapter passed the check, but an artifact has all-zero tensors: the export fails, exit 1,
    before anything is moved into place."""
    from cli.export import builders

    run = copy_run(run_dir, tmp_path / "run")
    before = _files(run)
    real = builders.build_all

    def with_zeros(job):
        artifacts = real(job)
        artifacts[0]["zero_tensors"] = ["model.layers.0.mlp.up_proj.lora_B.weight"]
        return artifacts

    monkeypatch.setattr(builders, "build_all", with_zeros)
    result = invoke("export", "--run", run, *FAST)
    assert result.exit_code == 1
    line = one_error_line(result)
    assert line == (
        "error: verification failed: all-zero tensors in lora (1); nothing written (--allow-zero keeps them)"
    )
    assert _files(run) == before


def test_a_read_only_run_directory_is_refused_before_building(run_dir: Path, tmp_path: Path) -> None:
    run = copy_run(run_dir, tmp_path / "run")
    out = tmp_path / "elsewhere"
    before = _files(run)
    with read_only(run):
        result = invoke("export", "--run", run, *FAST, "--out", out)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert line.startswith(f"error: {run} is not writable ("), line
    assert "export records what it wrote in the run's manifest.json" in line
    assert not out.exists()
    assert _files(run) == before


def test_a_read_only_out_is_refused_before_building(run_dir: Path, tmp_path: Path) -> None:
    run = copy_run(run_dir, tmp_path / "run")
    out = tmp_path / "locked"
    out.mkdir()
    before = _files(run)
    with read_only(out):
        result = invoke("export", "--run", run, *FAST, "--out", out)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert line.startswith(f"error: output directory {out} is not writable"), line
    assert _files(run) == before
    assert list(out.iterdir()) == []
