"""Writing a profiled step's timeline: torch's own ``.gz`` export against ``cli.train.profile.write_trace``.

``grpo.profile_step`` writes the step's whole timeline for Perfetto. torch's ``export_chrome_trace("….gz")``
writes the JSON, then gzips it line by line at level 9; on the H200 that held the training for 30 s after a
1.5B hf step and for over two minutes after an uncompiled Unsloth step (2026-12-04). ``write_trace`` has torch
write the plain JSON and compresses it in 1 MiB blocks at level 1.

A profile of ``--ops`` small CPU ops (a trace of about the size a GPU step gives), recorded afresh for
each export (torch saves a trace once), exported both ways alternately, ``--repeats`` times each; medians,
their ratio and the two files' sizes:

    python bench/profile_export.py [--ops 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    import torch

    from cli.train import write_trace

    def recorded() -> torch.profiler.profile:  # a trace is saved once: a fresh profile for each export
        x, cpu = torch.ones(8), [torch.profiler.ProfilerActivity.CPU]
        with torch.profiler.profile(activities=cpu, acc_events=True) as prof:
            for _ in range(args.ops // 2):
                x = (x * 1.0001).add_(1e-6)  # two ops each: many small events, like a step's kernels
        return prof

    times: dict[str, list[float]] = {"torch": [], "ours": []}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for name in ("torch", "ours") if i % 2 == 0 else ("ours", "torch"):
                path = Path(tmp) / f"{name}.trace.json.gz"
                prof = recorded()
                t = time.perf_counter()
                if name == "torch":
                    prof.export_chrome_trace(str(path))
                else:
                    write_trace(prof, path)
                times[name].append(time.perf_counter() - t)
                sizes[name] = path.stat().st_size
                path.unlink()
    med = {k: statistics.median(v) for k, v in times.items()}
    for name in ("torch", "ours"):
        each = ", ".join(f"{t:.2f}" for t in times[name])
        print(f"{name:>5}: median {med[name]:.2f} s ({each}), {sizes[name] / 2**20:.1f} MiB")
    ratio, size = med["ours"] / med["torch"], sizes["ours"] / sizes["torch"]
    print(f"ours / torch: {ratio:.3f}x the time, {size:.2f}x the size")
    return 0


if __name__ == "__main__":
    sys.exit(main())
