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


class _WithoutKind:
    """A real profiler event as torch 2.11 gives it: no ``activity_type``."""

    def __init__(self, event: object) -> None:
        self._event = event

    def __getattr__(self, name: str) -> object:
        if name == "activity_type":
            raise AttributeError(name)
        return getattr(self._event, name)


def test_the_ops_own_times_are_torchs_from_the_raw_events() -> None:
    """summarize reads the profiler's raw events in one pass and a sort; on the CPU each op's own time
    (its time less its child ops') and its calls are what torch's own tree (key_averages) says."""
    import torch

    from cli.train.profile import summarize

    x = torch.ones(32, 32)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with torch.profiler.record_function("## an annotation ##"):  # neither an op nor busy time
            for _ in range(50):
                x = (x.to(torch.float64) @ x.double()).float().softmax(-1)
    events = prof.profiler.kineto_results.events()
    ours = summarize(events, cuda=False)
    theirs = {e.key: e for e in prof.key_averages()}
    # torch 2.11 has no activity_type: the events without it sum up the same
    assert summarize([_WithoutKind(e) for e in events], cuda=False) == ours
    assert ours["kernels"] == [] and ours["events"] >= 50 * 4
    names = {r["name"] for r in ours["ops"]}
    assert {"aten::mm", "aten::_softmax", "aten::to"} <= names and "## an annotation ##" not in names
    for r in ours["ops"]:
        t = theirs[r["name"]]
        assert r["calls"] == t.count, r
        assert abs(r["self_ms"] - t.self_cpu_time_total / 1e3) <= 0.002 + 0.01 * r["self_ms"], r
        assert abs(r["total_ms"] - t.cpu_time_total / 1e3) <= 0.002 + 0.01 * r["total_ms"], r
    own_total = sum(r["self_ms"] for r in ours["ops"])
    assert abs(ours["busy_ms"] - own_total) <= 0.01 * ours["busy_ms"] + 0.01  # all ops fit in the top 40 here


@pytest.mark.parametrize("with_kind", [True, False], ids=["activity_type", "torch-2.11"])
def test_kernels_are_counted_once_and_given_to_the_op_that_launched_them(with_kind: bool) -> None:
    """With a GPU: an op's own time is the device time of the kernels it launched itself, the kernels are
    listed apart, and annotations on the device (and the profiler's own overhead) are no device work.
    The events are written here in the shape torch's _KinetoEvent has (no GPU on this machine): with
    ``activity_type``, and without it as in torch 2.11 (the H200 image's; the summary of a 1.5B step failed
    there on the missing method, 2026-12-04), where the kind comes from the annotation flag and the links."""
    from torch.autograd import DeviceType

    from cli.train.profile import summarize, table

    def ev(name, kind, start, end, corr=0, linked=0, device=DeviceType.CPU):  # noqa: ANN001, ANN202
        e = SimpleNamespace(
            name=lambda: name, device_type=lambda: device,
            start_ns=lambda: start, end_ns=lambda: end, start_thread_id=lambda: 1,
            correlation_id=lambda: corr, linked_correlation_id=lambda: linked,
            is_user_annotation=lambda: kind in ("user_annotation", "gpu_user_annotation"),
            is_python_function=lambda: kind == "python_function",
        )  # fmt: skip
        if with_kind:
            e.activity_type = lambda: kind
        return e

    gpu = DeviceType.CUDA
    events = [
        ev("## loss ##", "user_annotation", 0, 9_000_000, corr=1),
        ev("aten::linear", "cpu_op", 10, 5_000_000, corr=2),
        ev("aten::mm", "cpu_op", 20, 4_000_000, corr=3),  # the child launches the GEMM
        ev("cudaLaunchKernel", "cuda_runtime", 30, 40, corr=90, linked=3),
        ev("sm90_gemm", "kernel", 100, 2_000_100, linked=3, device=gpu),
        ev("aten::add_", "cpu_op", 5_000_000, 6_000_000, corr=4),
        ev("elementwise_add", "kernel", 2_000_200, 2_500_200, linked=4, device=gpu),
        ev("elementwise_add", "kernel", 2_600_000, 3_100_000, linked=4, device=gpu),
        ev("## loss ##", "gpu_user_annotation", 0, 9_000_000, linked=1, device=gpu),
        ev("Command Buffer Full", "overhead", 50, 60, device=gpu),
        ev("train_step (trainer.py:12)", "python_function", 0, 8_000_000, corr=5),
    ]
    s = summarize(events, cuda=True)
    assert s["events"] == len(events) and s["busy_ms"] == 3.0  # 2 ms of GEMM, 2 x 0.5 ms of adds
    assert s["kernels"] == [
        {"name": "sm90_gemm", "calls": 1, "self_ms": 2.0},
        {"name": "elementwise_add", "calls": 2, "self_ms": 1.0},
    ]
    own = {r["name"]: r["self_ms"] for r in s["ops"]}
    assert own == {"aten::mm": 2.0, "aten::add_": 1.0, "aten::linear": 0.0}
    assert [r["name"] for r in s["ops"]] == ["aten::mm", "aten::add_", "aten::linear"]
    text = table(s, cuda=True)
    assert "sm90_gemm" in text and "Command Buffer Full" not in text and "## loss ##" not in text
