"""cli/rundir.py: files a run directory holds are readable as the umask says, and metrics stay strict JSON."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from cli.rundir import RunDir, atomic_dir, atomic_write_text


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_files_and_folders_follow_the_umask(tmp_path: Path, umask_022) -> None:
    """Issue 11 row 11: temp-file writes left 0600 files and 0700 folders in a shared run directory."""
    atomic_write_text(tmp_path / "config.yaml", "a: 1\n")
    assert stat.S_IMODE((tmp_path / "config.yaml").stat().st_mode) == 0o644
    with atomic_dir(tmp_path / "eval") as tmp:
        (tmp / "report.json").write_text("{}")
    assert stat.S_IMODE((tmp_path / "eval").stat().st_mode) == 0o755
    os.umask(0o077)  # a private umask is honoured too
    atomic_write_text(tmp_path / "private.yaml", "b: 2\n")
    assert stat.S_IMODE((tmp_path / "private.yaml").stat().st_mode) == 0o600


def test_metrics_stay_strict_json(tmp_path: Path) -> None:
    """Issue 11 row 7: an infinite reward was written as `Infinity`, which is not JSON."""
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
