"""Prepare a math dataset: prompts + gold answers as parquet in the run directory.

NAME is one of dapo, gsm8k, math, openmath-mini, openr1 (loaded from the Hugging Face hub), or any of
them with --source FILE (.jsonl/.json/.parquet/.csv; the layout is detected from the columns). Keeps
numeric answers (seed 000), cuts prompts longer than the 90th-percentile token length and holds out
--eval-size prompts. Writes <run>/data/train.parquet, eval.parquet and stats.json
(openmath-mini: the SFT warm-up set, sft.parquet and sft_stats.json).

Example: grpo prep gsm8k --model tiny --limit 500
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.common import (
    DEFAULT_RUN,
    ConfigOpt,
    DryRunOpt,
    GrpoError,
    ModelOpt,
    PresetOpt,
    RunOpt,
    console,
    err_console,
    handle_errors,
)

DATA_PANEL = "Data"


@handle_errors
def prep(
    name: Annotated[
        str | None,
        typer.Argument(help="dapo, gsm8k, math, openmath-mini or openr1 (default: the config's "
                       "prep.dataset).", show_default=False, metavar="NAME"),
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option("--source", help="Local .jsonl/.json/.parquet/.csv instead of the hub.",
                     rich_help_panel=DATA_PANEL),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", help="Read only the first N rows.", rich_help_panel=DATA_PANEL),
    ] = None,
    eval_size: Annotated[
        int | None,
        typer.Option("--eval-size", help="Prompts held out for evaluation (config prep.eval_size, 50).",
                     rich_help_panel=DATA_PANEL),
    ] = None,
    quantile: Annotated[
        float | None,
        typer.Option("--quantile", help="Keep prompts up to this token-length quantile "
                     "(config prep.prompt_quantile, 0.9).", rich_help_panel=DATA_PANEL),
    ] = None,
    keep_non_numeric: Annotated[
        bool | None,
        typer.Option("--keep-non-numeric/--numeric-only", help="Keep answers that are not numbers "
                     "(MATH-style: fractions, expressions) (config prep.keep_non_numeric; seed 000 keeps "
                     "numeric ones only).",
                     rich_help_panel=DATA_PANEL, show_default=False),
    ] = None,
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    preset: PresetOpt = None,
    model: ModelOpt = None,
) -> None:
    from cli import data_prep as dp
    from cli.rundir import RunDir, resolve_config

    if name is not None and name not in dp.DATASETS:
        raise GrpoError(f"unknown dataset {name!r}: choose from {dp.dataset_names()} (or add --source FILE)")
    if limit is not None and limit <= 0:
        raise GrpoError("--limit must be a positive number of rows")
    if eval_size is not None and eval_size < 0:
        raise GrpoError("--eval-size must be 0 or more")
    if quantile is not None and not 0 < quantile <= 1:
        raise GrpoError("--quantile must be in (0, 1]")

    rundir = RunDir(run)
    saved = rundir.saved_config() if rundir.path.is_dir() else None
    overrides = {
        "model": model,
        "prep.dataset": name,
        # Absolute: the run remembers it, and later commands may run from another folder.
        "prep.source": str(source.expanduser().absolute()) if source is not None else None,
        "prep.limit": limit,
        "prep.eval_size": eval_size,
        "prep.prompt_quantile": quantile,
        "prep.keep_non_numeric": keep_non_numeric,
    }
    cfg = resolve_config(rundir, preset=preset, config_file=config, overrides=overrides, dry_run=dry_run)
    pc = cfg.prep
    if saved and (saved.get("prep") or {}).get("dataset") != pc.dataset:
        # The run remembers --source/--limit/--keep-non-numeric for the dataset they were given with;
        # a different dataset starts from defaults < preset < --config < flags.
        from cli.config import resolve

        fresh = resolve(preset=preset, config_file=config, overrides=overrides).prep
        for key in ("source", "split", "limit", "keep_non_numeric"):
            setattr(pc, key, getattr(fresh, key))
    if pc.dataset not in dp.DATASETS:
        raise GrpoError(f"unknown dataset {pc.dataset!r} in config prep.dataset: "
                        f"choose from {dp.dataset_names()}")
    if pc.limit is not None and pc.limit <= 0:
        raise GrpoError("prep.limit must be a positive number of rows")
    if pc.eval_size < 0:
        raise GrpoError("prep.eval_size must be 0 or more")
    ds = dp.DATASETS[pc.dataset]

    # ---- load -----------------------------------------------------------------------------------
    if pc.source:
        loaded = dp.read_file(Path(pc.source), pc.limit)
    else:
        try:
            loaded = dp.load_hub(ds, pc.split, pc.limit)
        except dp.HubUnavailable as exc:
            if ds.sample is None:
                raise GrpoError(f"{exc}; pass --source FILE with a local copy of {pc.dataset}") from None
            loaded = dp.load_bundled(ds, pc.limit)
            err_console.print(
                f"note: {exc}; using the bundled sample {loaded.source.split(':', 1)[1]} "
                f"({loaded.rows_read} rows) — pass --source FILE for the full set",
                soft_wrap=True,
            )
    schema = dp.detect_schema(loaded.records, loaded.source)
    parsed = dp.parse_records(loaded.records, schema)
    bad = loaded.bad + parsed.bad

    # ---- filters --------------------------------------------------------------------------------
    import numpy as np

    questions, answers, solutions = parsed.questions, parsed.answers, parsed.solutions
    if pc.keep_non_numeric:
        non_numeric = 0
    else:
        mask = dp.numeric_mask(answers)
        non_numeric = int((~mask).sum())
        idx = np.flatnonzero(mask)
        questions = [questions[i] for i in idx]
        answers = [answers[i] for i in idx]
        solutions = [solutions[i] for i in idx]
    counts = _counts(loaded, bad, parsed.filtered_ability, non_numeric)
    if not questions:
        raise GrpoError(_empty_message(loaded.source, counts, pc.keep_non_numeric))

    from cli.models import load_tokenizer

    if dp.is_hub_model(str(cfg.model)):
        with dp.offline_unless_reachable():
            tokenizer = load_tokenizer(cfg, rundir)
    else:
        tokenizer = load_tokenizer(cfg, rundir)
    spec = cfg.format_spec()
    lengths = dp.prompt_lengths(tokenizer, spec, questions)
    max_len, keep = dp.quantile_cut(lengths, pc.prompt_quantile)
    counts["cut_by_length"] = int((~keep).sum())
    sft_cap = None
    if ds.purpose == "sft":
        # Seed 000 Stage 1: whole conversations up to max_seq_length // 2 tokens.
        sft_cap = cfg.max_seq_length // 2
        conv = np.asarray(dp.conversation_lengths(tokenizer, spec, questions, answers, solutions))
        too_long = keep & (conv > sft_cap)
        counts["cut_too_long_for_sft"] = int(too_long.sum())
        keep = keep & ~too_long
    kept = np.flatnonzero(keep)
    if kept.size == 0:
        raise GrpoError(_empty_message(loaded.source, counts, pc.keep_non_numeric))

    import pandas as pd

    frame = pd.DataFrame({
        "question": [questions[i] for i in kept],
        "answer": [answers[i] for i in kept],
        "solution": pd.Series([solutions[i] for i in kept], dtype=object),
        "prompt_tokens": np.asarray([lengths[i] for i in kept], dtype=np.int64),
    })

    # ---- write ----------------------------------------------------------------------------------
    from cli.rundir import atomic_write_bytes, atomic_write_json, file_sha256

    data_dir = rundir.data_dir
    outputs: dict[str, Any] = {}
    if ds.purpose == "sft":
        counts["kept_sft"] = len(frame)
        parts = {"sft": frame}
        stats_path = data_dir / "sft_stats.json"
        stage_name = "prep-sft"
    else:
        train_idx, eval_idx = dp.eval_split(len(frame), pc.eval_size, pc.seed)
        parts = {
            "eval": frame.iloc[eval_idx].reset_index(drop=True),
            "train": frame.iloc[train_idx].reset_index(drop=True),
        }
        counts["kept_train"] = len(parts["train"])
        counts["kept_eval"] = len(parts["eval"])
        stats_path = data_dir / "stats.json"
        stage_name = "prep"

    stats = {
        "dataset": pc.dataset,
        "purpose": ds.purpose,
        "schema": schema,
        "source": loaded.source,
        "source_sha256": loaded.sha256,
        "source_fingerprint": loaded.fingerprint,
        **counts,
        "bad_reasons": dict(bad.most_common()),
        "max_prompt_length": max_len,
        "prompt_quantile": pc.prompt_quantile,
        "sft_max_tokens": sft_cap,
        "keep_non_numeric": pc.keep_non_numeric,
        "limit": pc.limit,
        "eval_size": pc.eval_size,
        "seed": pc.seed,
        "prompt_tokens_all": dp.percentiles(lengths),
        "prompt_tokens_kept": dp.percentiles(frame["prompt_tokens"].tolist()),
        "tokenizer": getattr(tokenizer, "name_or_path", None),
        "model": cfg.model,
        "format_contract_sha256": spec.contract_hash(),
        "files": {},
    }
    with rundir.stage(stage_name, cfg, dataset=pc.dataset) as info:
        for part, df in parts.items():
            path = data_dir / f"{part}.parquet"
            buf = io.BytesIO()
            df.to_parquet(buf, index=False)
            atomic_write_bytes(path, buf.getvalue())
            outputs[part] = {
                "path": str(path.relative_to(rundir.path)), "rows": len(df), "sha256": file_sha256(path),
            }
        stats["files"] = outputs
        atomic_write_json(stats_path, stats)
        info.update({
            "source": loaded.source,
            "source_sha256": loaded.sha256,
            "files": outputs,
            "max_prompt_length": max_len,
            "stats": str(stats_path.relative_to(rundir.path)),
        })
    rundir.save_config(cfg)
    _summary(stats, rundir, stats_path)


def _counts(loaded: Any, bad: Any, filtered_ability: int, non_numeric: int) -> dict[str, int]:
    return {
        "rows_read": loaded.rows_read,
        "bad_rows": int(sum(bad.values())),
        "filtered_ability": filtered_ability,
        "filtered_non_numeric": non_numeric,
    }


def _empty_message(source: str, counts: dict[str, int], keep_non_numeric: bool) -> str:
    detail = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items() if v)
    hint = "" if keep_non_numeric or not counts.get("filtered_non_numeric") else \
        "; MATH-style answers need --keep-non-numeric"
    return f"no rows left from {source} after filters ({detail}); nothing written{hint}"


def _summary(stats: dict[str, Any], rundir: Any, stats_path: Path) -> None:
    from rich.table import Table

    t = Table(title=f"grpo prep {stats['dataset']} → {rundir.data_dir}", show_header=False,
              title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("source", f"{stats['source']} ({stats['schema']})")
    t.add_row("rows read", str(stats["rows_read"]) + (f" (limit {stats['limit']})" if stats["limit"] else ""))
    reasons = ", ".join(f"{k}: {v}" for k, v in stats["bad_reasons"].items())
    t.add_row("bad rows", f"{stats['bad_rows']}" + (f"  ({reasons})" if reasons else ""))
    if stats["filtered_ability"]:
        t.add_row("not math (ability)", str(stats["filtered_ability"]))
    t.add_row("non-numeric answers", "kept (--keep-non-numeric)" if stats["keep_non_numeric"]
              else f"{stats['filtered_non_numeric']} dropped")
    pct = stats["prompt_tokens_all"]
    t.add_row("prompt tokens",
              f"p50 {pct['p50']:.0f} · p90 {pct['p90']:.0f} · p99 {pct['p99']:.0f} · max {pct['max']}")
    t.add_row("max_prompt_length", f"{stats['max_prompt_length']} (q={stats['prompt_quantile']}); "
              f"{stats['cut_by_length']} longer prompts cut")
    if stats.get("sft_max_tokens"):
        t.add_row("SFT length cap",
                  f"{stats['sft_max_tokens']} tokens; {stats.get('cut_too_long_for_sft', 0)} cut")
    for part, info in stats["files"].items():
        t.add_row(f"{part}", f"{info['rows']} rows → {info['path']}")
    t.add_row("stats", str(stats_path.relative_to(rundir.path)))
    console.print(t)
