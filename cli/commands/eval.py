"""Score the base model and each trained checkpoint on held-out problems (format %, accuracy, length).

Greedy, batched decoding of the same prompts through the base model, the SFT adapter and the GRPO
adapter (each one present), the columns of seed 000's results table:

- [bold]format compliance[/]: share of completions where match_format_exactly > 0 (seed 000's FORMAT regex:
  reasoning-end tag, then the answer between the solution tags, then only whitespace);
- [bold]accuracy, seed rule[/]: share whose extracted answer equals the gold one exactly or after strip()
  (check_answer_accuracy's two top tiers), or numerically (thousands separators allowed: "1,000" = "1000.0");
- [bold]accuracy, math_equal[/]: share whose answer (solution tags, else the last \\boxed{}) equals the gold
  one under py_rewards.math_equal, which reads MATH-style LaTeX (\\frac{1}{2} = 0.5, 2\\sqrt3 = \\sqrt{12},
  90^\\circ = 90, intervals, sets, ...) like Math-Verify; on GSM8K/DAPO integers the two agree;
- [bold]mean length[/]: completion tokens up to EOS.

Writes <run>/eval/report.json, report.md, eval.png and samples.jsonl.

  grpo eval                       # the run's held-out split (data/eval.parquet)
  grpo eval --data gsm8k --limit 50
  grpo eval --source my_test.jsonl
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.common import (
    DEFAULT_RUN,
    ConfigOpt,
    DryRunOpt,
    GrpoError,
    RunOpt,
    console,
    err_console,
)
from cli.errors import handle_errors
from cli.rundir import RunDir, atomic_dir, dry_run_exit

DATA_PANEL = "Data"
GEN_PANEL = "Generation"

ACCURACY_DEFINITION = (
    "correct (seed rule) = check_answer_accuracy reached its exact (5.0) or strip (3.5) tier, or the "
    "extracted solution equals the gold answer as a number (thousands separators allowed); "
    "correct (math_equal) = the answer between the solution tags, else the last \\boxed{}, equals the gold "
    "answer under py_rewards.math_equal (MATH-style LaTeX judged like Math-Verify, issue #13); "
    "format compliance = match_format_exactly > 0; "
    "reward = match_format_exactly + check_answer_accuracy (seed 000's scores); intervals are 95 % "
    "(Wilson for rates, normal for the mean reward, paired bootstrap over prompts for differences)"
)

BUNDLED = {"gsm8k": "gsm8k_test.jsonl", "math": "math500.jsonl", "math500": "math500.jsonl"}


# ---- data --------------------------------------------------------------------------------------
def _with_prep(name: str | None, source: Path | None, limit: int | None) -> tuple[list[dict[str, str]], str]:
    """Rows through prep's loader and schema detection (cli/data_prep.py).

    A hub name loads its *test* split; offline, the bundled test sample stands in.
    """
    from cli import data_prep as dp

    if source is not None:
        loaded = dp.read_file(source)
        label = str(source)
    else:
        assert name is not None
        ds = dp.DATASETS.get(name)
        if ds is None:
            raise GrpoError(f"unknown --data {name!r}: choose gsm8k or math, or pass --source FILE")
        try:
            loaded = dp.load_hub(ds, split="test")
            label = loaded.source
        except GrpoError:  # hub unreachable, not cached, or no `datasets` package
            if name not in BUNDLED:
                raise
            from cli.models import SAMPLES

            loaded = dp.read_file(SAMPLES / BUNDLED[name])
            label = f"{name} (bundled test sample {BUNDLED[name]}; hub not available)"
    schema = dp.detect_schema(loaded.records, label)
    parsed = dp.parse_records(loaded.records, schema)
    rows = [{"question": q, "answer": a} for q, a in zip(parsed.questions, parsed.answers, strict=False)]
    if not rows:
        raise GrpoError(f"{label} has no usable rows (need a question/problem and an answer)")
    return (rows[:limit] if limit is not None else rows), label


def load_rows(
    run: RunDir, data: str | None, source: Path | None, limit: int | None
) -> tuple[list[dict[str, str]], str]:
    """The eval rows and a label saying where they came from."""
    from cli.inference import eval_rows

    if source is not None or data is not None:
        return _with_prep(data.lower() if data else None, source, limit)
    rows = eval_rows(run, limit)
    if not rows:
        raise GrpoError(
            f"no held-out split in {run.path} (data/eval.parquet): "
            f"run `grpo prep NAME --run {run.path}` first, "
            "or pass --data gsm8k|math or --source FILE"
        )
    return rows, "data/eval.parquet"


# ---- report ------------------------------------------------------------------------------------
def markdown_table(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        f"# grpo eval — {meta['data']} ({meta['n']} problems, greedy, "
        f"max {meta['max_new_tokens']} new tokens)",
        "",
        "| Model Checkpoint | Format Compliance (%) | Accuracy, seed rule (%) | Accuracy, math_equal (%) "
        "| Mean reward "
        "| Avg Completion Length (Tokens) |",
        "|---|---:|---:|---:|---:|---:|",
    ]

    def pct(r: dict[str, Any], key: str) -> str:
        lo, hi = r.get(f"{key}_ci95") or (None, None)
        band = f" [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None else ""
        return f"{100 * r[key]:.1f}%{band}"

    for r in results:
        lo, hi = r.get("mean_reward_ci95") or (None, None)
        reward = f"{r.get('mean_reward', float('nan')):.3f}" + (
            f" [{lo:.3f}, {hi:.3f}]" if lo is not None else ""
        )
        lines.append(
            f"| {r['label']} | {pct(r, 'format_compliance')} | {pct(r, 'accuracy')} | "
            f"{100 * r['accuracy_math']:.1f}% | {reward} | {r['mean_completion_tokens']:.0f} |"
        )
    for pair in meta.get("paired") or []:
        lines.append(
            f"\n{pair['b']} − {pair['a']}: mean reward {pair['mean_reward_diff']:+.3f} "
            f"[{pair['ci95'][0]:+.3f}, {pair['ci95'][1]:+.3f}] (paired bootstrap over prompts)"
        )
    lines += ["", f"Definitions: {ACCURACY_DEFINITION}.", f"Rewards scored by `{meta['rewards']}`.", ""]
    return "\n".join(lines)


def plot_png(results: list[dict[str, Any]], title: str) -> bytes | None:
    """Bar charts of format %, accuracy % and mean length; None when matplotlib is not installed.

    Every bar carries its value, so a zero is a visible "0%" rather than a missing bar, and the long
    labels ("After SFT (format warm-up)") are wrapped so they do not run into each other (issue #15).
    """
    from cli.plots import to_png

    fig = eval_figure(results, title)
    return to_png(fig) if fig is not None else None


def eval_figure(results: list[dict[str, Any]], title: str) -> Any:
    """The matplotlib figure behind eval.png (None without matplotlib)."""
    from cli.plots import pyplot, wrap_label

    plt = pyplot()
    if plt is None:
        return None
    labels = [wrap_label(r["label"]) for r in results]
    x = list(range(len(labels)))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
    width = 0.38
    fmt = [100 * r["format_compliance"] for r in results]
    acc = [100 * r["accuracy"] for r in results]
    b1 = ax1.bar([i - width / 2 for i in x], fmt, width, label="format %")
    b2 = ax1.bar([i + width / 2 for i in x], acc, width, label="accuracy %")
    for bars in (b1, b2):
        ax1.bar_label(bars, labels=[f"{v:.0f}%" for v in bars.datavalues], fontsize=8, padding=2)
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


LABELS = {"base": "Base (pretrained)", "sft": "After SFT (format warm-up)", "grpo": "After GRPO"}


def intervals(format_ok: list[bool], correct: list[bool], rewards: list[float]) -> dict[str, Any]:
    """95 % intervals: Wilson for the two rates, normal for the mean reward (format + answer rewards)."""
    from cli.stats import mean_ci, wilson

    n = len(rewards)
    mean, lo, hi = mean_ci(rewards)
    return {
        "format_compliance_ci95": [round(x, 4) for x in wilson(sum(format_ok), n)],
        "accuracy_ci95": [round(x, 4) for x in wilson(sum(correct), n)],
        "mean_reward": round(mean, 4),
        "mean_reward_ci95": [round(lo, 4), round(hi, 4)],
    }


def paired_differences(per_prompt: dict[str, list[float]]) -> list[dict[str, Any]]:
    """Later checkpoint minus earlier, on the same prompts (sft − base, grpo − sft)."""
    from cli.stats import paired_bootstrap

    out = []
    for a, b in (("base", "sft"), ("sft", "grpo")):
        if a in per_prompt and b in per_prompt:
            diff, lo, hi = paired_bootstrap(per_prompt[a], per_prompt[b])
            out.append(
                {"a": a, "b": b, "mean_reward_diff": round(diff, 4), "ci95": [round(lo, 4), round(hi, 4)]}
            )
    return out


@handle_errors
def eval_(
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    data: Annotated[
        str | None,
        typer.Option(
            "--data",
            help="gsm8k or math (prep's loader or the bundled samples) instead of the run's eval split.",
            rich_help_panel=DATA_PANEL,
        ),
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option(
            "--source",
            help="Local .jsonl/.json/.parquet/.csv with question (or problem) and answer columns.",
            rich_help_panel=DATA_PANEL,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="Score at most N problems (default: all of them).",
            rich_help_panel=DATA_PANEL,
        ),
    ] = None,
    models: Annotated[
        str,
        typer.Option(
            "--models",
            help="Comma list of checkpoints to score among base, sft, grpo (those present).",
            rich_help_panel=GEN_PANEL,
        ),
    ] = "base,sft,grpo",
    max_new_tokens: Annotated[
        int,
        typer.Option(
            "--max-new-tokens", min=1, help="Completion budget per problem.", rich_help_panel=GEN_PANEL
        ),
    ] = 512,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Prompts decoded together.", rich_help_panel=GEN_PANEL)
    ] = 8,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="auto (vLLM when installed and a GPU is visible: all prompts at once), hf or vllm.",
            rich_help_panel=GEN_PANEL,
        ),
    ] = "auto",
) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from cli import inference as inf
    from cli.models import resolve_model
    from cli.vllm_generate import choose_engine, generate_all

    rd = RunDir(run)
    if dry_run:
        opts = {"data": data, "source": source, "limit": limit, "models": models}
        dry_run_exit(rd, config, "eval", opts)
    inf.require_run(rd)
    wanted = [m.strip() for m in models.split(",") if m.strip()]
    bad = [m for m in wanted if m not in LABELS]
    if bad or not wanted:
        raise GrpoError(
            f"unknown checkpoint(s) in --models: {', '.join(bad) or '(none)'} (choose base, sft, grpo)"
        )
    cfg = inf.run_config(rd, config)
    spec = cfg.format_spec()
    rows, data_label = load_rows(rd, data, source, limit)
    adapters = inf.available_adapters(rd)
    checkpoints = [m for m in wanted if m == "base" or m in adapters]
    skipped = [m for m in wanted if m not in checkpoints]
    if not checkpoints:
        # Issue #12: `--models sft` on a run without an SFT adapter once failed with UnboundLocalError
        # after loading the base model; now it says what to run, before any model loads.
        raise GrpoError(
            f"nothing to score: no {' or '.join(skipped)} adapter in {rd.path}: "
            f"run `grpo {skipped[0]} --run {rd.path}` first, or add base to --models"
        )
    for m in skipped:
        err_console.print(f"[yellow]note:[/] no {m} adapter in {rd.path}; skipping it")
    for stage in checkpoints:
        if stage != "base":
            inf.load_adapter_tensors(adapters[stage])  # corrupt file: one line before any model loads
    rd.ensure()  # fails with one line when the run directory is not writable
    rd.hold("grpo eval")
    engine = choose_engine(engine)

    base_path = resolve_model(cfg, rd)
    tokenizer = inf.load_tokenizer(base_path, spec)
    prompts = [inf.prompt_text(tokenizer, spec, r["question"]) for r in rows]
    answers = [r["answer"] for r in rows]
    engine_info: dict[str, Any] = {"engine": "hf", "batch_size": batch_size}
    pregenerated: dict[str, list[Any]] = {}
    if engine == "vllm":
        t_gen = time.time()
        pregenerated, engine_info = generate_all(
            str(base_path),
            tokenizer,
            prompts,
            checkpoints,
            adapters,
            max_new_tokens=max_new_tokens,
            progress=lambda stage, n: err_console.print(f"{stage:>4}: {n} completions (vLLM)"),
        )
        engine_info["generation_seconds"] = round(time.time() - t_gen, 2)
    base = inf.load_hf(base_path) if engine == "hf" else None

    peft_model = None
    rewards_source = ""
    per_prompt: dict[str, list[float]] = {}
    results: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=False,
    ) as progress:
        for stage in checkpoints:
            task = progress.add_task(f"{stage:>4}", total=len(prompts))
            start = time.time()
            if stage in pregenerated:
                model, ctx = None, None
            elif stage == "base":
                model, ctx = base, None
                if peft_model is not None:
                    ctx = peft_model.disable_adapter()
            else:
                if peft_model is None:
                    peft_model = inf.attach_adapter(base, adapters[stage])
                    current = "default"
                else:
                    inf.load_adapter_tensors(adapters[stage])
                    peft_model.load_adapter(str(adapters[stage]), adapter_name=stage)
                    current = stage
                peft_model.set_adapter(current)
                model, ctx = peft_model, None
            if stage in pregenerated:
                gens = pregenerated[stage]
                progress.advance(task, len(gens))
            elif ctx is not None:
                with ctx:
                    gens = inf.hf_generate(
                        model,
                        tokenizer,
                        prompts,
                        max_new_tokens=max_new_tokens,
                        batch_size=batch_size,
                        progress=lambda n, t=task: progress.advance(t, n),
                    )
            else:
                gens = inf.hf_generate(
                    model,
                    tokenizer,
                    prompts,
                    max_new_tokens=max_new_tokens,
                    batch_size=batch_size,
                    progress=lambda n, t=task: progress.advance(t, n),
                )
            seconds = engine_info.get("stage_seconds", {}).get(stage, time.time() - start)
            completions = [g.text for g in gens]
            sc = inf.score(spec, completions, answers, prompts=[spec.messages(r["question"]) for r in rows])
            lengths = [len(g.tokens) for g in gens]
            rewards = [f + a for f, a in zip(sc.format, sc.accuracy, strict=True)]
            per_prompt[stage] = rewards
            results.append(
                {
                    "checkpoint": stage,
                    "label": LABELS[stage],
                    "adapter": str(adapters[stage]) if stage in adapters else None,
                    "n": len(rows),
                    "format_compliance": sum(sc.format_ok) / len(rows),
                    "accuracy": sum(sc.correct) / len(rows),
                    "accuracy_math": sum(sc.math_correct) / len(rows),
                    "mean_completion_tokens": sum(lengths) / len(lengths),
                    "hit_max_new_tokens": sum(1 for n in lengths if n >= max_new_tokens) / len(lengths),
                    "mean_match_format_exactly": sc.mean("format"),
                    "mean_check_answer_accuracy": sc.mean("accuracy"),
                    **intervals(sc.format_ok, sc.correct, rewards),
                    "seconds": round(seconds, 2),
                }
            )
            for r, g, f, c, m, rw in zip(
                rows, gens, sc.format_ok, sc.correct, sc.math_correct, rewards, strict=False
            ):
                samples.append(
                    {
                        "checkpoint": stage,
                        "question": r["question"],
                        "answer": r["answer"],
                        "completion": g.text,
                        "tokens": len(g.tokens),
                        "format_ok": f,
                        "correct": c,
                        "correct_math": m,
                        "reward": rw,
                    }
                )
            rewards_source = sc.source

    meta = {
        "data": data_label,
        "n": len(rows),
        "max_new_tokens": max_new_tokens,
        "decoding": "greedy",
        "model": str(cfg.model),
        "format": spec.name,
        "contract_sha256": spec.contract_hash(),
        "rewards": rewards_source,
        "definitions": ACCURACY_DEFINITION,
        "skipped": skipped,
        **engine_info,
    }
    report = {**meta, "results": results, "paired": paired_differences(per_prompt)}
    png = plot_png(results, f"grpo eval — {data_label}, n={len(rows)}, greedy")
    with atomic_dir(rd.eval_dir) as tmp:
        (tmp / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        (tmp / "report.md").write_text(
            markdown_table(results, {**meta, "paired": report["paired"]}), encoding="utf-8"
        )
        if png is not None:
            (tmp / "eval.png").write_bytes(png)
        with open(tmp / "samples.jsonl", "w", encoding="utf-8") as fh:
            for s in samples:
                fh.write(json.dumps(s, ensure_ascii=False) + "\n")
    rd.record_stage(
        "eval",
        {
            "data": data_label,
            "n": len(rows),
            "results": {
                r["checkpoint"]: {
                    k: r[k]
                    for k in ("format_compliance", "accuracy", "accuracy_math", "mean_completion_tokens")
                }
                for r in results
            },
        },
    )

    table = Table(title=f"grpo eval — {data_label} ({len(rows)} problems, greedy)")
    table.add_column("Model Checkpoint")
    table.add_column("Format Compliance (%)", justify="right")
    table.add_column("Accuracy, seed rule (%)", justify="right")
    table.add_column("Accuracy, math_equal (%)", justify="right")
    table.add_column("Avg Completion Length (Tokens)", justify="right")
    table.add_column("time", justify="right")
    for r in results:
        table.add_row(
            r["label"],
            f"{100 * r['format_compliance']:.1f}%",
            f"{100 * r['accuracy']:.1f}%",
            f"{100 * r['accuracy_math']:.1f}%",
            f"{r['mean_completion_tokens']:.0f}",
            f"{r['seconds']:.1f}s",
        )
    console.print(table)
    for pair in report["paired"]:
        console.print(
            f"{pair['b']} − {pair['a']}: mean reward {pair['mean_reward_diff']:+.3f} "
            f"[{pair['ci95'][0]:+.3f}, {pair['ci95'][1]:+.3f}] (95 %, paired bootstrap, {len(rows)} prompts)"
        )
    written = ["report.json", "report.md", "samples.jsonl"] + (["eval.png"] if png is not None else [])
    console.print(f"report: {rd.eval_dir} ({', '.join(written)})")
    if png is None:
        err_console.print(
            "[yellow]note:[/] eval.png skipped: matplotlib is not installed (pip install 'grpo\\[train]')"
        )
