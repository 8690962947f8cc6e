"""``grpo.profile_step``: one training step under ``torch.profiler``, for where a step's time goes.

The phase clock (:mod:`cli.train.phases`) says how long generation, the log-prob passes, the loss and the
backward take; this says which kernels and ops fill them. Step N (counted from 1, as the live view counts)
runs under the profiler, from the trainer's ``on_step_begin`` (before the rollout) to its ``on_step_end``
(after the optimizer), and the run's ``logs/profile/`` gets

- ``step-N.txt``: the ops by their own time on the device (CPU time without a GPU), the top 40;
- ``step-N.json``: the top ops and, with a GPU, the top kernels as numbers (name, calls, self ms), the
  kernels' busy time and the step's wall time;
- ``step-N.trace.json.gz``: the whole timeline, for Perfetto or chrome://tracing.

A profiled step runs slower than the others (the profiler records every op), so its time is not the
step time: profile a step after the first (which compiles) and read the others' times from metrics.jsonl.
Only the main process profiles.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

TOP = 40


def profiler_callback(step: int, out_dir: Path) -> Any:
    """A ``transformers.TrainerCallback`` profiling step ``step`` into ``out_dir`` (built here so that the
    module imports without transformers); it says in one line where the files are."""
    from rich.markup import escape
    from transformers import TrainerCallback

    from cli.run.console import err_console

    class StepProfiler(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.prof: Any = None
            self.t0 = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.prof is None and state.global_step + 1 == step and state.is_world_process_zero:
                import torch

                acts = [torch.profiler.ProfilerActivity.CPU]
                if torch.cuda.is_available():
                    acts.append(torch.profiler.ProfilerActivity.CUDA)
                prof = torch.profiler.profile(activities=acts, acc_events=True)  # one cycle: no warning
                try:
                    prof.__enter__()
                except Exception as e:  # noqa: BLE001 - a diagnostic never stops the training
                    err_console.print(f"[yellow]note:[/] step {step} not profiled: {escape(str(e))}".rstrip())
                    return
                self.prof, self.t0 = prof, time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.prof is not None and state.global_step >= step:
                self._write()

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.prof is not None:  # stopped inside the step: what was recorded
                self._write()

        def _write(self) -> None:
            import torch

            prof, self.prof = self.prof, None
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            wall = time.perf_counter() - self.t0
            try:
                prof.__exit__(None, None, None)
                write_profile(prof, step, wall, out_dir, cuda=torch.cuda.is_available())
            except Exception as e:  # noqa: BLE001 - a diagnostic never stops the training
                err_console.print(
                    f"[yellow]note:[/] the profile of step {step} was not written: {escape(str(e))}".rstrip()
                )
                return
            where = escape(str(out_dir / f"step-{step}.txt"))
            err_console.print(
                f"[dim]profile of step {step} ({wall:.1f} s under the profiler): {where}, "
                f"step-{step}.trace.json.gz[/]"
            )

    return StepProfiler()


def write_profile(prof: Any, step: int, wall: float, out_dir: Path, *, cuda: bool) -> None:
    """The table, the numbers and the trace of one profiled step (each file written whole or not at all).

    torch lists the ops (run on the CPU, with the device time of the kernels they launched) and, with a GPU,
    the kernels themselves: the two are kept apart here so that no time is counted twice."""
    from torch.autograd import DeviceType

    from cli.run.atomic import atomic_write_json, atomic_write_text

    out_dir.mkdir(parents=True, exist_ok=True)
    events = prof.key_averages()
    kernels = [e for e in events if e.device_type != DeviceType.CPU]
    ops = [e for e in events if e.device_type == DeviceType.CPU]

    def self_of(e: Any) -> float:
        return float(e.self_device_time_total if cuda else e.self_cpu_time_total)

    def rows(evs: list[Any]) -> list[dict[str, Any]]:
        top = sorted(evs, key=self_of, reverse=True)[:TOP]
        return [{"name": e.key, "calls": e.count, "self_ms": round(self_of(e) / 1e3, 3)} for e in top]

    busy_ms = sum(self_of(e) for e in (kernels if cuda else ops)) / 1e3
    head = (f"step {step}: {wall:.3f} s under the profiler; {busy_ms:.1f} ms of "
            f"{'kernels on the GPU' if cuda else 'ops on the CPU'}\n")  # fmt: skip
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    atomic_write_text(out_dir / f"step-{step}.txt", head + events.table(sort_by=key, row_limit=TOP) + "\n")
    atomic_write_json(
        out_dir / f"step-{step}.json",
        {"step": step, "wall_s": round(wall, 3), "time": "device" if cuda else "cpu",
         "busy_ms": round(busy_ms, 3), "ops": rows(ops), "kernels": rows(kernels) if cuda else []},
    )  # fmt: skip
    write_trace(prof, out_dir / f"step-{step}.trace.json.gz")


def write_trace(prof: Any, trace: Path) -> None:
    """The step's timeline as gzipped Chrome JSON, whole or not at all. torch's own ``.gz`` export compresses
    it line by line at gzip's level 9: on the H200 writing a 1.5B step's profile took ~30 s and over two
    minutes for an uncompiled Unsloth step's, with the training stopped meanwhile and a Ctrl-C left waiting.
    Here torch writes the plain JSON and it is compressed in blocks at level 1 (bench/profile_export.py)."""
    import gzip
    import shutil

    from cli.run.atomic import follow_umask

    plain = trace.with_name(f".{trace.name}.partial.json")
    partial = trace.with_name(f".{trace.name}.partial.gz")
    try:
        prof.export_chrome_trace(str(plain))
        with plain.open("rb") as src, gzip.open(partial, "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        follow_umask(partial)
        partial.replace(trace)
    finally:
        plain.unlink(missing_ok=True)
        partial.unlink(missing_ok=True)
