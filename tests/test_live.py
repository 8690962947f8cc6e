"""Tests for cli/train/live.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest


def test_live_view_row_and_hints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli.run.rundir import RunDir
    from cli.train.live import HINT_LOSS_ZERO, HINT_ZERO_STD, LiveSpec, make_callback
    from cli.train.rewards import RewardTracker
    from cli.train.trainer import Observers

    run = RunDir(tmp_path / "run")
    tracker = RewardTracker(seconds=0.01, format_hits=1, format_total=4)
    spec = LiveSpec(max_steps=10, reward_names=["match_format_exactly"])
    live = make_callback(run, "grpo", spec, Observers(tracker=tracker))
    state = SimpleNamespace(global_step=1, max_steps=10, is_world_process_zero=True)
    live.on_train_begin(None, state, None)
    live.on_step_end(None, state, SimpleNamespace(should_save=False, should_training_stop=False))
    logs = {
        "loss": 0.0,
        "reward": -3.0,
        "reward_std": 0.0,
        "frac_reward_zero_std": 1.0,
        "rewards/match_format_exactly/mean": 0.75,
        "completions/mean_length": 31.0,
        "sampling/importance_sampling_ratio/mean": 0.987,
        "sampling/sampling_logp_difference/mean": 0.0123,
    }
    live.on_log(None, state, None, logs=logs)
    row = json.loads(run.metrics_path.read_text().splitlines()[0])
    assert row["stage"] == "grpo" and row["step"] == 1 and row["format_hit_rate"] == 0.25
    assert row["rewards/match_format_exactly/mean"] == 0.75 and row["reward_seconds"] == 0.01
    assert row["eta_seconds"] is None  # no ETA from the first step alone: it carries the compile time
    out = capsys.readouterr().out
    assert "grpo 1/10" in out and "format 25%" in out
    assert "IS 0.987 (Δ 0.012/tok)" in out  # vLLM rollouts: what weighs each completion, on the line
    assert HINT_ZERO_STD in out and HINT_LOSS_ZERO in out


def test_eta_is_smoothed_and_never_jumps_tenfold(tmp_path: Path) -> None:
    from cli.run.rundir import RunDir
    from cli.train.live import LiveSpec, make_callback

    live = make_callback(RunDir(tmp_path / "run"), "grpo", LiveSpec(max_steps=100, quiet=True))
    # A CPU run's step times: a slow first step (compiles), then completions of very different lengths.
    times = [130.0, 4.2, 28.0, 3.1, 31.0, 2.5, 2.9, 40.0, 3.0, 3.3]
    etas = []
    for i, t in enumerate(times, start=1):
        live.step_times.append(t)
        etas.append(live.smoothed_eta(100 - i))
    assert etas[0] is None  # nothing from the compiling first step alone
    shown = [e for e in etas if e is not None]
    for before, after in zip(shown, shown[1:], strict=False):
        assert before / 2.5 <= after <= before * 2.5, shown


def test_zero_std_hint_after_sft_does_not_say_run_sft(tmp_path: Path, capsys) -> None:
    from cli.run.rundir import RunDir
    from cli.train.live import HINT_ZERO_STD, HINT_ZERO_STD_AFTER_SFT, LiveSpec, make_callback

    live = make_callback(RunDir(tmp_path / "run"), "grpo", LiveSpec(max_steps=5, from_sft=True, attempt=2))
    state = SimpleNamespace(global_step=1, max_steps=5, is_world_process_zero=True)
    live.on_train_begin(None, state, None)
    live.on_step_end(None, state, SimpleNamespace(should_save=False, should_training_stop=False))
    live.on_log(None, state, None, logs={"reward": 0.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0})
    out = capsys.readouterr().out
    assert HINT_ZERO_STD_AFTER_SFT in out and HINT_ZERO_STD not in out and "`grpo sft` first" not in out
    row = json.loads((tmp_path / "run" / "logs" / "metrics.jsonl").read_text())
    assert row["attempt"] == 2
