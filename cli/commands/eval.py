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

from pathlib import Path
from typing import Annotated

import typer

from cli.common import (
    DEFAULT_RUN,
    ConfigOpt,
    DryRunOpt,
    GrpoError,
    RunOpt,
    err_console,
)
from cli.errors import handle_errors
from cli.rundir import RunDir, dry_run_exit, run_config

DATA_PANEL = "Data"
GEN_PANEL = "Generation"


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
    from cli import eval_report, evaluation, loading
    from cli.evaluation import EvalJob
    from cli.vllm_generate import choose_engine

    rd = RunDir(run)
    if dry_run:
        opts = {"data": data, "source": source, "limit": limit, "models": models}
        dry_run_exit(rd, config, "eval", opts)
    rd.require_exists()
    wanted = [m.strip() for m in models.split(",") if m.strip()]
    bad = [m for m in wanted if m not in evaluation.LABELS]
    if bad or not wanted:
        raise GrpoError(
            f"unknown checkpoint(s) in --models: {', '.join(bad) or '(none)'} (choose base, sft, grpo)"
        )
    cfg = run_config(rd, config)
    rows, data_label = evaluation.load_rows(rd, data, source, limit)
    adapters = rd.adapters()
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
            loading.load_adapter_tensors(adapters[stage])  # corrupt file: one line before any model loads
    rd.ensure()  # fails with one line when the run directory is not writable
    rd.hold("grpo eval")
    job = EvalJob(
        rd=rd,
        cfg=cfg,
        spec=cfg.format_spec(),
        rows=rows,
        checkpoints=checkpoints,
        adapters=adapters,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        engine=choose_engine(engine),
    )
    eval_report.write(job, evaluation.run(job), data_label, skipped)
