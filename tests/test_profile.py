"""grpo.profile_step's callback (cli/train/profile.py) on the real torch profiler, outside a trainer: the
step it is told, and only it, is profiled; a profile it cannot write costs a note, never the run.
The whole path inside a GRPO run is in test_train.py (the hf-backend chain profiles its step 2)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from cli.train.profile import profiler_callback, write_trace


def _steps(cb, n: int) -> None:
    import torch

    state = SimpleNamespace(global_step=0, is_world_process_zero=True)
    for _ in range(n):
        cb.on_step_begin(None, state, None)
        (torch.ones(64, 64) @ torch.ones(64, 64)).sum()
        state.global_step += 1
        cb.on_step_end(None, state, None)
    cb.on_train_end(None, state, None)


def test_only_the_chosen_step_is_profiled(tmp_path: Path, capsys) -> None:
    _steps(profiler_callback(2, tmp_path / "profile"), 3)
    files = sorted(p.name for p in (tmp_path / "profile").iterdir())
    assert files == ["step-2.json", "step-2.trace.json.gz", "step-2.txt"]
    top = json.loads((tmp_path / "profile" / "step-2.json").read_text())
    assert top["step"] == 2 and "aten::mm" in {t["name"] for t in top["ops"]}
    assert top["time"] == "cpu" and top["kernels"] == [] and top["busy_ms"] > 0
    assert "profile of step 2" in capsys.readouterr().err
    with gzip.open(tmp_path / "profile" / "step-2.trace.json.gz", "rt") as f:  # the timeline, gzipped whole
        assert "aten::mm" in {e.get("name") for e in json.load(f)["traceEvents"]}


def test_a_profile_that_cannot_be_written_costs_a_note(tmp_path: Path, capsys) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    _steps(profiler_callback(1, blocked / "profile"), 2)  # no exception: training goes on
    err = capsys.readouterr().err
    assert "the profile of step 1 was not written" in err and "profile of step 1 (" not in err
    assert blocked.read_text() == "not a folder"


def test_a_run_that_ends_before_the_step_writes_nothing(tmp_path: Path) -> None:
    _steps(profiler_callback(5, tmp_path / "profile"), 2)
    assert not (tmp_path / "profile").exists()


def test_a_trace_cut_short_leaves_no_file(tmp_path: Path) -> None:
    """write_trace writes the whole gzipped timeline or nothing: torch's export failing half-way (a full
    disk) leaves neither the trace nor its partial files."""

    class HalfWritten:
        def export_chrome_trace(self, path: str) -> None:
            Path(path).write_text('{"traceEvents": [')
            raise OSError(28, "No space left on device")

    trace = tmp_path / "step-3.trace.json.gz"
    with pytest.raises(OSError, match="No space left"):  # the callback turns it into a note (test above)
        write_trace(HalfWritten(), trace)
    assert list(tmp_path.iterdir()) == []
