"""Tests for cli/train/checkpoints.py."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_latest_checkpoint_picks_the_highest_step(tmp_path: Path) -> None:
    from cli.train.checkpoints import latest_checkpoint

    assert latest_checkpoint(tmp_path / "none") is None
    for n in (2, 10, 9):
        (tmp_path / f"checkpoint-{n}").mkdir()
        (tmp_path / f"checkpoint-{n}" / "adapter_model.safetensors").write_bytes(b"x")
        (tmp_path / f"checkpoint-{n}" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-11").mkdir()  # no adapter inside: half-written, skipped
    (tmp_path / "checkpoint-12").mkdir()  # an adapter but no trainer state: not whole, skipped
    (tmp_path / "checkpoint-12" / "adapter_model.safetensors").write_bytes(b"x")
    (tmp_path / ".checkpoint-13.partial").mkdir()  # a save in progress or killed: never a checkpoint
    assert latest_checkpoint(tmp_path).name == "checkpoint-10"


def _ckpt(folder: Path, step: int) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "adapter_model.safetensors").write_bytes(b"x")
    (path / "trainer_state.json").write_text("{}")
    return path


def test_attempts_keep_checkpoints_apart_and_resume_the_most_recent(tmp_path: Path) -> None:
    from cli.common import GrpoError
    from cli.train.checkpoints import plan_attempt

    ckpts = tmp_path / "grpo" / "checkpoints"
    with pytest.raises(GrpoError, match="no checkpoint"):
        plan_attempt(ckpts, resume=True)
    assert plan_attempt(ckpts, resume=False) == (1, ckpts / "attempt-1", None)
    # Issue #15's run: an earlier attempt left checkpoint-16 (here in the flat layout of older runs), the
    # next attempt was interrupted at step 4: --resume must continue that one, not checkpoint-16.
    _ckpt(ckpts, 16)
    n, folder, _ = plan_attempt(ckpts, resume=False)
    assert (n, folder) == (2, ckpts / "attempt-2")
    interrupted = _ckpt(folder, 4)
    assert plan_attempt(ckpts, resume=True) == (2, folder, interrupted)
    assert plan_attempt(ckpts, resume=False)[:2] == (3, ckpts / "attempt-3")
    # A newer attempt that saved nothing is not silently skipped for an older one.
    (ckpts / "attempt-3").mkdir()
    with pytest.raises(GrpoError, match=r"most recent attempt \(3.*attempt 2 has one"):
        plan_attempt(ckpts, resume=True)
