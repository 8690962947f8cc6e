"""The GPU step's levers, each off and on in one lease (bench/gpu/step_levers.sh): a small JSON summary.

    python bench/gpu/step_levers_report.py DIR [--out DIR/summary.json] [--base base] [--profile-step 5]

DIR holds one ``NAME_metrics.jsonl`` per run (``grpo grpo``'s logs/metrics.jsonl, same seed and settings,
one lever changed). Per run: the step time (median over the steps after the first, the profiled step and
the one after it left out, which pay for the profiler and for writing its trace), each phase's median, the
step against the 0.68 s floor of the 1.5B step (bench/h200.md), the IS ratio's per-step means and the
per-token |Δ log p|, the loss and reward per step. Against the ``--base`` run (and ``all`` against
``packed``, when both ran: the LoRA hand-off's own effect): the step's ratio, each
phase's, the largest per-step loss difference, the mean reward's difference, and whether the lever keeps
the IS ratio within [0.99, 1.01] at every step (issue 43's bar for keeping a lever).

The runs draw the same prompts (same seed), but their rollouts part after step 1 once the weights differ in
the last bits, so per-step losses agree closely only at the first steps; the learning check is the IS
ratio and the reward over the run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

FLOOR_S = 0.68  # the 1.5B step's floor on one H200: training FLOPs at 790 TFLOP/s + decode at 4.8 TB/s
PHASES = ("generate", "sync", "rollout", "logprobs", "loss", "backward", "train_step")
IS_BAND = (0.99, 1.01)


def grpo_rows(path: Path) -> list[dict[str, Any]]:
    """The run's GRPO step rows, in step order (the last row of a step, if it was logged twice)."""
    rows: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            if row.get("stage") == "grpo" and isinstance(row.get("step"), int):
                rows[row["step"]] = row
    return [rows[k] for k in sorted(rows)]


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def run_summary(rows: list[dict[str, Any]], profile_step: int) -> dict[str, Any]:
    """One run's figures (see the module docs)."""
    timed = [r for r in rows if r["step"] > 1 and r["step"] not in (profile_step, profile_step + 1)]
    step = _median([r["step_seconds"] for r in timed if r.get("step_seconds") is not None])
    phases = {p: _median([r[f"phase_{p}_s"] for r in timed if f"phase_{p}_s" in r]) for p in PHASES}
    ratio = [
        r["sampling/importance_sampling_ratio/mean"]
        for r in rows
        if "sampling/importance_sampling_ratio/mean" in r
    ]
    diff = [
        r["sampling/sampling_logp_difference/mean"]
        for r in rows
        if "sampling/sampling_logp_difference/mean" in r
    ]
    return {
        "steps": len(rows),
        "timed_steps": [r["step"] for r in timed],
        "step_s_median": step,
        "x_floor": round(step / FLOOR_S, 2) if step else None,
        "phase_s_median": phases,
        "is_ratio_mean_range": [round(min(ratio), 4), round(max(ratio), 4)] if ratio else None,
        "is_ratio_in_band": all(IS_BAND[0] <= x <= IS_BAND[1] for x in ratio) if ratio else None,
        "logp_diff_per_token_median": _median(diff),
        "loss": [round(r["loss"], 6) for r in rows if "loss" in r],
        "reward_mean": round(statistics.fmean(r["reward"] for r in rows), 4) if rows else None,
        "mean_length": round(statistics.fmean(r["completions/mean_length"] for r in rows), 1)
        if rows
        else None,
        "peak_gpu_gib": max((r.get("peak_gpu_gib") or 0 for r in rows), default=None),
    }


def against(run: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """A lever's run over the base run."""

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a and b else None

    losses = list(zip(run["loss"], base["loss"], strict=False))
    return {
        "step_ratio": ratio(run["step_s_median"], base["step_s_median"]),
        "phase_ratio": {p: ratio(run["phase_s_median"][p], base["phase_s_median"][p]) for p in PHASES},
        "loss_diff_max": round(max(abs(a - b) for a, b in losses), 6) if losses else None,
        "loss_diff_step1": round(abs(losses[0][0] - losses[0][1]), 6) if losses else None,
        "reward_mean_diff": round(run["reward_mean"] - base["reward_mean"], 4)
        if run["reward_mean"] is not None and base["reward_mean"] is not None
        else None,
        "keeps_is_ratio": run["is_ratio_in_band"],
    }


def summarise(folder: Path, base: str, profile_step: int) -> dict[str, Any]:
    runs = {
        p.name.removesuffix("_metrics.jsonl"): grpo_rows(p) for p in sorted(folder.glob("*_metrics.jsonl"))
    }
    out: dict[str, Any] = {
        "floor_s": FLOOR_S,
        "is_band": list(IS_BAND),
        "base": base,
        "runs": {},
        "vs_base": {},
    }
    for name, rows in runs.items():
        out["runs"][name] = run_summary(rows, profile_step) if rows else {"steps": 0}
    if out["runs"].get(base, {}).get("steps"):
        for name, summary in out["runs"].items():
            if name != base and summary.get("steps"):
                out["vs_base"][name] = against(summary, out["runs"][base])
    # `all` = packed + the one-call LoRA hand-off: against `packed`, the hand-off's own effect
    if out["runs"].get("all", {}).get("steps") and out["runs"].get("packed", {}).get("steps"):
        out["all_vs_packed"] = against(out["runs"]["all"], out["runs"]["packed"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--base", default="base")
    parser.add_argument("--profile-step", type=int, default=5)
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: {args.folder} is not a folder", file=sys.stderr)
        return 2
    summary = summarise(args.folder, args.base, args.profile_step)
    if not summary["runs"]:
        print(f"error: no *_metrics.jsonl in {args.folder}", file=sys.stderr)
        return 2
    text = json.dumps(summary, indent=1)
    out = args.out or args.folder / "summary.json"
    out.write_text(text + "\n")
    for name, run in summary["runs"].items():
        vs = summary["vs_base"].get(name, {})
        print(
            f"{name:>8}: {run.get('steps', 0)} steps, {run.get('step_s_median')} s/step "
            f"({run.get('x_floor')}x floor), IS {run.get('is_ratio_mean_range')}"
            + (f", vs base {vs['step_ratio']}x, loss diff max {vs['loss_diff_max']}" if vs else "")
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
