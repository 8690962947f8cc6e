"""Keep the GRPO prompts that can teach: an offline pass-rate filter with the SFT adapter.

GRPO learns nothing from a group whose completions all get the same reward, and a small model never
solves most GSM8K prompts. This samples --samples completions per prompt of data/train.parquet from the
base model + the SFT adapter at the run's GRPO sampling settings, scores them as `grpo eval` does, and
keeps the prompts solved by some samples but not all (--keep mixed; --keep solved: at least once).
`grpo grpo` then trains on them. On an H200 (bench/learning-gpu.md@ea4c471, round 3) it kept 893 of 6,681
GSM8K prompts and GRPO gained 2.2 accuracy points over its SFT start.

Writes <run>/data/grpo_prompts.parquet (the kept rows + solved) and data/passrate.json;
data/train.parquet is not modified, and `grpo prep` removes the filter (it is stale then).

  grpo filter                        # after `grpo sft`: 8 samples per prompt, keep 0 < solved < 8
  grpo filter --keep solved --limit 500
  grpo filter --clear                # GRPO trains on every prompt again
"""

from __future__ import annotations

from cli.common import DEFAULT_RUN, ConfigOpt, DryRunOpt, GrpoError, RunOpt, console, err_console
from cli.config.command_options import FilterOptions
from cli.config.options import check_choices, typed_options
from cli.config.schema import Config
from cli.errors import handle_errors
from cli.run.rundir import RunDir, dry_run_exit, run_config


@handle_errors
@typed_options(FilterOptions)
def filter_(
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    *,
    opts: FilterOptions,
) -> None:
    check_choices(opts)  # --adapter, --keep
    adapter, keep = opts.adapter.lower(), opts.keep.lower()
    rd = RunDir(run)
    if dry_run:
        shown = {"samples": opts.samples, "adapter": adapter, "keep": keep, "limit": opts.limit,
                 "max_new_tokens": opts.max_new_tokens, "engine": opts.engine, "batch_size": opts.batch_size,
                 "clear": opts.clear}  # fmt: skip
        dry_run_exit(rd, config, "filter", shown)
    rd.require_exists()
    if opts.clear:
        _clear(rd)
        return
    if keep == "mixed" and opts.samples < 2:
        raise GrpoError(
            f"--keep mixed keeps prompts solved by some samples but not all: it needs --samples 2 or more "
            f"(got {opts.samples}); or use --keep solved"
        )
    cfg = run_config(rd, config)
    if cfg.tools:  # its samples would stop at their first call, unanswered: every prompt would look unsolved
        raise GrpoError(
            f"grpo filter does not run the {', '.join(cfg.tools)} tool: on this tool run it would judge "
            "every prompt unsolved; train on all of train.parquet (`grpo grpo`)"
        )
    _start(rd, cfg, opts, adapter, keep)


def _clear(rd: RunDir) -> None:
    from cli.train import passrate

    rd.ensure()
    rd.hold("grpo filter")
    removed = passrate.clear(rd)
    if removed:
        console.print(f"removed {' and '.join(removed)}: `grpo grpo` trains on every prompt of train.parquet")
    else:
        console.print(f"no filter in {rd.path} (data/grpo_prompts.parquet): nothing to clear")


def _start(rd: RunDir, cfg: Config, opts: FilterOptions, adapter: str, keep: str) -> None:
    """Every check that needs no model, then the filter."""
    from cli.infer.vllm_engine import choose_engine
    from cli.run.preflight import check_run
    from cli.train import passrate

    rd.require(rd.data_dir / "train.parquet", "data", "prepped data")
    adapters = rd.adapters()
    if adapter not in adapters:
        raise GrpoError(f"no {adapter} adapter in {rd.path}: run `grpo {adapter} --run {rd.path}` first")
    rd.ensure()  # fails with one line when the run directory is not writable
    rd.hold("grpo filter")
    check_run(rd, data=("train.parquet",), adapters=[adapters[adapter]])  # one line before any model loads
    engine = choose_engine(opts.engine)
    job = passrate.FilterJob(
        rd=rd,
        cfg=cfg,
        adapter=adapter,
        adapter_path=adapters[adapter],
        samples=opts.samples,
        keep=keep,
        limit=opts.limit,
        max_new_tokens=opts.max_new_tokens,
        engine=engine,
        batch_size=opts.batch_size,
    )
    from cli.run import heartbeat, signals

    err_console.print(f"filter: loading {cfg.model} + the {adapter} adapter…")
    with heartbeat.working(f"filter: loading {cfg.model}"):  # a batch of samples takes minutes on the CPU
        signals.held_import("torch")  # first here, not inside the tokenizer's load
        passrate.run(job)
