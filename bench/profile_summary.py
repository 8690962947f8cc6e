"""Summing up a profiled step: torch's ``key_averages`` against ``cli.train.profile.summarize``.

``grpo.profile_step`` lists a step's ops and kernels by their own time. torch's way (``acc_events=True``,
then ``key_averages``) builds a Python object and a parent/child tree for every event when the profile
stops; after a 1.5B Unsloth step of 16 accumulation steps on the H200 that held the run for over 3.5
minutes (2026-12-04, bench/learning-gpu.md@ea4c471 round 13). ``summarize`` reads the raw events once and
sorts each thread's ops.

A profile of ``--ops`` small CPU ops, recorded afresh for each side, summed up both ways alternately,
``--repeats`` times each (from the profile's stop to the table's text); medians and their ratio. Then both
sum up one more profile, the same one, and must agree on every op's calls and own time (to 1 %):

    python bench/profile_summary.py [--ops 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    import torch

    from cli.train import summarize, table

    def run(acc_events: bool) -> torch.profiler.profile:
        x = torch.ones(8)
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], acc_events=acc_events)
        prof.__enter__()
        for _ in range(args.ops // 2):
            x = (x * 1.0001).add_(1e-6)  # two ops each: many small events, like a step's
        return prof

    times: dict[str, list[float]] = {"torch": [], "ours": []}
    events = 0
    for i in range(args.repeats):
        for name in ("torch", "ours") if i % 2 == 0 else ("ours", "torch"):
            prof = run(acc_events=name == "torch")
            t = time.perf_counter()
            prof.__exit__(None, None, None)
            if name == "torch":
                prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40)
            else:
                s = summarize(prof.profiler.kineto_results.events(), cuda=False)
                table(s, cuda=False)
                events = s["events"]
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    for name in ("torch", "ours"):
        print(f"{name:>5}: median {med[name]:.2f} s ({', '.join(f'{t:.2f}' for t in times[name])})")
    print(f"{events} events; ours / torch = {med['ours'] / med['torch']:.3f}")
    prof = run(acc_events=False)
    prof.__exit__(None, None, None)
    theirs = {e.key: e for e in prof.key_averages()}
    differ = [
        r["name"]
        for r in summarize(prof.profiler.kineto_results.events(), cuda=False)["ops"]
        if r["calls"] != theirs[r["name"]].count
        or abs(r["self_ms"] - theirs[r["name"]].self_cpu_time_total / 1e3) > 0.01 * r["self_ms"] + 0.002
    ]
    print("same ops and own times on one profile" if not differ else f"ops that differ: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
