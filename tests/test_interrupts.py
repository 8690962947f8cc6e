"""Hardening, round 1 (docs/history.md): a custom reward that never returns, and Ctrl-C in a stuck reward or
between steps.

Custom rewards run under ``grpo.reward_timeout`` (one line naming the reward, the run directory as it was);
Ctrl-C is honoured within seconds even inside a stuck reward; a run stopped by Ctrl-C leaves its adapter
and a manifest entry saying where it stopped, and `--resume` continues from that step's checkpoint.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from _bad_rewards import never_returns, spins
from helpers import fresh_copy, grpo_cli, invoke, manifest, one_error_line, start_cli

from cli.common import GrpoError
from cli.config.schema import RewardSpec
from cli.train.deadline import SIGNAL, DeadlineExceeded, call_with_deadline
from cli.train.rewards import Reward, RewardTracker, resolve_rewards, wrap_rewards

TINY_GRPO = ["--backend", "hf", "--gens", "2", "--max-completion-length", "8"]


@pytest.mark.parametrize("stuck", [never_returns, spins], ids=["sleeps", "spins-swallowing-exceptions"])
def test_a_reward_that_never_returns_stops_with_one_line(stuck) -> None:
    (f,) = wrap_rewards([Reward("stuck", stuck, 1.0, custom=True)], RewardTracker(), timeout=0.5)
    start = time.perf_counter()
    message = r"reward 'stuck' did not return within 0.5 s \(grpo.reward_timeout\)"
    with pytest.raises(GrpoError, match=message):
        f(prompts=[""] * 2, completions=["a"] * 2)
    assert time.perf_counter() - start < 3


def test_deadline_leaves_nothing_behind() -> None:
    before = signal.getsignal(SIGNAL)
    assert call_with_deadline(lambda x: x + 1, 5.0, 1) == 2  # a call in time returns its value
    assert signal.getsignal(SIGNAL) is before
    with pytest.raises(DeadlineExceeded):
        call_with_deadline(time.sleep, 0.2, 30)
    assert signal.getsignal(SIGNAL) is before
    time.sleep(0.3)  # no late signal from the watchdog


def test_only_custom_rewards_are_timed() -> None:
    """The built-in rewards are linear-time Rust: no watchdog around them."""
    rewards = resolve_rewards([RewardSpec("match_format_exactly"), RewardSpec("_bad_rewards.slow")])
    assert [r.custom for r in rewards] == [False, True]


def test_reward_timeout_is_checked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("grpo:\n  reward_timeout: -1\n")
    line = one_error_line(invoke("grpo", "--run", tmp_path / "run", "--config", bad, "--dry-run"))
    assert "config 'grpo.reward_timeout' must be 0 (no limit) or more seconds, not -1.0" in line


# ---- end to end ----------------------------------------------------------------------------------
def _snapshot(run: Path) -> dict[str, bytes]:
    """Every file of the run but the log (each command appends its own section to it)."""
    return {
        str(p.relative_to(run)): p.read_bytes()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != "grpo.log"
    } | {str(p.relative_to(run)) + "/": b"" for p in run.rglob("*") if p.is_dir() and p.name != "logs"}


def _start(*args: str) -> subprocess.Popen[str]:
    return start_cli(list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _interrupt_after(proc: subprocess.Popen[str], marker: str, has: str = "") -> tuple[str, float]:
    """SIGINT once a line starting with ``marker`` and holding ``has`` is printed; (all output, seconds from
    SIGINT to exit)."""
    seen = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(marker) and has in line:
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    start = time.perf_counter()
    rest, _ = proc.communicate(timeout=60)
    return "".join(seen) + rest, time.perf_counter() - start


@pytest.mark.slow
def test_a_stuck_reward_times_out_and_leaves_the_run_as_it_was(prepped: Path, tmp_path: Path) -> None:
    run = fresh_copy(prepped, tmp_path)
    before = _snapshot(run)
    cfg = tmp_path / "timeout.yaml"
    cfg.write_text("grpo:\n  reward_timeout: 2\n")
    proc = grpo_cli(
        "grpo", "--run", str(run), *TINY_GRPO, "--max-steps", "2", "--config", str(cfg),
        "--rewards", "_bad_rewards.never_returns",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout[-3000:]
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("error:")]
    assert errors == [
        "error: reward 'never_returns' did not return within 2 s (grpo.reward_timeout) on a batch of 2 "
        "completions: fix the reward, or raise grpo.reward_timeout (0: no limit)"
    ], proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout
    assert _snapshot(run) == before


@pytest.mark.slow
def test_ctrl_c_in_a_stuck_reward_stops_within_seconds(prepped: Path, tmp_path: Path) -> None:
    run = fresh_copy(prepped, tmp_path)
    before = _snapshot(run)
    proc = _start(
        "grpo", "--run", str(run), *TINY_GRPO, "--max-steps", "2", "--rewards", "_bad_rewards.never_returns"
    )
    out, seconds = _interrupt_after(proc, "grpo:", "start:")  # the banner: the first rollout is next
    assert proc.returncode == 130, out[-3000:]
    assert seconds < 15, out[-3000:]  # the default timeout is 60 s: Ctrl-C did not wait for it
    assert "grpo: stopped before the first step: nothing saved" in out
    assert "Traceback" not in out
    assert _snapshot(run) == before


@pytest.mark.slow
def test_ctrl_c_between_steps_leaves_the_adapter_and_resumes(prepped: Path, tmp_path: Path) -> None:
    """Seen on the GPU: Ctrl-C at step 303 saved checkpoint-303 but no grpo/adapter for eval/export."""
    from safetensors.torch import load_file

    run = fresh_copy(prepped, tmp_path)
    args = ["grpo", "--run", str(run), *TINY_GRPO, "--rewards", "_bad_rewards.slow"]
    out, seconds = _interrupt_after(_start(*args, "--max-steps", "50"), "grpo 2/")
    assert seconds < 15, out[-3000:]
    lines = [ln for ln in out.splitlines() if ln.startswith("interrupted at step")]
    assert len(lines) == 1 and "continue with `grpo grpo --resume" in lines[0], out[-3000:]
    entry = manifest(run)["stages"]["grpo"]
    step = entry["interrupted_at_step"]
    assert step >= 2
    ckpt = run / "grpo" / "checkpoints" / "attempt-1" / f"checkpoint-{step}"
    assert entry["checkpoint"] == str(ckpt)
    assert json.loads((ckpt / "trainer_state.json").read_text())["global_step"] == step
    adapter, saved = (load_file(str(p / "adapter_model.safetensors")) for p in (run / "grpo/adapter", ckpt))
    assert adapter.keys() == saved.keys() and all((adapter[k] == saved[k]).all() for k in adapter)
    # --resume continues from that step; the finished run clears the interrupted mark.
    proc = grpo_cli(*args, "--max-steps", str(step + 1), "--resume")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"start: checkpoint checkpoint-{step}" in proc.stdout
    assert manifest(run)["stages"]["grpo"]["interrupted_at_step"] is None
