"""How a training stage ends: it runs to the end, or Ctrl-C (or SIGTERM) stops it.

A stage stopped by Ctrl-C still leaves what a finished one does — its adapter (``<run>/<stage>/adapter``)
and its manifest entry, which says ``interrupted_at_step`` — from the weights of the checkpoint it saved,
so `grpo eval` and `grpo export` find it and `grpo grpo --resume` continues from the same step. SIGTERM
(`kill`, systemd, Slurm, Kubernetes) does the same; the exit code is 128 + the signal's number, as a shell
reports it: 130 after Ctrl-C, 143 after SIGTERM. The signal handling itself is
:class:`cli.train.live.Interrupt`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from cli.run import signals
from cli.run.atomic import follow_umask
from cli.run.console import err_console
from cli.run.ranks import any_rank, launched
from cli.train.checkpoints import drop_partial_checkpoints, latest_checkpoint
from cli.train.live import Interrupt, StepAbandoned


def train_until_stopped(trainer: Any, *, resume: Path | None, interrupt: Interrupt, stage: str) -> int | None:
    """``trainer.train()``; returns None when it ran to the end, or the step Ctrl-C stopped it at (its
    checkpoint saved: the stage then saves its adapter from the same weights and records the stop)."""
    ckpt_dir = Path(trainer.args.output_dir)
    dropped = drop_partial_checkpoints(ckpt_dir)
    if dropped:
        left = ", ".join(sorted(dropped))
        err_console.print(f"[yellow]note:[/] removed what an interrupted save left: {left}")
    try:
        with interrupt.installed():
            trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    except StepAbandoned:
        pass  # Ctrl-C in a rollout: no weight changed since the last optimizer step, saved below
    except KeyboardInterrupt:
        # A second Ctrl-C outside a rollout: the step under way may have half-updated the weights.
        last = latest_checkpoint(ckpt_dir)
        where = f"the last checkpoint is {last}" if last else "nothing was saved"
        err_console.print(f"stopped at once during step {int(trainer.state.global_step) + 1}: {where}")
        raise typer.Exit(0 if launched() else signals.exit_code()) from None
    if not any_rank(interrupt.requested):  # every rank stopped at the same step (see live.py)
        return None
    step = int(trainer.state.global_step)
    if step == 0:
        err_console.print(f"{stage}: stopped before the first step: nothing saved")
        raise typer.Exit(0 if launched() else signals.exit_code())
    if not (ckpt_dir / f"checkpoint-{step}").exists():  # stopped in a rollout, or saving was off
        trainer._save_checkpoint(trainer.model, trial=None)
        follow_umask(ckpt_dir / f"checkpoint-{step}")
    return step


def stop_fields(stopped: int | None, checkpoints: Path) -> dict[str, Any]:
    """What a summary (and the manifest) says about a stage stopped by Ctrl-C at step ``stopped``."""
    if stopped is None:  # a finished run clears what an interrupted one of the stage said in the manifest
        return {"interrupted_at_step": None, "checkpoint": None}
    return {"interrupted_at_step": stopped, "checkpoint": str(checkpoints / f"checkpoint-{stopped}")}


def interrupted_note(summary: dict[str, Any], resume_hint: str) -> None:
    """After a stage stopped by Ctrl-C or SIGTERM has saved its adapter and recorded itself: say so, exit
    130 or 143."""
    step = summary["interrupted_at_step"]
    err_console.print(
        f"interrupted at step {step}: adapter saved to {summary['adapter']}, checkpoint "
        f"{summary['checkpoint']} — {resume_hint}",
        soft_wrap=True,
    )
    # A launched rank ends cleanly (torchrun would report a non-zero exit as a crash); the parent
    # `grpo grpo --gpus N` knows it was interrupted and exits 130 (143: SIGTERM).
    raise typer.Exit(0 if launched() else signals.exit_code())
