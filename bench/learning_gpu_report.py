"""Tables, intervals and training curves for the Gemma-3-270M GPU learning run (bench/learning-gpu.md).

    python bench/learning_gpu_report.py bench/results/learning-gpu --json bench/learning-gpu.json \
        --png bench/learning-gpu.png

Reads what bench/h200_learning_run.sh (and the follow-up GRPO run) brought back:
- ``eval3_samples.jsonl.gz``: base, SFT and GRPO (lr 2e-5, 220 steps) scored in one `grpo eval --engine vllm`
  on the whole GSM8K test split;
- ``g2_samples.jsonl.gz``: the second GRPO run (lr 5e-6, 150 steps), same prompts, its own eval call;
- ``eval_samples.jsonl.gz``: the first eval (base, SFT), to show how far vLLM's greedy decoding repeats
  itself across calls;
- ``g2_metrics.jsonl``: the run's logs/metrics.jsonl (SFT, then both GRPO attempts).
``--levers``, ``--round3`` and ``--round15`` add the later Gemma rounds (bench/h200_learning_levers.sh's
folders; round 15 is round 3's settings with on-policy scoring, plotted over round 3 with the IS ratio and
log-prob difference); ``--json`` updates its keys in the file and keeps the other reports' keys.
Per checkpoint: format %, accuracy %, mean reward with 95 % intervals; differences against SFT with a paired
bootstrap over prompts (cli/eval/stats.py, the same code `grpo eval` uses).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cli.eval.stats import mean_ci, paired_bootstrap, wilson  # noqa: E402

LABELS = {
    "base": "Base (pretrained)",
    "sft": "SFT (250 steps)",
    "grpo_lr2e-5": "GRPO lr 2e-5, 220 steps",
    "grpo_lr5e-6": "GRPO lr 5e-6, 150 steps",
}


KEYS = ("reward", "frac_reward_zero_std", "completions/mean_length")


def load(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def checkpoints(root: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in load(root / "eval3_samples.jsonl.gz"):
        key = "grpo_lr2e-5" if row["checkpoint"] == "grpo" else row["checkpoint"]
        out.setdefault(key, []).append(row)
    out["grpo_lr5e-6"] = load(root / "g2_samples.jsonl.gz")
    questions = [r["question"] for r in out["sft"]]
    for key, rows in out.items():
        if [r["question"] for r in rows] != questions:
            raise SystemExit(f"{key}: prompts differ from SFT's: cannot pair")
    return out


def summary(rows: list[dict]) -> dict:
    n = len(rows)
    fmt = sum(bool(r["format_ok"]) for r in rows)
    acc = sum(bool(r["correct"]) for r in rows)
    mean, lo, hi = mean_ci([float(r["reward"]) for r in rows])
    return {
        "n": n,
        "format_pct": round(100 * fmt / n, 2),
        "format_ci95": [round(100 * x, 2) for x in wilson(fmt, n)],
        "accuracy_pct": round(100 * acc / n, 2),
        "accuracy_ci95": [round(100 * x, 2) for x in wilson(acc, n)],
        "mean_reward": round(mean, 4),
        "mean_reward_ci95": [round(lo, 4), round(hi, 4)],
        "mean_completion_tokens": round(sum(r["tokens"] for r in rows) / n, 1),
        "hit_256_tokens_pct": round(100 * sum(r["tokens"] >= 256 for r in rows) / n, 2),
    }


def paired(a: list[dict], b: list[dict]) -> dict:
    out = {}
    for key, get in (
        ("mean_reward", lambda r: float(r["reward"])),
        ("accuracy", lambda r: float(bool(r["correct"]))),
        ("format", lambda r: float(bool(r["format_ok"]))),
    ):
        diff, lo, hi = paired_bootstrap([get(r) for r in a], [get(r) for r in b], iters=5000, seed=0)
        scale = 1 if key == "mean_reward" else 100
        out[key] = {"diff": round(scale * diff, 4), "ci95": [round(scale * lo, 4), round(scale * hi, 4)]}
    return out


def curves(metrics: Path) -> list[list[dict]]:
    """The GRPO attempts in a metrics file: a new attempt starts where the step count restarts."""
    runs: list[list[dict]] = []
    for line in metrics.read_text().splitlines():
        row = json.loads(line)
        if row.get("stage") != "grpo":
            continue
        if not runs or row["step"] <= runs[-1][-1]["step"]:
            runs.append([])
        runs[-1].append(row)
    return runs


def smooth(values: list[float], k: int = 10) -> list[float]:
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= k:
            acc -= values[i - k]
        out.append(acc / min(i + 1, k))
    return out


PANELS = [
    ("reward", "reward (sum of the 4 seed-000 rewards)"),
    ("reward_std", "reward std within groups"),
    ("frac_reward_zero_std", "share of groups with zero spread"),
    ("completions/mean_length", "completion length (tokens)"),
    ("rewards/check_answer_accuracy/mean", "check_answer_accuracy"),
    ("rewards/match_format_exactly/mean", "match_format_exactly"),
]
# The on-policy signals (round 15 against round 3): how much each completion weighs, and why
IS_PANELS = [
    ("reward", "reward (sum of the 4 seed-000 rewards)"),
    ("frac_reward_zero_std", "share of groups with zero spread"),
    ("completions/mean_length", "completion length (tokens)"),
    ("rewards/check_answer_accuracy/mean", "check_answer_accuracy"),
    ("sampling/importance_sampling_ratio/mean", "IS ratio, mean over the step (log scale)"),
    ("sampling/sampling_logp_difference/mean", "|trainer − vLLM| log-prob per token"),
    ("entropy", "entropy (nats per token)"),
    ("step_seconds", "seconds per step"),
]


def plot(
    runs: list[list[dict]],
    names: list[str],
    png: Path,
    per_step: str = "64 completions = 8 prompts x G=8",
    panels: list[tuple[str, str]] = PANELS,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = len(panels) // 2
    fig, axes = plt.subplots(2, cols, figsize=(5 * cols, 8))
    for ax, (key, title) in zip(axes.flat, panels, strict=True):
        if "importance_sampling_ratio" in key:
            ax.set_yscale("log")
        for rows, name in zip(runs, names, strict=True):
            steps = [r["step"] for r in rows]
            vals = [float(r.get(key) or 0.0) for r in rows]
            line = ax.plot(steps, vals, alpha=0.25, linewidth=0.8)[0]
            ax.plot(steps, smooth(vals), color=line.get_color(), linewidth=1.8, label=name)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(f"GRPO step ({per_step})")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=9)
    fig.suptitle("Gemma-3-270M GRPO on GSM8K, one H200, vLLM rollouts (thin: per step; thick: 10-step mean)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def round_samples(root: Path) -> dict[str, list[dict]]:
    cps: dict[str, list[dict]] = {}
    for row in load(root / "eval_samples.jsonl.gz"):
        cps.setdefault(row["checkpoint"], []).append(row)
    if [r["question"] for r in cps["grpo"]] != [r["question"] for r in cps["sft"]]:
        raise SystemExit(f"{root}: prompts differ between SFT and GRPO")
    return cps


def levers(
    root: Path,
    first: dict[str, list[dict]],
    png: Path | None,
    *,
    tag: str = "levers",
    title: str = "Round 2 (pass-rate filter, G=16, lr 5e-6)",
    against: dict[str, dict[str, list[dict]]] | None = None,
    compare: Path | None = None,
    compare_name: str = "",
) -> dict:
    """A levers round (bench/h200_learning_levers.sh): SFT and GRPO scored in one eval call, paired; also
    paired against round 1's SFT and against the GRPO checkpoints of earlier rounds (``against``: other
    eval calls, so vLLM's call-to-call noise, measured in round 1's control row, is part of those)."""
    cps = round_samples(root)
    out: dict = {
        "checkpoints": {f"{k}_{tag}": summary(v) for k, v in cps.items()},
        "grpo_minus_sft": paired(cps["sft"], cps["grpo"]),
        f"grpo_{tag}_minus_round1_sft": paired(first["sft"], cps["grpo"]),
        "filter": json.loads((root / "passrate.json").read_text()),
    }
    for name, other in (against or {}).items():
        out[f"grpo_{tag}_minus_{name}_grpo"] = paired(other["grpo"], cps["grpo"])
    b = [bool(r["correct"]) for r in cps["grpo"]]
    a = [bool(r["correct"]) for r in cps["sft"]]
    only_grpo = sum(y and not x for x, y in zip(a, b, strict=True))
    only_sft = sum(x and not y for x, y in zip(a, b, strict=True))
    out["discordant"] = {
        "solved_only_after_grpo": only_grpo,
        "solved_only_by_sft": only_sft,
        "sign_test_p_two_sided": round(sign_test(only_grpo, only_sft), 5),
    }
    rows = curves(root / "metrics.jsonl")[-1]

    def avg(key: str, part: list[dict]) -> float:
        return round(sum(float(r.get(key) or 0) for r in part) / len(part), 4)

    keys = (*KEYS, "rewards/check_answer_accuracy/mean")
    head, tail = rows[:20], rows[-20:]
    out["training"] = {
        "steps": len(rows),
        "median_step_seconds": sorted(r["step_seconds"] for r in rows[1:])[len(rows[1:]) // 2],
        **{f"first20_{k}": avg(k, head) for k in keys},
        **{f"last20_{k}": avg(k, tail) for k in keys},
        **weighting(rows),
    }
    print(f"\n{title}:")
    for key, s in out["checkpoints"].items():
        print(
            f"| {key} | {s['format_pct']:.1f} [{s['format_ci95'][0]:.1f}, {s['format_ci95'][1]:.1f}] | "
            f"{s['accuracy_pct']:.2f} [{s['accuracy_ci95'][0]:.2f}, {s['accuracy_ci95'][1]:.2f}] | "
            f"{s['mean_reward']:.3f} [{s['mean_reward_ci95'][0]:.3f}, {s['mean_reward_ci95'][1]:.3f}] | "
            f"{s['mean_completion_tokens']:.0f} |"
        )
    for label in [k for k in out if "_minus_" in k]:
        d = out[label]
        cells = [
            f"{d[k]['diff']:+.3f} [{d[k]['ci95'][0]:+.3f}, {d[k]['ci95'][1]:+.3f}]"
            for k in ("mean_reward", "accuracy", "format")
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print(json.dumps({**out["training"], **out["discordant"]}, indent=1))
    if png:
        if compare:  # this round's curves over the earlier round's
            plot(
                [curves(compare / "metrics.jsonl")[-1], rows],
                [compare_name, title],
                png,
                per_step="128 completions = 8 prompts x G=16",
                panels=IS_PANELS,
            )
        else:
            plot([rows], [title], png, per_step="128 completions = 8 prompts x G=16")
    return out


def weighting(rows: list[dict]) -> dict:
    """How much each completion weighed over the run (TRL's vLLM importance-sampling correction): the median
    over steps of the step's mean ratio and of the per-token log-prob difference, with their ranges."""
    out: dict = {}
    for key, name in (
        ("sampling/importance_sampling_ratio/mean", "is_ratio_mean"),
        ("sampling/sampling_logp_difference/mean", "logp_diff_per_token"),
        ("sampling/importance_sampling_ratio/min", "is_ratio_min"),
        ("sampling/importance_sampling_ratio/max", "is_ratio_max"),
    ):
        vals = sorted(float(r[key]) for r in rows if r.get(key) is not None)
        if vals:
            out[f"{name}_median"] = round(vals[len(vals) // 2], 5)
            out[f"{name}_range"] = [round(vals[0], 5), round(vals[-1], 5)]
    return out


def sign_test(k: int, m: int) -> float:
    """Two-sided exact binomial sign test: k successes against m failures, p = 1/2."""
    from math import comb

    n = k + m
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(0, min(k, m) + 1)) / 2**n
    return min(1.0, 2 * tail)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root", type=Path)
    p.add_argument("--json", type=Path)
    p.add_argument("--png", type=Path)
    p.add_argument("--levers", type=Path, help="the second round's folder (bench/h200_learning_levers.sh)")
    p.add_argument("--levers-png", type=Path)
    p.add_argument("--round3", type=Path, help="the third round's folder (whole pool, lr 1e-5)")
    p.add_argument("--round3-png", type=Path)
    p.add_argument("--round15", type=Path, help="round 3's settings again, on-policy scoring")
    p.add_argument("--round15-png", type=Path)
    args = p.parse_args(argv)
    cps = checkpoints(args.root)
    result: dict = {"checkpoints": {k: summary(v) for k, v in cps.items()}, "vs_sft": {}}
    for key in ("grpo_lr2e-5", "grpo_lr5e-6"):
        result["vs_sft"][key] = paired(cps["sft"], cps[key])
    result["sft_vs_base"] = paired(cps["base"], cps["sft"])
    first = [r for r in load(args.root / "eval_samples.jsonl.gz") if r["checkpoint"] == "sft"]
    same = sum(a["completion"] == b["completion"] for a, b in zip(first, cps["sft"], strict=True))
    result["sft_repeat"] = {
        "identical_completions": same,
        "n": len(first),
        "first_call": summary(first),
        "note": "two `grpo eval --engine vllm` calls of the same SFT adapter (greedy, bf16)",
        "second_minus_first": paired(first, cps["sft"]),
    }
    runs = curves(args.root / "g2_metrics.jsonl")
    names = ["lr 2e-5 (stopped at 220)", "lr 5e-6 (150 steps)"]
    result["training"] = {}
    for rows, name in zip(runs, names, strict=True):

        def avg(key: str, part: list[dict]) -> float:
            return round(sum(float(r.get(key) or 0) for r in part) / len(part), 4)

        head, tail = rows[:20], rows[-20:]
        result["training"][name] = {
            "steps": len(rows),
            "median_step_seconds": sorted(r["step_seconds"] for r in rows[1:])[len(rows[1:]) // 2],
            **{f"first20_{k}": avg(k, head) for k in KEYS},
            **{f"last20_{k}": avg(k, tail) for k in KEYS},
        }
    print("| checkpoint | format % [95 % CI] | accuracy % [95 % CI] | mean reward [95 % CI] | mean tokens |")
    print("|---|---:|---:|---:|---:|")
    for key, s in result["checkpoints"].items():
        fmt = f"{s['format_pct']:.1f} [{s['format_ci95'][0]:.1f}, {s['format_ci95'][1]:.1f}]"
        print(
            f"| {LABELS[key]} | {fmt} | "
            f"{s['accuracy_pct']:.2f} [{s['accuracy_ci95'][0]:.2f}, {s['accuracy_ci95'][1]:.2f}] | "
            f"{s['mean_reward']:.3f} [{s['mean_reward_ci95'][0]:.3f}, {s['mean_reward_ci95'][1]:.3f}] | "
            f"{s['mean_completion_tokens']:.0f} |"
        )
    print()
    print("| difference (paired over 1,319 prompts) | mean reward [95 % CI] | accuracy pts | format pts |")
    print("|---|---:|---:|---:|")
    rows_out = [("SFT − base", result["sft_vs_base"])] + [
        (f"{LABELS[k]} − SFT", v) for k, v in result["vs_sft"].items()
    ]
    rows_out.append(("SFT, second eval call − first (control)", result["sft_repeat"]["second_minus_first"]))
    for label, d in rows_out:
        cells = [
            f"{d[k]['diff']:+.3f} [{d[k]['ci95'][0]:+.3f}, {d[k]['ci95'][1]:+.3f}]"
            for k in ("mean_reward", "accuracy", "format")
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()
    print(json.dumps(result["training"], indent=1))
    print(f"SFT repeat: {same}/{len(first)} identical greedy completions across two vLLM eval calls")
    if args.levers:
        result["levers"] = levers(args.levers, cps, args.levers_png)
    folders = {"round2": args.levers, "round3": args.round3}
    rounds = [  # folder, png, tag, title, earlier rounds paired against, the round plotted beneath (its name)
        (args.round3, args.round3_png, "round3", "Round 3 (whole pool, G=16, lr 1e-5)", ["round2"], None),
        (
            args.round15,
            args.round15_png,
            "round15",
            "Round 15 (round 3's settings, on-policy scoring)",
            ["round3", "round2"],
            ("round3", "Round 3 (TRL 1.15's default weighting)"),
        ),
    ]
    for folder, png, tag, title, earlier, beneath in rounds:
        if folder:
            against = {k: round_samples(folders[k]) for k in earlier if folders[k]}
            under, under_name = beneath or (None, "")
            result[tag] = levers(
                folder, cps, png, tag=tag, title=title, against=against,
                compare=folders[under] if under else None, compare_name=under_name,
            )  # fmt: skip
    if args.json:  # the file also holds other reports' keys (qwen_coder_report.py, backends_report.py)
        data = json.loads(args.json.read_text()) if args.json.exists() else {}
        args.json.write_text(json.dumps({**data, **result}, indent=1) + "\n")
    if args.png:
        plot(runs, names, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
