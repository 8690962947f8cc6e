"""`grpo eval`'s report: report.json, report.md (seed 000's results table), eval.png, samples.jsonl,
and the table printed at the end; 95 % intervals and paired differences between checkpoints."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from cli.common import console, err_console
from cli.eval import passk, verdict
from cli.eval.evaluation import EvalJob, Scored, paired_differences
from cli.eval.tools import markdown as tool_markdown
from cli.eval.tools import print_table as print_tool_table
from cli.run.atomic import atomic_dir

NOT_APPLICABLE = "—"  # a column that does not apply to a row (the base-chat row's format columns)

ACCURACY_DEFINITION = (
    "correct (seed rule) = check_answer_accuracy reached its exact (5.0) or strip (3.5) tier, or the "
    "extracted solution equals the gold answer as a number (thousands separators allowed); "
    "correct (math_equal) = the answer between the solution tags, else the boxes (several joined boxes are "
    'one set), else an answer phrase ("The final answer is $5$"), equals the gold answer under '
    "py_rewards.math_equal (MATH-style LaTeX, read as a careful grader reads it); "
    "correct (last number) = the last number anywhere in the completion equals the gold answer as a number, "
    "no format needed (GSM8K's lenient grading; a gold answer that is not a number never matches); "
    "format compliance = match_format_exactly > 0; "
    "the base-chat row asks the base model the question alone in its own chat template (no system prompt "
    "or tags), so only the format-free columns apply to it; "
    "reward = match_format_exactly + check_answer_accuracy (seed 000's scores); intervals are 95 % "
    "(Wilson for rates, normal for the mean reward, paired bootstrap over prompts for differences)"
)


def markdown_table(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        f"# grpo eval — {meta['data']} ({meta['n']} problems, greedy, "
        f"max {meta['max_new_tokens']} new tokens)",
        "",
        "| Model Checkpoint | Format Compliance (%) | Accuracy, seed rule (%) | Accuracy, math_equal (%) "
        "| Accuracy, last number (%) | Mean reward "
        "| Avg Completion Length (Tokens) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]

    def pct(r: dict[str, Any], key: str) -> str:
        if r.get(key) is None:
            return NOT_APPLICABLE
        lo, hi = r.get(f"{key}_ci95") or (None, None)
        band = f" [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None and hi is not None else ""
        return f"{100 * r[key]:.1f}%{band}"

    for r in results:
        lo, hi = r.get("mean_reward_ci95") or (None, None)
        reward = NOT_APPLICABLE
        if r.get("mean_reward") is not None:
            reward = f"{r['mean_reward']:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else "")
        lines.append(
            f"| {r['label']} | {pct(r, 'format_compliance')} | {pct(r, 'accuracy')} | "
            f"{100 * r['accuracy_math']:.1f}% | {pct(r, 'accuracy_lenient')} | {reward} | "
            f"{r['mean_completion_tokens']:.0f} |"
        )
    for pair in meta.get("paired") or []:
        lines.append(
            f"\n{pair['b']} − {pair['a']}: mean reward {pair['mean_reward_diff']:+.3f} "
            f"[{pair['ci95'][0]:+.3f}, {pair['ci95'][1]:+.3f}] (paired bootstrap over prompts)"
        )
    lines += tool_markdown(results)
    lines += ["", f"Definitions: {ACCURACY_DEFINITION}.", f"Rewards scored by `{meta['rewards']}`.", ""]
    return "\n".join(lines)


def plot_png(results: list[dict[str, Any]], title: str) -> bytes | None:
    """Bar charts of format %, accuracy % and mean length; None when matplotlib is not installed.

    Every bar carries its value, so a zero is a visible "0%" rather than a missing bar, and the long
    labels ("After SFT (format warm-up)") are wrapped so they do not run into each other (docs/history.md
    "First runs").
    """
    from cli.run.plots import to_png

    fig = eval_figure(results, title)
    return to_png(fig) if fig is not None else None


def eval_figure(results: list[dict[str, Any]], title: str) -> Any:
    """The matplotlib figure behind eval.png (None without matplotlib)."""
    from cli.run.plots import pyplot, wrap_label

    plt = pyplot()
    if plt is None:
        return None
    labels = [wrap_label(r["label"]) for r in results]
    x = list(range(len(labels)))
    sampled = [r.get("sampled") for r in results]
    panels = 3 if any(sampled) else 2
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4.2))
    ax1, ax2 = axes[0], axes[1]
    if panels == 3:
        _sampled_panel(axes[2], labels, sampled)
    width = 0.38
    # The base-chat row has no format columns: no bar, labelled n/a.
    fmt = [r["format_compliance"] for r in results]
    acc = [r["accuracy"] for r in results]
    b1 = ax1.bar([i - width / 2 for i in x], [100 * (v or 0) for v in fmt], width, label="format %")
    b2 = ax1.bar([i + width / 2 for i in x], [100 * (v or 0) for v in acc], width, label="accuracy %")
    for bars, values in ((b1, fmt), (b2, acc)):
        shown = ["n/a" if v is None else f"{100 * v:.0f}%" for v in values]
        ax1.bar_label(bars, labels=shown, fontsize=8, padding=2)
    ax1.set_xticks(x, labels, fontsize=8)
    ax1.set_ylim(0, 112)
    ax1.axhline(0, color="black", linewidth=0.8)
    ax1.set_ylabel("%")
    ax1.legend(loc="upper left", fontsize=8, ncols=2)
    ax1.set_title("format compliance and accuracy", fontsize=10)
    lengths = [r["mean_completion_tokens"] for r in results]
    b3 = ax2.bar(x, lengths, color="tab:gray")
    ax2.bar_label(b3, labels=[f"{v:.0f}" for v in lengths], fontsize=8, padding=2)
    ax2.set_xticks(x, labels, fontsize=8)
    ax2.set_ylim(0, max([*lengths, 1]) * 1.15)
    ax2.axhline(0, color="black", linewidth=0.8)
    ax2.set_ylabel("tokens")
    ax2.set_title("mean completion length", fontsize=10)
    fig.suptitle(title, fontsize=9)
    return fig


def _sampled_panel(ax: Any, labels: list[str], sampled: list[dict[str, Any] | None]) -> None:
    """pass@1, pass@N and maj@N per checkpoint (`--samples N`); a row without samples has no bars."""
    n = next(s["samples"] for s in sampled if s)
    metrics = ("pass@1", f"pass@{n}", f"maj@{n}")
    width = 0.8 / len(metrics)
    for j, metric in enumerate(metrics):
        values = [100 * s[metric]["value"] if s else 0.0 for s in sampled]
        xs = [i + (j - 1) * width for i in range(len(labels))]
        bars = ax.bar(xs, values, width, label=metric)
        shown = [f"{v:.0f}%" if s else "" for v, s in zip(values, sampled, strict=True)]
        ax.bar_label(bars, labels=shown, fontsize=7, padding=2)
    ax.set_xticks(list(range(len(labels))), labels, fontsize=8)
    ax.set_ylim(0, 112)
    ax.set_ylabel("%")
    ax.legend(loc="upper left", fontsize=8, ncols=3)
    ax.set_title(f"{n} samples per prompt (GRPO's temperature)", fontsize=10)


def write(job: EvalJob, scored: Scored, data_label: str, skipped: list[str]) -> None:
    """Write the four files into <run>/eval (one rename), record the stage, print the table."""
    rd, spec, rows, results = job.rd, job.spec, job.rows, scored.results
    meta = {
        "data": data_label,
        "n": len(rows),
        "max_new_tokens": job.max_new_tokens,
        "decoding": "greedy",
        "model": str(job.cfg.model),
        "format": spec.name,
        "contract_sha256": spec.contract_hash(),
        "rewards": scored.rewards_source,
        "definitions": ACCURACY_DEFINITION,
        "skipped": skipped,
        **job.engine_info,
    }
    report = {**meta, "results": results, "paired": paired_differences(scored.per_prompt)}
    sampled = passk.section(scored.sampled) or None
    if sampled:
        report["sampled"] = {
            **sampled,
            "sampling": dataclasses.asdict(job.sampling) if job.sampling else None,
        }
        for r in results:  # each row carries its sampled figures (eval.png's third panel)
            r["sampled"] = next((s for s in sampled["results"] if s["checkpoint"] == r["checkpoint"]), None)
    report["verdict"] = verdict.build(results, scored.samples, sampled, verdict.control_info(rd))
    title = f"grpo eval — {data_label} ({len(rows)} problems" + (
        f"; greedy, and {sampled['samples']} samples each)" if sampled else ", greedy)"
    )
    png = plot_png(results, f"grpo eval — {data_label}, n={len(rows)}, greedy")
    with atomic_dir(rd.eval_dir) as tmp:
        (tmp / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        (tmp / "report.md").write_text(
            verdict.markdown(report["verdict"], title)
            + markdown_table(results, {**meta, "paired": report["paired"]}),
            encoding="utf-8",
        )
        if png is not None:
            (tmp / "eval.png").write_bytes(png)
        with open(tmp / "samples.jsonl", "w", encoding="utf-8") as fh:
            for s in scored.samples:
                fh.write(json.dumps(s, ensure_ascii=False) + "\n")
    keys = ("format_compliance", "accuracy", "accuracy_math", "accuracy_lenient", "mean_completion_tokens")
    rd.record_stage(
        "eval",
        {
            "data": data_label,
            "n": len(rows),
            "results": {r["checkpoint"]: {k: r[k] for k in keys} for r in results},
        },
    )
    verdict.print_verdict(report["verdict"], title)
    print_tool_table(results)
    written = ["report.json", "report.md", "samples.jsonl"] + (["eval.png"] if png is not None else [])
    console.print(f"report: {rd.eval_dir} ({', '.join(written)})")
    if png is None:
        err_console.print(
            "[yellow]note:[/] eval.png skipped: matplotlib is not installed (pip install 'grpo\\[train]')"
        )


def print_results(
    results: list[dict[str, Any]], paired: list[dict[str, Any]], data_label: str, n: int
) -> None:
    from rich.table import Table

    table = Table(title=f"grpo eval — {data_label} ({n} problems, greedy)")
    table.add_column("Model Checkpoint")
    table.add_column("Format Compliance (%)", justify="right")
    table.add_column("Accuracy, seed rule (%)", justify="right")
    table.add_column("Accuracy, math_equal (%)", justify="right")
    table.add_column("Accuracy, last number (%)", justify="right")
    table.add_column("Avg Completion Length (Tokens)", justify="right")
    table.add_column("time", justify="right")

    def pct(value: float | None) -> str:
        return NOT_APPLICABLE if value is None else f"{100 * value:.1f}%"

    for r in results:
        table.add_row(
            r["label"],
            pct(r["format_compliance"]),
            pct(r["accuracy"]),
            pct(r["accuracy_math"]),
            pct(r.get("accuracy_lenient")),
            f"{r['mean_completion_tokens']:.0f}",
            f"{r['seconds']:.1f}s",
        )
    from cli.run.tables import fit

    console.print(fit(table, console))
    for pair in paired:
        console.print(
            f"{pair['b']} − {pair['a']}: mean reward {pair['mean_reward_diff']:+.3f} "
            f"[{pair['ci95'][0]:+.3f}, {pair['ci95'][1]:+.3f}] (95 %, paired bootstrap, {n} prompts)"
        )
