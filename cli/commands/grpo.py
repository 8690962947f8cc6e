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
from typing import Annotated

import typer

from cli import distributed, ranks
from cli.commands.sft import check_model_unchanged
from cli.common import (
    DEFAULT_RUN,
    BackendOpt,
    ConfigOpt,
    DryRunOpt,
    GrpoError,
    ModelOpt,
    PresetOpt,
    RunOpt,
    err_console,
)
from cli.distributed import Plan
from cli.errors import handle_errors
from cli.rundir import RunDir, resolve_config

TRAIN = "Training"
SAMPLING = "Sampling"
LOG = "Checkpoints and logging"
SCALE = "Several GPUs"


@handle_errors
def grpo(
    run: RunOpt = DEFAULT_RUN,
    config: ConfigOpt = None,
    preset: PresetOpt = None,
    dry_run: DryRunOpt = False,
    model: ModelOpt = None,
    backend: BackendOpt = None,
    gens: Annotated[
        int | None,
        typer.Option(
            "--gens",
            min=2,
            help="Completions per prompt, the group size G (seed 000: 4).",
            rich_help_panel=SAMPLING,
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size",
            min=1,
            help="Completions per device step; a multiple of --gens (default: --gens, one prompt per step).",
            rich_help_panel=SAMPLING,
        ),
    ] = None,
    max_completion_length: Annotated[
        int | None,
        typer.Option(
            "--max-completion-length",
            min=1,
            help="Completion token cap (default: max_seq_length minus prep's prompt cut).",
            rich_help_panel=SAMPLING,
        ),
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(
            "--temperature", min=0.0, help="Sampling temperature (seed 000: 1.0).", rich_help_panel=SAMPLING
        ),
    ] = None,
    vllm: Annotated[
        str | None,
        typer.Option(
            "--vllm",
            help="Rollouts through vLLM: auto (GPU + vllm installed), on or off.",
            rich_help_panel=SAMPLING,
        ),
    ] = None,
    max_steps: Annotated[
        int | None,
        typer.Option("--max-steps", min=1, help="Optimizer steps (seed 000: 100).", rich_help_panel=TRAIN),
    ] = None,
    lr: Annotated[
        float | None,
        typer.Option("--lr", min=0.0, help="Learning rate (seed 000: 5e-6).", rich_help_panel=TRAIN),
    ] = None,
    beta: Annotated[
        float | None,
        typer.Option(
            "--beta", min=0.0, help="KL coefficient (0: no reference model).", rich_help_panel=TRAIN
        ),
    ] = None,
    loss_type: Annotated[
        str | None,
        typer.Option("--loss-type", help="TRL loss: dapo, grpo, dr_grpo, bnpo, ...", rich_help_panel=TRAIN),
    ] = None,
    scale_rewards: Annotated[
        str | None,
        typer.Option(
            "--scale-rewards", help="Advantage scaling: group, batch or none.", rich_help_panel=TRAIN
        ),
    ] = None,
    rewards: Annotated[
        str | None,
        typer.Option(
            "--rewards",
            help="Comma list of name[=weight]: py_rewards names or dotted paths "
            "(default: the four seed-000 rewards).",
            rich_help_panel=TRAIN,
        ),
    ] = None,
    dora: Annotated[
        bool | None,
        typer.Option(
            "--dora/--no-dora",
            help="DoRA on a fresh adapter (~12x slower per step; vLLM cannot serve it).",
            rich_help_panel=TRAIN,
        ),
    ] = None,
    allow_dora_merge: Annotated[
        bool,
        typer.Option(
            "--allow-dora-merge",
            help="Allow DoRA with vLLM rollouts by merging the adapter into "
            "the weights before each sync (hf backend, TRL colocate).",
            rich_help_panel=TRAIN,
        ),
    ] = False,
    save_steps: Annotated[
        int | None,
        typer.Option(
            "--save-steps", min=0, help="Checkpoint every N steps (0: only at the end).", rich_help_panel=LOG
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue the most recent attempt from its latest checkpoint (a plain `grpo grpo` starts a "
            "new attempt; earlier attempts' checkpoints are kept apart).",
            rich_help_panel=LOG,
        ),
    ] = False,
    report_to: Annotated[
        str | None,
        typer.Option("--report-to", help="tensorboard, wandb, swanlab or none.", rich_help_panel=LOG),
    ] = None,
    gpus: Annotated[
        int,
        typer.Option(
            "--gpus",
            min=1,
            help="Processes on this node, one per GPU: >1 relaunches under `accelerate launch` (hf backend).",
            rich_help_panel=SCALE,
        ),
    ] = 1,
    num_nodes: Annotated[
        int,
        typer.Option(
            "--num-nodes",
            min=1,
            help="Machines taking part (run the command on each).",
            rich_help_panel=SCALE,
        ),
    ] = 1,
    node_rank: Annotated[
        int,
        typer.Option(
            "--node-rank", min=0, help="This machine's index, 0..num-nodes-1.", rich_help_panel=SCALE
        ),
    ] = 0,
    main_address: Annotated[
        str | None,
        typer.Option(
            "--main-address", help="HOST:PORT of node 0 (with --num-nodes > 1).", rich_help_panel=SCALE
        ),
    ] = None,
    deepspeed: Annotated[
        str | None,
        typer.Option(
            "--deepspeed",
            help="Shard with DeepSpeed: zero2 or zero3 (needs deepspeed).",
            rich_help_panel=SCALE,
        ),
    ] = None,
    fsdp: Annotated[
        bool,
        typer.Option(
            "--fsdp", help="Shard with PyTorch FSDP2 instead of plain data parallel.", rich_help_panel=SCALE
        ),
    ] = False,
    cpu: Annotated[
        bool,
        typer.Option(
            "--cpu",
            help="Run the --gpus N processes on the CPU over gloo (tests the path).",
            rich_help_panel=SCALE,
        ),
    ] = False,
    vllm_server: Annotated[
        str | None,
        typer.Option(
            "--vllm-server",
            help="HOST:PORT of a TRL vLLM server (`grpo serve`): rollouts come from it (TRL server mode).",
            rich_help_panel=SCALE,
        ),
    ] = None,
) -> None:
    rd = RunDir(run)
    check_model_unchanged(rd, model)
    cfg = resolve_config(
        rd,
        preset=preset,
        config_file=config,
        overrides={
            "model": model,
            "backend": backend,
            "lora.dora": dora,
            "grpo.gens": gens,
            "grpo.batch_size": batch_size,
            "grpo.max_completion_length": max_completion_length,
            "grpo.temperature": temperature,
            "grpo.vllm": vllm,
            "grpo.max_steps": max_steps,
            "grpo.learning_rate": lr,
            "grpo.beta": beta,
            "grpo.loss_type": loss_type,
            "grpo.scale_rewards": scale_rewards,
            "grpo.rewards": rewards,
            "grpo.save_steps": save_steps,
            "grpo.report_to": report_to,
            "grpo.vllm_server": vllm_server,
        },
        dry_run=dry_run,
    )
    g = cfg.grpo
    plan = Plan(gpus, num_nodes, node_rank, main_address, deepspeed, fsdp, cpu)
    child = ranks.launched()
    if not plan.node_rank:  # one writer per run directory; the other nodes of --num-nodes share node 0's
        rd.hold("grpo grpo")  # before anything is said or written
    if not plan.wanted:
        note = distributed.one_gpu_per_process()  # before anything asks CUDA about its devices
        if note:
            err_console.print(f"[yellow]note:[/] {note}")
    # Cheap checks first: a bad flag fails in a second, before any model is loaded.
    batch = g.batch_size or g.gens
    distributed.check_batch(batch, g.gens, ranks.world_size() if child else plan.world, g.grad_accum)
    if g.scale_rewards not in ("group", "batch", "none"):
        raise GrpoError(f"--scale-rewards must be group, batch or none, not {g.scale_rewards!r}")
    from cli.training import backends
    from cli.training.rewards import resolve_rewards
    from cli.training.stages import ATTEMPT_ENV, attempts, latest_checkpoint, plan_attempt

    reward_list = resolve_rewards(g.rewards, cfg.format_spec())
    adapter = rd.sft_dir / "adapter"
    adapter = adapter if (adapter / "adapter_config.json").exists() else None
    uses_dora = backends.adapter_settings(adapter)["dora"] if adapter else cfg.lora.dora
    url = distributed.server_url(g.vllm_server) if g.vllm_server else None
    attempt, attempt_dir, checkpoint = plan_attempt(rd.grpo_dir / "checkpoints", bool(resume))
    if checkpoint is not None and not child:
        distributed.check_resume(checkpoint, plan)
    if plan.wanted and not child:
        distributed.check_plan(plan)
    if url:
        if not child:  # the parent checked it a moment ago
            distributed.check_vllm_server(url)
        distributed.require_vllm("--vllm-server")
    chosen = backends.choose_backend(cfg.backend)
    if plan.wanted or url:
        chosen = _scale_out_backend(cfg.backend, chosen, plan)
    if uses_dora and (
        g.vllm_server or (g.vllm != "off" and (g.vllm == "on" or backends.decide_vllm("auto")))
    ):
        if not allow_dora_merge:
            raise GrpoError(
                "DoRA adapters cannot be served by vLLM: use --no-dora (on a fresh run), --vllm off "
                "(HF generate, slower) or --allow-dora-merge (merge into the weights before each rollout "
                "sync)"
            )
        if chosen == "unsloth":
            err_console.print(
                "[yellow]note:[/] --allow-dora-merge: using the hf backend (TRL colocate vLLM merges "
                "the adapter before each weight sync); Unsloth's vLLM path serves LoRA only"
            )
            chosen = "hf"
    use_vllm = bool(g.vllm_server) or backends.decide_vllm(g.vllm)
    rd.require(rd.data_dir / "train.parquet", "data", "prepped data")
    if adapter is None and checkpoint is None:
        err_console.print(
            "[yellow]note:[/] no SFT adapter in this run: GRPO starts from the base model "
            "(`grpo sft` first teaches the format, so rewards vary from the first steps)"
        )
    rd.save_config(cfg)
    if not child:
        earlier = {n: f for n, f in attempts(rd.grpo_dir / "checkpoints").items()
                   if n != attempt and latest_checkpoint(f) is not None}
        if checkpoint is not None:
            err_console.print(f"grpo: resuming attempt {attempt} from {checkpoint}", soft_wrap=True)
        elif earlier:
            err_console.print(
                f"[yellow]note:[/] new attempt {attempt} (checkpoints → {attempt_dir}); the checkpoints of "
                f"attempt{'s' if len(earlier) > 1 else ''} {', '.join(map(str, earlier))} "
                "stay where they are "
                "— `grpo grpo --resume` continues the most recent attempt",
                soft_wrap=True,
            )
    if plan.wanted and not child:
        os.environ[ATTEMPT_ENV] = str(attempt)  # the ranks of --gpus N write to the same attempt
        try:
            _relaunch(rd, cfg, plan)
        finally:
            os.environ.pop(ATTEMPT_ENV, None)
        return
    from cli.training.stages import run_grpo

    scale = {"distributed": plan.describe()} if child else {}
    with rd.stage("grpo", cfg, backend=chosen, **scale) as info:
        info.update(
            run_grpo(
                cfg,
                rd,
                backend=chosen,
                rewards=reward_list,
                use_vllm=use_vllm,
                resume=checkpoint,
                adapter=adapter,
                attempt=attempt,
                checkpoints=attempt_dir,
            )
        )


def _scale_out_backend(requested: str, chosen: str, plan: Plan) -> str:
    """Several processes and TRL's vLLM server run under the hf backend (Unsloth trains on one GPU)."""
    what = plan.flag if plan.wanted else "--vllm-server"
    if chosen == "hf":
        return chosen
    if requested == "unsloth":
        raise GrpoError(f"{what}: the unsloth backend trains on one GPU; use --backend hf (accelerate + TRL)")
    if not ranks.launched():
        err_console.print(
            f"[yellow]note:[/] {what}: using the hf backend (accelerate + TRL; Unsloth trains on one GPU)"
        )
    return "hf"


def _relaunch(rd: RunDir, cfg: object, plan: Plan) -> None:
    """Start this same command under `accelerate launch` with a generated config; exit with its code."""
    dtype = str(getattr(cfg, "dtype", "auto"))
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
    if code == distributed.INTERRUPTED:  # rank 0 said where the checkpoint is
        raise typer.Exit(code)
    if code != 0:
        raise GrpoError(
            f"the {plan.world}-process run stopped with exit code {code} (the ranks' messages are above)",
            code=code if 0 < code < 256 else 1,
        )
