"""Tables from `bench/gpu/h200_deepspeed_run.sh` results: the launch modes step by step, then per run.

    python bench/gpu/deepspeed_report.py bench/results/deepspeed call1 plain ds2 ds3 fsdp

Reads ``<prefix>_<name>_metrics.jsonl`` (``<name>_metrics.jsonl`` for an empty prefix): the run's
logs/metrics.jsonl; when a file holds several runs, the last. Step table: reward, its spread, loss and
grad norm of every step, to see where the modes sample the same completions (same reward and loss) and
where they part. Run table: what accelerate set up, median step time after the first step, peak GPU
memory.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def last_run(path: Path) -> tuple[list[dict], dict]:
    steps: list[dict] = []
    summary: dict = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("stage") == "grpo":
            if row["step"] == 1:
                steps, summary = [], {}
            steps.append(row)
        elif row.get("stage") == "grpo_summary":
            summary = row
    return steps, summary


def smi_peaks(path: Path) -> str:
    """Largest memory.used per GPU index in an nvidia-smi CSV sample (index, MiB), in GiB."""
    if not path.exists():
        return ""
    peak: dict[str, float] = {}
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[1].isdigit():
            peak[parts[0]] = max(peak.get(parts[0], 0.0), int(parts[1]) / 1024)
    return ", ".join(f"GPU{k} {v:.1f}" for k, v in sorted(peak.items()))


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    root, prefix, names = Path(argv[0]), argv[1], argv[2:]
    lead = f"{prefix}_" if prefix else ""
    runs = {n: last_run(root / f"{lead}{n}_metrics.jsonl") for n in names}
    print("| step | " + " | ".join(f"{n} reward ± std / loss / grad norm" for n in names) + " |")
    print("|---:|" + "---|" * len(names))
    for i in range(max(len(s) for s, _ in runs.values())):
        cells = []
        for n in names:
            steps = runs[n][0]
            if i >= len(steps):
                cells.append("")
                continue
            r = steps[i]
            reward = f"{r['reward']:.3f} ± {r['reward_std']:.3f}"
            cells.append(f"{reward} / {r['loss']:.6g} / {r['grad_norm']:.5g}")
        print(f"| {i + 1} | " + " | ".join(cells) + " |")
    print()
    print(
        "| run | distributed_type | processes | steps | median s/step (after step 1) | samples/s | "
        "scaling efficiency vs plain | peak GiB (rank 0, torch) | peak GiB per GPU (nvidia-smi) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    base_rate = None
    for n in names:
        steps, summary = runs[n]
        times = [r["step_seconds"] for r in steps[1:]] or [r["step_seconds"] for r in steps]
        median = statistics.median(times)
        batch = summary.get("global_batch") or 0
        rate = batch / median if median else 0.0
        procs = summary.get("world_size") or 1
        if n == "plain":
            base_rate = rate
        eff = f"{100 * rate / (procs * base_rate):.0f} %" if base_rate and n != "plain" else ""
        print(
            f"| {n} | {summary.get('distributed_type')} | {procs} | {len(steps)} | {median:.2f} | "
            f"{rate:.3f} | {eff} | {summary.get('peak_gpu_gib')} | {smi_peaks(root / f'{lead}{n}_smi.csv')} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
