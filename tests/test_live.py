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
    assert (
        row["eta_seconds"] is not None
    )  # a rough one from the first step alone: its time for each step left
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
    assert etas[0] == 130.0 * 99  # the first step alone: rough (it compiled), and no anchor for the rest
    shown = [e for e in etas[1:] if e is not None]
    assert shown[0] < 1000  # the second step's ETA is not held near the first one
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


def test_every_step_says_so_from_the_first_with_an_eta(tmp_path: Path, capsys) -> None:
    # A CPU step of a real model takes seconds to minutes; the first logged line came ~15 minutes in.
    from cli.run.rundir import RunDir
    from cli.train.live import LiveSpec, make_callback

    run = RunDir(tmp_path / "run")
    live = make_callback(run, "sft", LiveSpec(max_steps=4))
    state = SimpleNamespace(global_step=0, max_steps=4, is_world_process_zero=True)
    live.on_train_begin(None, state, None)
    for step in (1, 2, 3):
        state.global_step = step
        control = SimpleNamespace(should_log=step == 3, should_save=False, should_training_stop=False)
        live.on_step_end(None, state, control)
    live.on_log(None, state, None, logs={"loss": 1.5, "learning_rate": 1e-4})
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(" │ ")[0] for ln in lines] == ["sft 1/4", "sft 2/4", "sft 3/4"]
    assert all("s/step" in ln and "ETA" in ln and "ETA ?" not in ln for ln in lines), lines
    assert "loss 1.5" in lines[2]  # the logging step's line carries the metrics, once
    rows = [json.loads(ln) for ln in run.metrics_path.read_text().splitlines()]
    assert [r["step"] for r in rows] == [3]  # metrics.jsonl keeps one row per logging step


def test_heartbeat_names_the_first_step_compile_only_during_that_step(tmp_path: Path) -> None:
    """Under Unsloth the first step compiles for minutes on a fresh GPU machine: while it runs, the
    heartbeat says why; from the second step (and for a resumed run's first) only the step."""
    from cli.run.rundir import RunDir
    from cli.train.live import LiveSpec, make_callback

    note = "Unsloth compiles its kernels"
    spec = LiveSpec(max_steps=6, quiet=True, first_step_note=note)
    seen = []
    for start in (0, 4):  # a fresh run, then one resumed at step 4
        live = make_callback(RunDir(tmp_path / f"run{start}"), "grpo", spec)
        state = SimpleNamespace(global_step=start, max_steps=6, is_world_process_zero=True)
        live.on_train_begin(None, state, None)
        seen.append(live.step_status(state))
        state.global_step += 1
        live.on_step_end(None, state, SimpleNamespace(should_save=False, should_training_stop=False))
        seen.append(live.step_status(state))
    assert seen == [f"grpo: step 1/6, {note}", "grpo: step 2/6", f"grpo: step 5/6, {note}", "grpo: step 6/6"]
