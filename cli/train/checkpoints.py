"""Checkpoints and attempts of a training stage: whole checkpoints only, one folder per attempt.

A checkpoint is written under a staging name and renamed when whole (the trainer's
``_save_checkpoint``, :mod:`cli.train.trainer`), so a kill at any moment leaves the whole checkpoint or
none. Each `grpo grpo` without --resume is a new attempt: its checkpoints go to
<run>/grpo/checkpoints/attempt-<N>/, so an old attempt's checkpoint-16 is never taken for the new one's
checkpoint-4 (issue #15), and --resume continues the most recent attempt. Runs made before attempts
existed keep their checkpoints directly under checkpoints/: that counts as attempt 1.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cli.common import GrpoError
from cli.run.rundir import RunDir


def latest_checkpoint(folder: Path) -> Path | None:
    """The complete ``checkpoint-N`` with the highest N: it holds the adapter and the trainer state (a
    checkpoint is written under a staging name and renamed when whole: :mod:`cli.train.trainer`)."""
    best: tuple[int, Path] | None = None
    if not folder.is_dir():
        return None
    for child in folder.iterdir():
        m = re.fullmatch(r"checkpoint-(\d+)", child.name)
        if (
            m
            and child.is_dir()
            and (child / "adapter_model.safetensors").exists()
            and (child / "trainer_state.json").exists()
        ):
            n = int(m.group(1))
            if best is None or n > best[0]:
                best = (n, child)
    return best[1] if best else None


STAGING = re.compile(r"\.checkpoint-\d+\.partial")


def drop_partial_checkpoints(folder: Path) -> list[str]:
    """Remove what a killed save left under its staging name (main process); returns their names."""
    import shutil

    from cli.run.ranks import is_main

    if not folder.is_dir() or not is_main():
        return []
    dropped = [c.name for c in folder.iterdir() if c.is_dir() and STAGING.fullmatch(c.name)]
    for name in dropped:
        shutil.rmtree(folder / name, ignore_errors=True)
    return dropped


ATTEMPT_ENV = "GRPO_ATTEMPT"  # the parent of `--gpus N` decides the attempt; its ranks read it here


def attempts(checkpoints: Path) -> dict[int, Path]:
    """``{attempt number: its checkpoint folder}``, oldest first."""
    found: dict[int, Path] = {}
    if not checkpoints.is_dir():
        return found
    if latest_checkpoint(checkpoints) is not None:
        found[1] = checkpoints  # the flat layout of runs from before attempts
    for child in checkpoints.iterdir():
        m = re.fullmatch(r"attempt-(\d+)", child.name)
        if m and child.is_dir():
            found[int(m.group(1))] = child
    return dict(sorted(found.items()))


def plan_attempt(checkpoints: Path, resume: bool) -> tuple[int, Path, Path | None]:
    """``(attempt, its checkpoint folder, checkpoint to resume or None)`` for a `grpo grpo` run."""
    known = attempts(checkpoints)
    env = os.environ.get(ATTEMPT_ENV, "").strip()
    if env.isdigit():  # a rank of `--gpus N`: the parent chose (the folder may exist by now)
        n = int(env)
        folder = known.get(n, checkpoints / f"attempt-{n}")
        return n, folder, latest_checkpoint(folder) if resume else None
    if resume:
        if not known:
            raise GrpoError(f"--resume: no checkpoint in {checkpoints}: run `grpo grpo --save-steps N` first")
        n, folder = next(reversed(known.items()))
        ckpt = latest_checkpoint(folder)
        if ckpt is None:
            older = [k for k, f in known.items() if k < n and latest_checkpoint(f) is not None]
            hint = (
                f"; attempt {older[-1]} has one: --resume continues only the most recent attempt"
                if older
                else ""
            )
            raise GrpoError(
                f"--resume: the most recent attempt ({n}, {folder}) saved no checkpoint{hint}; "
                "start a new attempt with `grpo grpo`"
            )
        return n, folder, ckpt
    n = max(known, default=0) + 1
    return n, checkpoints / f"attempt-{n}", None


def next_attempt_from_metrics(run: RunDir, stage: str) -> int:
    """1 + the highest ``attempt`` of ``stage`` rows in metrics.jsonl (SFT has no checkpoints to count)."""
    return (
        max((int(r.get("attempt") or 1) for r in run.read_metrics() if r.get("stage") == stage), default=0)
        + 1
    )
