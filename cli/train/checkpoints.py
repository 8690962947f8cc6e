"""Checkpoints and attempts of a training stage: whole checkpoints only, one folder per attempt.

A checkpoint is written under a staging name and renamed when whole (the trainer's
``_save_checkpoint``, :mod:`cli.train.trainer`), so a kill at any moment leaves the whole checkpoint or
none. Each `grpo grpo` without --resume is a new attempt: its checkpoints go to
<run>/grpo/checkpoints/attempt-<N>/, so an old attempt's checkpoint-16 is never taken for the new one's
checkpoint-4 (docs/history.md "First runs"), and --resume continues the most recent attempt. Runs made before
attempts
existed keep their checkpoints directly under checkpoints/: that counts as attempt 1.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from cli.common import GrpoError
from cli.run.console import err_console
from cli.run.rundir import RunDir
from cli.run.validate import checkpoint_problem


def latest_checkpoint(folder: Path, skipped: list[tuple[Path, str]] | None = None) -> Path | None:
    """The usable ``checkpoint-N`` with the highest N. A checkpoint is written under a staging name and
    renamed when whole (:mod:`cli.train.trainer`), but a disk, a copy or a hand can still damage one:
    it counts only when its files parse (:func:`cli.run.validate.checkpoint_problem`: the trainer state
    loads and is at step N, the adapter's config and safetensors header read and agree). The newer ones
    passed over land in ``skipped`` as (folder, why), for a note."""
    if not folder.is_dir():
        return None
    found = []
    for child in folder.iterdir():
        m = re.fullmatch(r"checkpoint-(\d+)", child.name)
        if m and child.is_dir():
            found.append((int(m.group(1)), child))
    for _, child in sorted(found, reverse=True):
        problem = checkpoint_problem(child)
        if problem is None:
            return child
        if skipped is not None:
            skipped.append((child, problem))
    return None


def skip_notes(skipped: list[tuple[Path, str]], chosen: Path | None) -> None:
    """One note per checkpoint passed over, naming it and what is wrong, and where resume goes instead."""
    for ckpt, problem in skipped:
        instead = f"resuming from {chosen.name}" if chosen is not None else "no earlier checkpoint is whole"
        err_console.print(
            f"[yellow]note:[/] skipping {ckpt}: {problem} — {instead} (delete it to silence this note)",
            soft_wrap=True,
        )


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
    skipped: list[tuple[Path, str]] = []  # damaged checkpoints passed over, named in notes
    env = os.environ.get(ATTEMPT_ENV, "").strip()
    if env.isdigit():  # a rank of `--gpus N`: the parent chose (the folder may exist by now)
        n = int(env)
        folder = known.get(n, checkpoints / f"attempt-{n}")
        return n, folder, latest_checkpoint(folder) if resume else None
    if resume:
        if not known:
            latest_checkpoint(checkpoints, skipped)  # damaged ones of a run from before attempts: say so
            skip_notes(skipped, None)
            whole = "whole checkpoint" if skipped else "checkpoint"
            raise GrpoError(f"--resume: no {whole} in {checkpoints}: run `grpo grpo --save-steps N` first")
        n, folder = next(reversed(known.items()))
        ckpt = latest_checkpoint(folder, skipped)
        skip_notes(skipped, ckpt)
        if ckpt is None:
            older = [k for k, f in known.items() if k < n and latest_checkpoint(f) is not None]
            hint = (
                f"; attempt {older[-1]} has one: --resume continues only the most recent attempt"
                if older
                else ""
            )
            saved = "has no whole checkpoint (see the notes above)" if skipped else "saved no checkpoint"
            raise GrpoError(
                f"--resume: the most recent attempt ({n}, {folder}) {saved}{hint}; "
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


INPUTS = "inputs.json"  # in each attempt folder: the data and format contract the attempt began on


def attempt_inputs(rd: RunDir, contract: str) -> dict[str, str]:
    """What an attempt trains on: the train data's sha256 (prep's record), `grpo filter`'s kept prompts (the
    sha256 of data/grpo_prompts.parquet, when there), and the format contract's hash."""
    from cli.run.atomic import file_sha256
    from cli.run.data import FILTERED, train_sha256

    out = {"train_sha256": train_sha256(rd), "format_contract_sha256": contract}
    if (rd.data_dir / FILTERED).is_file():
        out["filtered_sha256"] = file_sha256(rd.data_dir / FILTERED)
    return out


def check_resume_inputs(folder: Path, attempt: int, now: dict[str, str]) -> None:
    """``--resume`` continues an attempt only on the data and format contract it began on: a re-prep to other
    data, or a ``format:`` changed since, trained on with no word."""
    try:
        began = json.loads((folder / INPUTS).read_text())
    except (OSError, ValueError):
        return  # an attempt from before this record
    words = {"train_sha256": "data/train.parquet", "filtered_sha256": "data/grpo_prompts.parquet",
             "format_contract_sha256": "format contract"}  # fmt: skip
    changed = [k for k in words if isinstance(began, dict) and began.get(k) != now.get(k) and began.get(k)]
    if changed:
        what = ", ".join(
            f"{words[k]} ({str(began[k])[:12]}… then, {str(now.get(k) or 'none')[:12]}… now)" for k in changed
        )
        raise GrpoError(
            f"--resume: attempt {attempt} began on another {what}: its checkpoint would go on training on "
            "inputs it did not start with; start a new attempt with `grpo grpo` (without --resume), or put "
            "the data and format back"
        )
