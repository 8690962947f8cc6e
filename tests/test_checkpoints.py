"""Tests for cli/train/checkpoints.py: which checkpoint a run resumes from, and attempts."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import checkpoint_files


def _ckpt(folder: Path, step: int) -> Path:
    return checkpoint_files(folder / f"checkpoint-{step}", step)


def test_latest_checkpoint_picks_the_highest_whole_step(tmp_path: Path) -> None:
    from cli.train.checkpoints import latest_checkpoint

    assert latest_checkpoint(tmp_path / "none") is None
    for n in (2, 10, 9):
        _ckpt(tmp_path, n)
    (tmp_path / "checkpoint-11").mkdir()  # no adapter inside: half-written, skipped
    (_ckpt(tmp_path, 12) / "trainer_state.json").unlink()  # an adapter but no trainer state: skipped
    (tmp_path / ".checkpoint-13.partial").mkdir()  # a save in progress or killed: never a checkpoint
    skipped: list[tuple[Path, str]] = []
    assert latest_checkpoint(tmp_path, skipped).name == "checkpoint-10"
    assert [(p.name, why) for p, why in skipped] == [
        ("checkpoint-12", "trainer_state.json is missing"),
        ("checkpoint-11", "trainer_state.json is missing"),
    ]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        # Hardening, round 2 (docs/history.md), row 3: valid weights, 0-byte trainer_state.json and
        # adapter_config.json.
        (lambda c: [(c / n).write_bytes(b"") for n in ("trainer_state.json", "adapter_config.json")],
         "trainer_state.json is corrupt (empty: a write cut short)"),
        # Row 4: the trainer state cut off after 17 bytes.
        (lambda c: (c / "trainer_state.json").write_text('{\n  "best_global'),
         "trainer_state.json is corrupt (not JSON: Unterminated string starting at, line 2)"),
        (lambda c: (c / "adapter_config.json").write_text('{"r": 2}'),
         "adapter_config.json is not a peft adapter config (no peft_type)"),
        (lambda c: (c / "adapter_model.safetensors").write_bytes(b"\x10" * 64),
         "adapter_model.safetensors is corrupt (truncated or not safetensors: 64 bytes)"),
        (lambda c: (c / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 4}'),
         "adapter_model.safetensors has rank 2 in base_model.model.model.layers.0.self_attn.q_proj.lora_A"
         ".weight, but adapter_config.json says 4 (the config and the weights come from different adapters)"),
        (lambda c: (c / "optimizer.pt").write_bytes(b"PK\x03\x04 cut"),
         "optimizer.pt is corrupt or truncated (not a whole torch archive)"),
        (lambda c: (c / "trainer_state.json").write_text('{"global_step": 3}'),
         "trainer_state.json is at step 3, not 9"),
    ],
    ids=["empty-state-and-config", "truncated-state", "no-peft-type", "garbage-weights", "rank-mismatch",
         "torn-optimizer", "wrong-step"],
)  # fmt: skip
def test_a_damaged_checkpoint_is_skipped_and_named(tmp_path: Path, damage, why: str) -> None:
    from cli.train.checkpoints import latest_checkpoint

    whole = _ckpt(tmp_path, 4)
    damage(_ckpt(tmp_path, 9))
    skipped: list[tuple[Path, str]] = []
    assert latest_checkpoint(tmp_path, skipped) == whole
    assert skipped == [(tmp_path / "checkpoint-9", why)]


def test_attempts_keep_checkpoints_apart_and_resume_the_most_recent(tmp_path: Path) -> None:
    from cli.common import GrpoError
    from cli.train.checkpoints import plan_attempt

    ckpts = tmp_path / "grpo" / "checkpoints"
    with pytest.raises(GrpoError, match="no checkpoint"):
        plan_attempt(ckpts, resume=True)
    assert plan_attempt(ckpts, resume=False) == (1, ckpts / "attempt-1", None)
    # The first runs (docs/history.md): an earlier attempt left checkpoint-16 (here in the flat layout of
    # older runs), the next attempt was interrupted at step 4: --resume must continue that one, not
    # checkpoint-16.
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
