"""A `grpo prep` killed at any moment leaves the run as it was or whole (issue 40, item 4).

The audit's case: SIGKILL during `grpo prep dapo` over a GSM8K run left GSM8K's eval.parquet beside dapo's
train data, stats, config and manifest, and the backup and temp files for good; eval and grpo then exited 0.

Each case runs the real `grpo prep` in a child that kills itself with SIGKILL at one moment of its writes:
before the first data file lands, before manifest.json, before config.yaml, and after the commit (the
backup renamed, not yet removed). The next command on the run (any command takes the run's lock first,
:func:`cli.run.lock.hold`) must find the run exactly as it was before the prep, or exactly as the prep made
it, with no backup or temp file left, and its data files matching the manifest's hashes.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, SAMPLES, cli_env, fresh_copy

# The child: prep in-process, SIGKILL when os.replace is about to put ``argv[1]`` in place (the name's end).
_KILLED_AT = """
import os, signal, sys
when, args = sys.argv[1], sys.argv[2:]
real = os.replace
def replace(src, dst, *a, **k):
    if str(dst).endswith(when):
        os.kill(os.getpid(), signal.SIGKILL)
    real(src, dst, *a, **k)
    if when == "commit" and ".committed." in str(dst):
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
sys.argv = ["grpo", *args]
from cli.main import main
main()
"""


def _state(run: Path) -> dict[str, str]:
    """Every file of the run (but the lock and logs) by its sha256."""
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and not p.is_symlink() and p.name != ".grpo.lock" and "logs" not in p.parts
    }


@pytest.mark.parametrize(
    "moment",  # the audit's moment (the first data file) in every run; the others with the slow tests
    [
        "train.parquet",
        *(pytest.param(m, marks=pytest.mark.slow) for m in ("manifest.json", "config.yaml", "commit")),
    ],
)
def test_prep_killed_at_any_moment_leaves_the_run_as_it_was_or_whole(moment, prepped, tmp_path) -> None:
    from cli.run.lock import hold, release_locks
    from cli.run.preflight import check_data_hashes
    from cli.run.rundir import RunDir

    run = fresh_copy(prepped, tmp_path)
    before = _state(run)
    args = ["prep", "math", "--source", SAMPLES / "math500.jsonl", "--limit", "24", "--run", run]
    proc = subprocess.run([sys.executable, "-c", _KILLED_AT, moment, *map(str, args)], cwd=REPO,
                          env=cli_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == -9, proc.stdout + proc.stderr  # killed where asked, not finished or failed
    assert any(".before." in p.name or ".committed." in p.name for p in run.iterdir())  # the kill's leftovers
    hold(run, "grpo eval")  # the next command on the run
    release_locks()
    after = _state(run)
    assert not [
        p for p in run.rglob("*") if ".before." in p.name or ".committed." in p.name or ".tmp" in p.name
    ]
    if moment == "commit":
        assert after != before and "math" in (run / "config.yaml").read_text()  # whole: the new prep
    else:
        assert after == before  # as it was
    check_data_hashes(RunDir(run), ("train.parquet", "eval.parquet"))
