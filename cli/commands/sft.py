"""Stage 1: a short LoRA SFT that teaches the output format (seed 000: ~59 examples, 60 steps).

Trains on the run's warm-up set (data/sft.parquet, which `grpo prep dapo` adds) or else on the worked
solutions of the prepped train set, and writes the LoRA adapter + tokenizer to <run>/sft/adapter.

`grpo grpo` then continues that adapter. Example: grpo sft --max-steps 60
"""

from __future__ import annotations

from typing import Any

from cli.common import DEFAULT_RUN, ConfigOpt, DryRunOpt, GrpoError, PresetOpt, RunOpt, err_console
from cli.config.options import config_options
from cli.errors import handle_errors
from cli.run.rundir import RunDir, resolve_config


def check_model_unchanged(run: RunDir, model: str | None) -> None:
    """A run's adapters belong to its model: refuse a different --model once one exists."""
    saved = run.saved_config() if run.path.is_dir() else None
    if not model or not saved or saved.get("model") in (None, model):
        return
    if (run.sft_dir / "adapter").exists() or (run.grpo_dir / "adapter").exists():
        raise GrpoError(
            f"run {run.path} was trained on model {saved['model']!r}; its adapters do not fit {model!r}: "
            "start a new run with --run DIR"
        )


@handle_errors
@config_options("model", "backend", "sft.max_steps", "sft.learning_rate", "sft.num_examples")
def sft(
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    preset: PresetOpt = None,
    dry_run: DryRunOpt = False,
    *,
    overrides: dict[str, Any],
) -> None:
    rd = RunDir(run)
    check_model_unchanged(rd, overrides.get("model"))
    cfg = resolve_config(rd, preset=preset, config_file=config, overrides=overrides, dry_run=dry_run)
    if not (rd.data_dir / "sft.parquet").exists():  # openmath-mini's SFT set, else the train set's solutions
        rd.require(rd.data_dir / "train.parquet", "data", "prepped data")
    from cli.models.resolve import check_model
    from cli.run.preflight import check_run
    from cli.train import distributed
    from cli.train.backends import choose_backend

    rd.hold("grpo sft")  # the cheap checks first: the lock, the run's files, the model path
    check_run(rd, data=("sft.parquet", "train.parquet"), cfg=cfg, consumes=("prep", "prep-sft"))
    check_model(cfg, rd)
    note = distributed.one_gpu_per_process()
    if note:
        err_console.print(f"[yellow]note:[/] {note}")
    chosen = choose_backend(cfg.backend)
    if cfg.tools:
        from cli.train.backends import tool_backend

        chosen = tool_backend(cfg.backend, chosen)
    from cli.run import heartbeat
    from cli.run.console import console
    from cli.train.stages import run_sft

    with rd.stage("sft", cfg, backend=chosen) as info, heartbeat.working("sft: loading", console=console):
        info.update(run_sft(cfg, rd, backend=chosen))
    # Saved once SFT has trained: flags of a failed attempt (a --max-seq-length that did not help) are not
    # remembered by the run (docs/history.md "First runs").
    rd.save_config(cfg)  # remembers the model (and flags) for the next stages
    if info.get("interrupted_at_step") is not None:
        from cli.train.stopping import interrupted_note

        interrupted_note(info, "re-run `grpo sft` to train again")
