"""Stage 2: GRPO with the Rust reward core (seed 000: G=4, lr 5e-6, temperature 1.0, min_p 0.1).

Continues the run's SFT adapter when there is one (run `grpo sft` first).

Scores --gens completions per prompt with grpo.rewards (py_rewards names or dotted paths, with weights).

Writes <run>/grpo/adapter, train.png, and checkpoints under <run>/grpo/checkpoints/attempt-N (each run
without --resume is a new attempt); Ctrl-C saves one, --resume continues the most recent attempt.

Several GPUs: --gpus N (and --num-nodes, --deepspeed zero2|zero3, --fsdp) relaunches this command
under `accelerate launch` with a config written to <run>/grpo/accelerate.yaml (hf backend); rollouts
can come from TRL's vLLM server (--vllm-server HOST:PORT, started with `grpo serve`).

Example: grpo grpo --gens 4 --max-steps 100
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from cli.commands.sft import check_model_unchanged
from cli.common import DEFAULT_RUN, ConfigOpt, DryRunOpt, GrpoError, PresetOpt, RunOpt, err_console
from cli.config.options import config_options, typed_options
from cli.config.schema import LOG, TRAIN, Config
from cli.errors import handle_errors
from cli.run import ranks
from cli.run.rundir import RunDir, resolve_config
from cli.train import distributed
from cli.train.distributed import Plan

# The config keys `grpo grpo` takes as flags (flag, help, bounds, panel: declared in cli/config/schema.py).
FLAGS = (
    "model", "backend", "lora.dora", "grpo.gens", "grpo.batch_size", "grpo.max_completion_length",
    "grpo.temperature", "grpo.vllm", "grpo.max_steps", "grpo.learning_rate", "grpo.beta", "grpo.loss_type",
    "grpo.scale_rewards", "grpo.rewards", "grpo.save_steps", "grpo.report_to", "grpo.vllm_server",
    "grpo.control",
)  # fmt: skip


@handle_errors
@config_options(*FLAGS)
@typed_options(Plan)  # the launcher flags (cli/config/command_options.py: LaunchOptions)
def grpo(
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    preset: PresetOpt = None,
    dry_run: DryRunOpt = False,
    allow_dora_merge: Annotated[
        bool,
        typer.Option(
            "--allow-dora-merge",
            help="Allow DoRA with vLLM rollouts by merging the adapter into "
            "the weights before each sync (hf backend, TRL colocate).",
            rich_help_panel=TRAIN,
        ),
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue the most recent attempt from its latest checkpoint (a plain `grpo grpo` starts a "
            "new attempt; earlier attempts' checkpoints are kept apart).",
            rich_help_panel=LOG,
        ),
    ] = False,
    *,
    opts: Plan,
    overrides: dict[str, Any],
) -> None:
    from cli.train import plan as grpo_plan

    rd = RunDir(run)
    check_model_unchanged(rd, overrides.get("model"))
    cfg = resolve_config(rd, preset=preset, config_file=config, overrides=overrides)
    launch = opts
    control = _control(rd, cfg)
    if dry_run:
        _dry_run(rd, cfg, launch, resume=resume, allow_dora_merge=allow_dora_merge, control=control)
    child = ranks.launched()
    if not launch.node_rank:  # one writer per run directory; the other nodes of --num-nodes share node 0's
        rd.hold("grpo grpo")  # before anything is said or written
    if not launch.wanted:
        note = distributed.one_gpu_per_process()  # before anything asks CUDA about its devices
        if note:
            err_console.print(f"[yellow]note:[/] {note}")
    plan = grpo_plan.make_plan(
        rd, cfg, launch, resume=resume, allow_dora_merge=allow_dora_merge, control=control
    )
    with grpo_plan.undone_unless_saved(rd, plan, enabled=not child):
        if not child:
            grpo_plan.announce_attempt(rd, plan)
        if launch.wanted and not child:
            _relaunch(rd, cfg, launch, plan.attempt)
        else:
            _train(rd, cfg, plan, {"distributed": launch.describe()} if child else {})


def _control(rd: RunDir, cfg: Config) -> str | None:
    """``--control KIND`` (grpo.control): a placebo matched to the run's settings (cli/train/control.py)."""
    from cli.train import control

    kind = control.check_kind(cfg.grpo.control)
    if kind:
        control.check_matched(rd, cfg)
    return kind


def _dry_run(
    rd: RunDir, cfg: Config, launch: Plan, *, resume: bool, allow_dora_merge: bool, control: str | None
) -> None:
    """`--dry-run`: the resolved config, then the plan the stage would carry out (or why there is none)."""
    import yaml

    from cli.config.schema import to_yaml
    from cli.run import quiet
    from cli.train.plan import make_plan

    try:
        plan: Any = make_plan(
            rd, cfg, launch, resume=resume, allow_dora_merge=allow_dora_merge, control=control
        ).describe()
    except GrpoError as exc:
        plan = f"none yet: {exc}"
    typer.echo(to_yaml(cfg) + yaml.safe_dump({"plan": plan}, sort_keys=False, allow_unicode=True), nl=False,
               file=quiet.stdout())  # fmt: skip
    raise typer.Exit(0)


def _train(rd: RunDir, cfg: Config, plan: Any, scale: dict[str, Any]) -> None:
    """The GRPO stage in this process, recorded in the manifest (also when Ctrl-C stopped it)."""
    from cli.run import heartbeat
    from cli.run.console import console
    from cli.train.stages import run_grpo
    from cli.train.stopping import interrupted_note

    with (
        rd.stage("grpo_control" if plan.control else "grpo", cfg, backend=plan.backend, **scale) as info,
        heartbeat.working("grpo: loading", console=console),
    ):
        info.update(run_grpo(plan))
    # Saved once the stage has trained (or was stopped on purpose and saved): the flags of a run that
    # failed are not remembered, as `grpo sft` does. A control runs on the saved settings: nothing to save.
    if not plan.control:
        rd.save_config(cfg)
    if info.get("interrupted_at_step") is not None:
        again = f" --control {plan.control}" if plan.control else ""
        interrupted_note(info, f"continue with `grpo grpo --resume{again} --run {rd.path}`")


def _relaunch(rd: RunDir, cfg: Config, plan: Plan, attempt: int) -> None:
    """Start this same command under `accelerate launch` with a generated config; exit with its code."""
    from cli.train.checkpoints import ATTEMPT_ENV

    os.environ[ATTEMPT_ENV] = str(attempt)  # the ranks of --gpus N write to the same attempt
    try:
        _launch(rd, cfg, plan)
    finally:
        os.environ.pop(ATTEMPT_ENV, None)


def _launch(rd: RunDir, cfg: Config, plan: Plan) -> None:
    dtype = str(cfg.dtype)
    precision = "fp16" if dtype in ("float16", "fp16") else "no" if dtype in ("float32", "fp32") else "bf16"
    # Several nodes may share the run directory (NFS): each node launches from its own file.
    name = f"accelerate.node{plan.node_rank}.yaml" if plan.num_nodes > 1 else "accelerate.yaml"
    path = distributed.write_config(rd.grpo_dir / name, plan, precision)
    argv = distributed.command_argv()
    err_console.print(
        f"grpo: {plan.world} processes ({plan.mode}, {plan.num_nodes} node(s)) via accelerate launch "
        f"--config_file {path}",
        soft_wrap=True,
    )
    code = distributed.launch(path, plan, argv)
    if code in (0, *distributed.STOPPED) and not cfg.grpo.control:
        rd.save_config(cfg)  # the ranks trained (or saved where a signal stopped them)
    if code in distributed.STOPPED:  # rank 0 said where the checkpoint is
        raise typer.Exit(code)
    if code != 0:
        raise GrpoError(
            f"the {plan.world}-process run stopped with exit code {code} (the ranks' messages are above)",
            code=code if 0 < code < 256 else 1,
        )
