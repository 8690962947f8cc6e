"""Scaling table from `bench/gpu/h200_scale_run.sh` results: 1 GPU vs `--gpus 2`, paired in each device call.

    python bench/gpu/scale_report.py bench/results/scale

Reads ``call<N>_g1_metrics.jsonl`` / ``call<N>_g2_metrics.jsonl`` (the run's logs/metrics.jsonl), drops
each run's first step (warm-up), and reports the median step time, samples/s (completions per step / median
step time) and the scaling efficiency = samples/s on 2 GPUs / (2 × samples/s on 1 GPU) for every call that
has both.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def runs(path: Path) -> list[list[dict]]:
    """The GRPO runs in one metrics file (a file may hold several when a warm machine kept its /tmp)."""
    out: list[list[dict]] = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("stage") != "grpo":
            continue
        if row["step"] == 1 or not out:
            out.append([])
        out[-1].append(row)
    return out


def main(folder: str) -> int:
    root = Path(folder)
    print("| call | GPUs | completions/step | timed steps | median s/step | samples/s | efficiency |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    effs = []
    for call in sorted({p.name.split("_")[0] for p in root.glob("call*_g1_metrics.jsonl")}):
        rates = {}
        for n in (1, 2):
            steps = runs(root / f"{call}_g{n}_metrics.jsonl")[-1][1:]
            times = [r["step_seconds"] for r in steps]
            per_step = 8 * n  # --gens 8, one prompt per GPU per step
            med = statistics.median(times)
            rates[n] = per_step / med
            eff = "" if n == 1 else f"{rates[2] / (2 * rates[1]):.0%}"
            print(f"| {call} | {n} | {per_step} | {len(times)} | {med:.2f} | {rates[n]:.3f} | {eff} |")
        effs.append(rates[2] / (2 * rates[1]))
    if effs:
        print(f"\nmedian scaling efficiency over {len(effs)} paired calls: {statistics.median(effs):.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/scale"))
