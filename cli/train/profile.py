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
from collections.abc import Callable
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
                # No acc_events: it makes torch build its Python tree of every event when the profile stops
                # (minutes for a step of millions of ops); the files are made from the raw events instead.
                prof = torch.profiler.profile(activities=acts)
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
    """The table, the numbers and the trace of one profiled step (each file written whole or not at all),
    from the profiler's raw events (:func:`summarize`), not torch's ``key_averages``: that builds a Python
    object and a parent/child tree for every event, which held a 1.5B Unsloth step of 16 accumulation steps
    for minutes on the H200 (bench/learning-gpu.md@ea4c471, round 13)."""
    from cli.run.atomic import atomic_write_json, atomic_write_text

    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(prof.profiler.kineto_results.events(), cuda=cuda)
    unit = "kernels on the GPU" if cuda else "ops on the CPU"
    head = (f"step {step}: {wall:.3f} s under the profiler; {summary['busy_ms']:.1f} ms of {unit} "
            f"({summary['events']} events)\n")  # fmt: skip
    atomic_write_text(out_dir / f"step-{step}.txt", head + table(summary, cuda=cuda))
    atomic_write_json(
        out_dir / f"step-{step}.json",
        {"step": step, "wall_s": round(wall, 3), "time": "device" if cuda else "cpu", **summary},
    )
    write_trace(prof, out_dir / f"step-{step}.trace.json.gz")


NOT_BUSY = {"gpu_user_annotation", "cuda_sync", "overhead"}  # device-side events that are not device work


def summarize(events: Any, *, cuda: bool) -> dict[str, Any]:
    """The ops and (with a GPU) the kernels of a profile, from the profiler's raw events, in a time linear in
    their number but for one sort. An op's own time is the device time of the kernels it launched itself
    (with a GPU), or its CPU time less its child ops' (without); the kernels are listed apart, so that no
    time is counted twice. Annotations (``record_function`` ranges) are neither ops nor device work.

    ``events``: objects with the methods of torch's ``_KinetoEvent`` (``name``, ``activity_type``,
    ``device_type``, ``start_ns``, ``end_ns``, ``start_thread_id``, ``correlation_id``,
    ``linked_correlation_id``)."""
    from torch.autograd import DeviceType

    ops: dict[str, list[int]] = {}  # name -> [calls, own ns, total ns]
    kernels: dict[str, list[int]] = {}  # name -> [calls, ns]
    by_thread: dict[int, list[tuple[int, int, str]]] = {}
    op_of: dict[int, str] = {}  # correlation id -> op name
    launched: list[tuple[int, int]] = []  # (the launching op's correlation id, kernel ns)
    count = 0
    kind_of: Callable[[Any], str] | None = None
    for e in events:
        count += 1
        if kind_of is None:
            kind_of = _kind_reader(e, DeviceType.CPU)
        kind = kind_of(e)
        if kind == "cpu_op":
            name, start, end = e.name(), e.start_ns(), e.end_ns()
            row = ops.setdefault(name, [0, 0, 0])
            row[0] += 1
            row[2] += end - start
            if cuda:  # its own time: its kernels'
                op_of[e.correlation_id()] = name
            else:  # its own time: its span less its children's
                by_thread.setdefault(e.start_thread_id(), []).append((start, end, name))
        elif e.device_type() != DeviceType.CPU and kind not in NOT_BUSY:
            ns = e.end_ns() - e.start_ns()
            row = kernels.setdefault(e.name(), [0, 0])
            row[0] += 1
            row[1] += ns
            launched.append((e.linked_correlation_id(), ns))
    if cuda:
        for corr, ns in launched:
            if corr in op_of:
                ops[op_of[corr]][1] += ns
    else:
        _own_cpu_time(by_thread, ops)

    def rows(table: dict[str, list[int]]) -> list[dict[str, Any]]:
        top = sorted(table.items(), key=lambda kv: kv[1][1], reverse=True)[:TOP]
        out = [{"name": k, "calls": v[0], "self_ms": round(v[1] / 1e6, 3)} for k, v in top]
        for r, (_, v) in zip(out, top, strict=True):
            if len(v) > 2:  # an op: its time with its children's
                r["total_ms"] = round(v[2] / 1e6, 3)
        return out

    busy = sum(v[1] for v in (kernels if cuda else ops).values())
    return {
        "events": count,
        "busy_ms": round(busy / 1e6, 3),
        "ops": rows(ops),
        "kernels": rows(kernels) if cuda else [],
    }


def _kind_reader(event: Any, cpu: Any) -> Callable[[Any], str]:
    """How to read an event's kind (kineto's activity type: ``cpu_op``, ``kernel``, ``cuda_runtime``...).

    torch 2.11 (the H200 image's) has no ``_KinetoEvent.activity_type``: there the kind is told apart the way
    torch's own parser files events. Annotations say so (``is_user_annotation``), Python functions too. A
    host event linked to no op is an op itself (a runtime call is linked to the op that made it), and a
    device event linked to no op is the profiler's overhead, not work that an op launched."""
    if hasattr(event, "activity_type"):
        return lambda e: e.activity_type()
    annotation = hasattr(event, "is_user_annotation")
    python = hasattr(event, "is_python_function")

    def kind(e: Any) -> str:
        host = e.device_type() == cpu
        if annotation and e.is_user_annotation():
            return "user_annotation" if host else "gpu_user_annotation"
        if python and e.is_python_function():
            return "python_function"
        if e.linked_correlation_id() == 0:
            return "cpu_op" if host else "overhead"
        return "cuda_runtime" if host else "kernel"

    return kind


def _own_cpu_time(by_thread: dict[int, list[tuple[int, int, str]]], ops: dict[str, list[int]]) -> None:
    """Each op's CPU time less its direct child ops' (ops nest on a thread), summed into ``ops[name][1]``."""
    for spans in by_thread.values():
        spans.sort(key=lambda s: (s[0], -s[1]))  # a parent before the child that starts with it
        stack: list[tuple[int, str]] = []  # (end, name) of the ops open at this point
        for start, end, name in spans:
            while stack and stack[-1][0] <= start:
                stack.pop()
            ops[name][1] += end - start
            if stack:
                ops[stack[-1][1]][1] -= end - start
            stack.append((end, name))


def table(summary: dict[str, Any], *, cuda: bool) -> str:
    """``step-N.txt``: the top ops by their own time, then (with a GPU) the top kernels."""
    own = "self device ms" if cuda else "self CPU ms"
    lines = [f"{'op':<60} {'calls':>8} {own:>15} {'total ms':>12}"]
    for r in summary["ops"]:
        total = f"{r['total_ms']:>12.3f}" if "total_ms" in r else ""
        lines.append(f"{r['name'][:60]:<60} {r['calls']:>8} {r['self_ms']:>15.3f} {total}")
    if cuda:
        lines += ["", f"{'kernel':<90} {'calls':>8} {'ms':>12}"]
        lines += [f"{r['name'][:90]:<90} {r['calls']:>8} {r['self_ms']:>12.3f}" for r in summary["kernels"]]
    return "\n".join(lines) + "\n"


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
