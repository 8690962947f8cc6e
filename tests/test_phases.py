"""cli/train/phases.py: the per-step phase clock of `grpo grpo` (where a step's time goes)."""

from __future__ import annotations

import time

from cli.train.phases import PhaseTimes


def test_phases_are_timed_per_step_nested_once_and_reset() -> None:
    ticks: list[int] = []
    phases = PhaseTimes(sync=lambda: ticks.append(1))
    with phases.timed("train_step"):
        with phases.timed("rollout"):
            with phases.timed("generate"), phases.timed("generate"):  # re-entered: counted once
                time.sleep(0.01)
        with phases.timed("loss"):
            pass
    row = phases.take()
    assert set(row) == {f"phase_{k}_s" for k in ("train_step", "rollout", "generate", "loss", "backward")}
    assert 0.01 <= row["phase_generate_s"] <= row["phase_rollout_s"] <= row["phase_train_step_s"]
    assert row["phase_backward_s"] >= 0
    assert len(ticks) == 8, "the device is synchronised around each outermost timed call"
    assert phases.take() == {}, "a step's counters start from zero"


def test_a_phase_that_raises_is_still_counted() -> None:
    phases = PhaseTimes()
    try:
        with phases.timed("rollout"):
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert "phase_rollout_s" in phases.take()
