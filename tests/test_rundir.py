"""cli/run/rundir.py: files in a run directory are readable as the umask says; metrics stay strict JSON."""

from __future__ import annotations

import json
import math
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import one_line_error

from cli.main import app
from cli.run.atomic import atomic_dir, atomic_write_text
from cli.run.lock import release_locks
from cli.run.rundir import RunDir


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_files_and_folders_follow_the_umask(tmp_path: Path, umask_022) -> None:
    """Hardening, round 1 (docs/history.md): temp-file writes left 0600 files and 0700 folders in a shared run
    directory."""
    atomic_write_text(tmp_path / "config.yaml", "a: 1\n")
    assert stat.S_IMODE((tmp_path / "config.yaml").stat().st_mode) == 0o644
    with atomic_dir(tmp_path / "eval") as tmp:
        (tmp / "report.json").write_text("{}")
    assert stat.S_IMODE((tmp_path / "eval").stat().st_mode) == 0o755
    os.umask(0o077)  # a private umask is honoured too
    atomic_write_text(tmp_path / "private.yaml", "b: 2\n")
    assert stat.S_IMODE((tmp_path / "private.yaml").stat().st_mode) == 0o600


def test_metrics_stay_strict_json(tmp_path: Path) -> None:
    """Hardening, round 1 (docs/history.md): an infinite reward was written as `Infinity`, which is not
    JSON."""
    run = RunDir(tmp_path / "run")
    run.log_metrics(
        {
            "step": np.int64(3),
            "reward": math.inf,
            "loss": float("nan"),
            "per": {"a": -math.inf, "b": [1.5, np.float32("nan")]},
            "ok": np.float64(0.25),
        }
    )

    def refuse(token: str) -> None:
        raise AssertionError(f"non-JSON constant {token}")

    row = json.loads(run.metrics_path.read_text(), parse_constant=refuse)
    assert row == {"step": 3, "reward": None, "loss": None, "per": {"a": None, "b": [1.5, None]}, "ok": 0.25}
    assert isinstance(row["step"], int)


def _holder(run: Path) -> subprocess.Popen:
    """Another process that holds the run directory, as a running `grpo grpo` does."""
    code = (
        "import sys, time; from cli.run.rundir import RunDir; RunDir(sys.argv[1]).hold('grpo grpo'); "
        "print('held', flush=True); time.sleep(120)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(run)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_one_writer_per_run_directory(tmp_path: Path) -> None:
    """Hardening, round 1 (docs/history.md): two `grpo grpo` on one run both exited 0 with their files mixed.
    The second now stops with one line naming the holder and changes nothing; a lock left by a killed process
    is taken over."""
    from helpers import fails_fast

    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    (run / "config.yaml").write_text("model: tiny\n")
    (run / "data" / "train.parquet").write_bytes(b"")  # the checks before the lock only look for it
    proc = _holder(run)
    try:
        before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".grpo.lock"}
        for args in (
            ["grpo", "--run", str(run)],
            ["sft", "--run", str(run)],
            ["prep", "gsm8k", "--run", str(run)],
        ):
            line = fails_fast(args)
            assert f"is in use by `grpo grpo` (pid {proc.pid}" in line, line
        after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".grpo.lock"}
        assert after == before
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()  # and its pipe closed
    RunDir(run).hold("grpo sft")  # the dead holder's lock: taken over at once
    release_locks()
    RunDir(run).hold("grpo sft")  # and released at the command's end
    release_locks()


def test_a_holder_not_yet_named_is_waited_for(tmp_path: Path) -> None:
    """Two `grpo prep` into one new run: the loser met the lock in the moment between the winner taking it and
    writing .grpo.lock, and said "another grpo command" (seen in CI). It now waits for the name, briefly."""
    import fcntl
    import threading

    from cli.common import GrpoError
    from cli.run import lock

    run = tmp_path / "run"
    run.mkdir()
    held = os.open(run, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)  # the winner holds the lock and has not named itself yet
    info = {"pid": 4242, "command": "grpo prep", "since": "now"}
    timer = threading.Timer(0.3, atomic_write_text, (run / lock.LOCK_NAME, json.dumps(info) + "\n"))
    timer.start()
    other = os.open(run, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(GrpoError, match=r"in use by `grpo prep` \(pid 4242"):
            lock._lock(other, run)
        (run / lock.LOCK_NAME).unlink()  # a holder that never names itself (a read-only run): said so
        with pytest.raises(GrpoError, match="in use by another grpo command"):
            lock._lock(other, run)
    finally:
        timer.join()
        os.close(other)
        os.close(held)


def test_no_run_directory(runner, tmp_path):
    from cli.common import GrpoError
    from cli.run.rundir import RunDir

    line = one_line_error(runner.invoke(app, ["doctor", "--run", str(tmp_path / "nonexistent")]))
    assert "no run directory" in line and "grpo prep" in line
    # A run without the stage's input names the command that makes it.
    run = RunDir(tmp_path / "run")
    run.ensure()
    with pytest.raises(GrpoError, match=r"run `grpo prep NAME --run .*` first"):
        run.require(run.data_dir / "train.parquet", "data", "prepped data")
