"""The same-call overhead of `grpo grpo` against plain Unsloth + TRL + vLLM, from one h200_vllm_run.sh folder.

    python bench/overhead_report.py bench/results/overhead-2026-12-03b [--json OUT.json]

Reads, per run tag, ours' `<tag>_metrics.jsonl` (the trainer's per-step rows) or plain's `<tag>.log`
(its `{"step": ...}` lines and the closing summary), and `<tag>_smi.csv` (nvidia-smi samples) when
present. Steps 2..N are timed (step 1 is the compile); a run's figure is the median of its steps, and the
pair ratio is ours' median over plain's, paired in the order the runs were made (plaingsm, auto;
plaingsm2, auto2; ...). The `warm` run is the machine's cold compile and is not counted.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

PHASES = ("phase_generate_s", "phase_logprobs_s", "phase_loss_s", "phase_backward_s")


def _ours(folder: Path, tag: str) -> dict | None:
    path = folder / f"{tag}_metrics.jsonl"
    if not path.exists():
        return None
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    steps = [r for r in rows if r.get("stage") == "grpo" and "step_seconds" in r]
    summary = next((r for r in rows if r.get("stage") == "grpo_summary"), {})
    return {
        "steps": steps,
        "first_step_s": summary.get("first_step_seconds"),
        "torch_peak_gib": summary.get("train_peak_gib"),
        "is_ratio": [r.get("sampling/importance_sampling_ratio/mean") for r in steps],
        "logp_diff": [r.get("sampling/sampling_logp_difference/mean") for r in steps],
        "seconds": [r["step_seconds"] for r in steps],
    }


def _plain(folder: Path, tag: str) -> dict | None:
    path = folder / f"{tag}.log"
    if not path.exists():
        return None
    steps, summary = [], {}
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith('{"step"'):
            steps.append(json.loads(line))
        elif line.startswith('{"model"'):
            summary = json.loads(line)
    if not steps:
        return None
    return {
        "steps": steps,
        "first_step_s": summary.get("first_step_s"),
        "torch_peak_gib": summary.get("peak_gib"),
        "is_ratio": [summary.get("is_ratio_median")],
        "logp_diff": [summary.get("logp_diff_median")],
        "seconds": [r["s"] for r in steps],
    }


def _smi_peak_gib(folder: Path, tag: str) -> float | None:
    path = folder / f"{tag}_smi.csv"
    if not path.exists():
        return None
    used = [int(p.split(",")[1]) for p in path.read_text().splitlines() if p.count(",") == 1]
    return round(max(used) / 1024, 2) if used else None


def run_figures(folder: Path, tag: str) -> dict | None:
    got = _plain(folder, tag) if tag.startswith("plain") else _ours(folder, tag)
    if got is None:
        return None
    timed = got["steps"][1:]
    if not timed:
        return None
    phases = {
        p.removeprefix("phase_").removesuffix("_s"): round(statistics.median(r[p] for r in timed), 3)
        for p in PHASES
        if all(p in r for r in timed)
    }
    seconds = got["seconds"][1:]
    return {
        "tag": tag,
        "steps_timed": len(timed),
        "s_per_step_median": round(statistics.median(seconds), 3),
        "s_per_step": [round(s, 2) for s in seconds],
        "first_step_s": got["first_step_s"],
        "phases_median": phases,
        "torch_peak_gib": got["torch_peak_gib"],
        "smi_peak_gib": _smi_peak_gib(folder, tag),
        "is_ratio_median": _median(got["is_ratio"]),
        "logp_diff_median": _median(got["logp_diff"]),
    }


def _median(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 4) if known else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--plain", default="plaingsm", help="the reference's run name (default: plaingsm)")
    ap.add_argument("--ours", default="auto", help="ours' run name (default: auto)")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args(argv)
    if not args.folder.is_dir():
        print(f"overhead_report: no such folder: {args.folder}", file=sys.stderr)
        return 2

    def tags(name: str) -> list[str]:
        found = [p.name for p in args.folder.iterdir()]
        out = []
        for k in range(1, 100):
            tag = name if k == 1 else f"{name}{k}"
            if not any(re.fullmatch(rf"{re.escape(tag)}(_metrics\.jsonl|\.log)", f) for f in found):
                break
            out.append(tag)
        return out

    plains = [run_figures(args.folder, t) for t in tags(args.plain)]
    ours = [run_figures(args.folder, t) for t in tags(args.ours)]
    pairs = [(p, o) for p, o in zip(plains, ours, strict=False) if p and o]
    if not pairs:
        print(f"overhead_report: no complete {args.plain}/{args.ours} pair in {args.folder}", file=sys.stderr)
        return 1
    print(
        "| run | steps timed | s/step median (each) | first step | generate / log-probs / loss / backward"
        " | torch peak | smi peak | IS median | Δ log p |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for run in [r for pair in pairs for r in pair]:
        ph = run["phases_median"]
        phs = " / ".join(f"{ph[k]:.2f}" for k in ("generate", "logprobs", "loss", "backward") if k in ph)
        each = ", ".join(f"{s:.2f}" for s in run["s_per_step"])
        print(
            f"| {run['tag']} | {run['steps_timed']} | {run['s_per_step_median']:.2f} ({each}) | "
            f"{run['first_step_s']} | {phs} | {run['torch_peak_gib']} | {run['smi_peak_gib']} | "
            f"{run['is_ratio_median']} | {run['logp_diff_median']} |"
        )
    ratios = [round(o["s_per_step_median"] / p["s_per_step_median"], 4) for p, o in pairs]
    pooled = round(
        statistics.median(s for _, o in pairs for s in o["s_per_step"])
        / statistics.median(s for p, _ in pairs for s in p["s_per_step"]),
        4,
    )
    print(
        f"\nper pair (ours / plain): {', '.join(f'{r:.3f}x' for r in ratios)}; "
        f"median of the pairs {statistics.median(ratios):.3f}x; pooled steps {pooled:.3f}x"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "runs": [r for pair in pairs for r in pair],
                    "pair_ratios": ratios,
                    "ratio_median": statistics.median(ratios),
                    "ratio_pooled": pooled,
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
