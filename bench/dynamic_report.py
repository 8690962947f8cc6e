"""Dynamic sampling on the 1.5B run (bench/learning-gpu.md, round 6), from the raw files.

    python bench/dynamic_report.py bench/results/qwen-coder-dynamic bench/results/qwen-coder-solo \
        --json bench/learning-gpu.json --png bench/learning-gpu-qwen-coder-dynamic.png

D is run A of round 5 (bench/results/qwen-coder-solo) with ``grpo.dynamic_sampling: true``: same model, SFT
recipe, seed, data order and settings, alone on the GPU, stopped after 330 s of process time (A: 500 s).
Prints the training signals of D against A's first as many steps, D's GSM8K accuracy against its own SFT
(one `grpo eval` call), and the cross-call comparisons that share prompts: D's SFT row against round 5's
(the SFT was retrained, same recipe), and D against A (50 against 85 steps: not a same-step comparison).
Writes the json key ``qwen_coder_dynamic`` and the curves.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tarfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

from qwen_coder_report import paired, steps, training  # noqa: E402

CORRECT = {"seed rule": "correct", "math_equal": "correct_math", "last number": "correct_lenient"}


def samples(folder: Path, run: str) -> dict[str, dict[str, dict[str, Any]]]:
    """checkpoint -> question -> sample, from the run's eval samples inside logs.tgz."""
    with tarfile.open(folder / "logs.tgz") as tar:
        member = tar.extractfile(f"runs/{run}/eval/samples.jsonl")
        assert member is not None
        rows = [json.loads(x) for x in io.TextIOWrapper(member, encoding="utf-8")]
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for s in rows:
        out.setdefault(s["checkpoint"], {})[s["question"]] = s
    return out


def compare(first: dict[str, dict[str, Any]], second: dict[str, dict[str, Any]]) -> dict[str, Any]:
    qs = sorted(set(first) & set(second))
    res = {
        rule: paired([float(first[q][key]) for q in qs], [float(second[q][key]) for q in qs])
        for rule, key in CORRECT.items()
    }
    res["n"] = len(qs)
    res["same_completion"] = round(
        sum(first[q]["completion"] == second[q]["completion"] for q in qs) / len(qs), 4
    )
    return res


def signals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(key: str, part: slice = slice(None)) -> float | None:
        vals = [r[key] for r in rows[part] if isinstance(r.get(key), (int, float))]
        return round(statistics.fmean(vals), 4) if vals else None

    return {
        "steps": len(rows),
        "reward_mean": mean("reward"),
        "reward_first10": mean("reward", slice(0, 10)),
        "reward_last10": mean("reward", slice(-10, None)),
        "accuracy_reward_mean": mean("rewards/check_answer_accuracy/mean"),
        "frac_zero_std_logged_mean": mean("frac_reward_zero_std"),
        "frac_zero_std_after_refill_mean": mean("dynamic/frac_zero_std_after"),
        "refilled_groups_per_step": mean("dynamic/refilled_groups"),
        "retries_per_step": mean("dynamic/retries"),
        "entropy_mean": mean("entropy"),
        "length_mean": mean("completions/mean_length"),
        "rollout_seconds_mean": mean("phase_rollout_s"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dynamic", type=Path)
    ap.add_argument("solo", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--png", type=Path)
    args = ap.parse_args()
    d = steps(args.dynamic / "D_metrics.jsonl")
    a = steps(args.solo / "A_metrics.jsonl")
    a_same = a[: len(d)]
    report = json.loads((args.dynamic / "evalD_report.json").read_text())
    ds, asolo = samples(args.dynamic, "D"), samples(args.solo, "A")
    keys = ("accuracy", "accuracy_math", "accuracy_lenient", "accuracy_ci95", "format_compliance",
            "mean_completion_tokens")  # fmt: skip
    sft_grpo = next(p for p in report["paired"] if (p["a"], p["b"]) == ("sft", "grpo"))
    out = {
        "what": "D = round 5's A + grpo.dynamic_sampling (max_retries 2), alone on one H200, 330 s",
        "training": {"D_dynamic": training(d), "A_first_same_steps": training(a_same)},
        "signals": {"D_dynamic": signals(d), "A_first_same_steps": signals(a_same)},
        "gsm8k": {
            "checkpoints": {r["checkpoint"]: {k: r[k] for k in keys} for r in report["results"]},
            "D_minus_its_sft": compare(ds["sft"], ds["grpo"]),
            "D_minus_its_sft_reward": sft_grpo,
            "cross_call_sft_round5_vs_sft_here": compare(asolo["sft"], ds["sft"]),
            "cross_call_A_85_steps_vs_D_50_steps": compare(asolo["grpo"], ds["grpo"]),
        },
    }  # fmt: skip
    print(json.dumps(out, indent=1))
    if args.json:
        data = json.loads(args.json.read_text()) if args.json.exists() else {}
        data["qwen_coder_dynamic"] = out
        args.json.write_text(json.dumps(data, indent=1) + "\n")
    if args.png:
        args.png.write_bytes(curves(a, d))
    return 0


def curves(a: list[dict[str, Any]], d: list[dict[str, Any]]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    panels = (
        ("reward", "mean reward"),
        ("frac_reward_zero_std", "zero-spread groups, TRL's log (every rollout call)"),
        ("completions/mean_length", "completion length (tokens)"),
        ("step_seconds", "s / step"),
    )
    for ax, (key, title) in zip(axes, panels, strict=True):
        for rows, label in ((a, "A: round 5, no dynamic sampling"), (d, "D: dynamic sampling")):
            ax.plot([r["step"] for r in rows], [r.get(key) for r in rows], label=label, linewidth=1.2)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("Qwen2.5-Coder-1.5B-Instruct, GSM8K, G = 16 × 8 prompts, lr 1e-5, one H200, each run alone")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


if __name__ == "__main__":
    sys.exit(main())
