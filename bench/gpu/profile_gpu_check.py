"""The step profile's raw-event summary against torch's own tables, on a real GPU and this torch.

``cli/train/profile.py`` sums a profiled step from the profiler's raw events (``summarize``), reading each
event's kind from ``_KinetoEvent.activity_type`` or, on a torch without it (2.11, the H200 image's), from
``is_user_annotation`` and the link to an op. The CPU tests use synthetic GPU events; this runs real CUDA work
(matmuls, a softmax, a LoRA-like pair of small matmuls, copies, inside ``record_function`` ranges) under
``torch.profiler``, writes the step's files with ``write_profile`` and compares them with ``key_averages()``:

- the kernels' busy time against the sum of every kernel's device time in torch's table;
- each top op's own device time against torch's ``self_device_time_total`` for that op;
- that no annotation is counted as an op or as device work.

Run on the GPU machine, repo root (plain torch, no trainers):
``python3 bench/gpu/profile_gpu_check.py OUT_DIR``.
Prints one line per check and exits 1 when one fails.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def work(dev: str, n: int) -> None:
    import torch as t

    x = t.randn(n, n, device=dev, dtype=t.bfloat16)
    a = t.randn(n, 16, device=dev, dtype=t.bfloat16)
    b = t.randn(16, n, device=dev, dtype=t.bfloat16)
    for _ in range(4):
        with t.profiler.record_function("forward"):
            y = x @ x
            y = y + (x @ a) @ b  # a LoRA-like path
            z = t.softmax(y.float(), dim=-1)
        with t.profiler.record_function("copies"):
            w = z.to(t.bfloat16).cpu()
            x = (x + w.to(dev)) * 0.5
    if dev == "cuda":
        t.cuda.synchronize()


def main() -> int:
    import torch

    from cli.train import kind_reader as _kind_reader
    from cli.train import write_profile

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "profile-check")
    cuda = torch.cuda.is_available()  # without a GPU: the CPU path (own CPU time), for a dry run
    dev, n = ("cuda", 4096) if cuda else ("cpu", 512)
    work(dev, n)  # warm: cuBLAS handles, the allocator
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    prof = torch.profiler.profile(activities=acts)
    t0 = time.perf_counter()
    with prof:
        work(dev, n)
    wall = time.perf_counter() - t0
    events = list(prof.profiler.kineto_results.events())
    reader = "activity_type" if hasattr(events[0], "activity_type") else "fallback (no activity_type)"
    write_profile(prof, 1, wall, out, cuda=cuda)
    mine = json.loads((out / "step-1.json").read_text())

    from torch.autograd import DeviceType

    kind = _kind_reader(events[0], DeviceType.CPU)
    kinds: dict[str, int] = {}
    annotations: set[str] = set()  # torch's table lists their device-side spans with device time too
    for e in events:
        kinds[kind(e)] = kinds.get(kind(e), 0) + 1
        if kind(e) in ("user_annotation", "gpu_user_annotation"):
            annotations.add(e.name())
    theirs = {a.key: a for a in prof.key_averages()}
    # torch's kernels: the device events its table lists with device time and no CPU op of that name
    op_names = {r["name"] for r in mine["ops"]}
    if cuda:
        busy_ref = sum(
            a.self_device_time_total / 1e3
            for a in theirs.values()
            if a.key not in op_names | annotations
            and a.self_device_time_total > 0
            and a.device_type != DeviceType.CPU
        )
    else:
        busy_ref = sum(a.self_cpu_time_total / 1e3 for a in theirs.values() if a.key in op_names)
    checks: list[tuple[str, bool, str]] = []
    busy = mine["busy_ms"]
    checks.append(
        (
            "busy time = torch's " + ("kernels" if cuda else "ops' own CPU time"),
            abs(busy - busy_ref) <= 0.02 * max(busy_ref, 1e-9),
            f"{busy:.3f} ms against {busy_ref:.3f} ms",
        )
    )
    for row in mine["ops"][:6]:
        ref = theirs.get(row["name"])
        own = (lambda a: a.self_device_time_total) if cuda else (lambda a: a.self_cpu_time_total)
        ref_ms = own(ref) / 1e3 if ref else float("nan")
        ok = ref is not None and abs(row["self_ms"] - ref_ms) <= max(0.02 * ref_ms, 0.005)
        checks.append((f"op {row['name']}", ok, f"{row['self_ms']:.3f} ms against torch's {ref_ms:.3f} ms"))
    named = {r["name"] for r in mine["ops"]} | {r["name"] for r in mine["kernels"]}
    checks.append(("annotations are not ops or kernels", not ({"forward", "copies"} & named), ""))
    where = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"torch {torch.__version__}, {where}; kinds read by {reader}: {kinds}")
    for name, ok, detail in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
