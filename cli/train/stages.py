"""The two training stages: `grpo sft` (format warm-up) and `grpo grpo` (GRPO), under either backend.

Seed 000 is the reference: SFT lr 2e-4, batch 2 x grad-accum 4, warmup 5, packing, 8-bit AdamW;
GRPO lr 5e-6, warmup_ratio 0.1, linear schedule, weight decay 0.001, temperature 1.0, min_p 0.1.
Both stages train a LoRA; GRPO continues the run's SFT adapter when there is one.

Long because: both stages build their trainer arguments from :func:`_common_args` and the vLLM choices
kept here, and ``run_grpo``'s named steps follow it (the GRPOConfig arguments, the announcement, the
trainer's instruments, the train/resume call, the summary).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError
from cli.infer.vllm_memory import VllmPlan, model_shape, plan_vllm
from cli.run.console import console, err_console
from cli.run.ranks import world_size
from cli.run.rundir import RunDir
from cli.train import backends
from cli.train.checkpoints import atomic_checkpoints, next_attempt_from_metrics
from cli.train.gpu_memory import DevicePeak, PhaseMemory
from cli.train.live import Interrupt, make_callback, quiet_trainer
from cli.train.reporters import reporter_env
from cli.train.rewards import RewardTracker, wrap_rewards
from cli.train.stopping import stop_fields, train_until_stopped

if TYPE_CHECKING:
    from cli.config.schema import Config
    from cli.train.grpo_setup import GrpoSetup


def _common_args(
    cfg: Config, section: Any, model: Any, output_dir: Path, max_steps: int, backend: str
) -> dict[str, Any]:
    save_steps = int(getattr(section, "save_steps", 0) or 0)
    return {
        "output_dir": str(output_dir),
        "learning_rate": section.learning_rate,
        "weight_decay": section.weight_decay,
        "optim": backends.optimizer_name(section.optim),
        # Short smoke runs still log: never log less often than once per run.
        "logging_steps": max(1, min(section.logging_steps, max_steps))
        if max_steps > 0
        else section.logging_steps,
        "save_strategy": "steps" if save_steps > 0 else "no",
        "save_steps": save_steps if save_steps > 0 else 500,
        "seed": cfg.seed,
        "disable_tqdm": True,
        # Without a GPU say so: under `--gpus N --cpu` this makes the ranks gloo CPU processes.
        **({} if backends.cuda_available() else {"use_cpu": True}),
        # LoRA leaves the base weights frozen: DDP must not wait for their (absent) gradients.
        **({"ddp_find_unused_parameters": False} if world_size() > 1 else {}),
        **backends.precision_args(model),
        **backends.checkpointing_args(backend, cfg),
    }


def eager_on_cpu_for_tiny(cfg: Config) -> None:
    """The tiny smoke model on the CPU runs eagerly: Unsloth's torch.compile of it cost 38.7 s on the first
    GRPO step of a fresh machine (cold inductor cache; then 4.3 s, 0.18 s) against 0.19 s/step eager,
    same losses (measured here 2026-11-30, G=4 × 64 tokens) — it made the demo's GRPO stage 100 s instead
    of a few. Real models keep Unsloth's default; ``UNSLOTH_COMPILE_DISABLE`` set by the user wins."""
    if str(cfg.model) == "tiny" and not backends.cuda_available():
        os.environ.setdefault("UNSLOTH_COMPILE_DISABLE", "1")


# ---- stage 1 ------------------------------------------------------------------------------------
def run_sft(cfg: Config, run: RunDir, *, backend: str) -> dict[str, Any]:
    attempt = next_attempt_from_metrics(run, "sft")
    console.print(f"[dim]sft: loading {backend}, {cfg.model} and the warm-up examples…[/]")
    eager_on_cpu_for_tiny(cfg)
    backends.import_backend(backend)  # before TRL/transformers
    backends.patch_trl_for_cpu(backend)
    from trl import SFTConfig, SFTTrainer

    from cli.train.data import sft_dataset

    t_load = time.perf_counter()
    model, tokenizer = backends.load_for_training(cfg, run, backend=backend)
    dataset, data_info = sft_dataset(cfg, run, tokenizer)
    load_s = time.perf_counter() - t_load
    s = cfg.sft
    steps = int(s.max_steps or 0)
    if steps <= 0 and not s.epochs:
        raise GrpoError("sft.max_steps is 0 and sft.epochs is unset: nothing to train")
    console.print(
        f"sft: {data_info['examples']} format examples from {data_info['source']} │ backend {backend} │ "
        f"{'max_steps ' + str(steps) if steps > 0 else str(s.epochs) + ' epochs'} │ lr {s.learning_rate:g} │ "
        f"batch {s.batch_size}x{s.grad_accum}"
    )
    if cfg.lora.dora:
        err_console.print(f"[yellow]note:[/] {backends.DORA_COST}")
    packing = _packing(s.packing, model, backend)
    args = SFTConfig(
        **_common_args(cfg, s, model, run.sft_dir / "checkpoints", steps, backend),
        per_device_train_batch_size=s.batch_size,
        gradient_accumulation_steps=s.grad_accum,
        warmup_steps=s.warmup_steps,
        max_steps=steps if steps > 0 else -1,
        num_train_epochs=float(s.epochs or 1),
        lr_scheduler_type="linear",
        dataset_text_field="text",
        max_length=cfg.max_seq_length,
        packing=packing,
        report_to="none",
    )
    trainer = SFTTrainer(model=model, processing_class=tokenizer, train_dataset=dataset, args=args)
    quiet_trainer(trainer)
    atomic_checkpoints(trainer)
    interrupt = Interrupt()
    live = make_callback(
        run, "sft", max_steps=steps if steps > 0 else 0, interrupt=interrupt, attempt=attempt
    )
    trainer.add_callback(live)
    t0 = time.perf_counter()
    stopped = train_until_stopped(trainer, resume=None, interrupt=interrupt, stage="sft")
    train_s = time.perf_counter() - t0
    dest = backends.save_trained_adapter(trainer, model, tokenizer, run.sft_dir / "adapter")
    n = int(trainer.state.global_step)
    summary: dict[str, Any] = {
        "backend": backend,
        "attempt": attempt,
        "steps": n,
        "train_seconds": round(train_s, 2),
        "load_seconds": round(load_s, 2),
        # As grpo's: the first step apart (it carries warm-up), the others' mean; the stage's wall time is
        # train_seconds (it also holds the trainer's setup and the final save).
        "first_step_seconds": round(live.step_times[0], 3) if live.step_times else None,
        "seconds_per_step": round(live.typical_step(), 3) if live.step_times else None,
        "final_loss": _last(trainer, "loss")
        if _last(trainer, "loss") is not None
        else _last(trainer, "train_loss"),
        "adapter": str(dest),
        "data": data_info,
        **stop_fields(stopped, run.sft_dir / "checkpoints"),
    }
    run.log_metrics({"stage": "sft_summary", "time": round(time.time(), 3), **summary})
    if stopped is None:
        console.print(
            f"sft done: {_steps(n)} in {train_s:.1f} s ({summary['seconds_per_step']} s/step, first "
            f"{summary['first_step_seconds']} s), loss {summary['final_loss']} → adapter {dest}"
        )
    return summary


def _packing(packing: bool, model: Any, backend: str) -> bool:
    """SFT packs examples when asked, unless the hf backend's attention cannot keep them apart."""
    attn = str(getattr(getattr(model, "config", None), "_attn_implementation", "") or "")
    if packing and backend == "hf" and not attn.startswith("flash"):
        # Without FlashAttention packed examples would attend to each other (and on the CPU the full
        # 2048x2048 masks make every step slow): Unsloth turns packing off in this case too.
        packing = False
        console.print(
            f"[dim]sft: packing off ({attn or 'this'} attention cannot keep packed examples apart)[/]"
        )
    return packing


def write_train_png(run: RunDir, reward_names: list[str], cfg: Config) -> str | None:
    """``<run>/logs/train.png``: the curves of the current attempt (rank 0 only); None without matplotlib."""
    from cli.run.atomic import atomic_write_bytes
    from cli.run.plots import current_attempt, train_png
    from cli.run.ranks import is_main

    if not is_main():
        return None
    rows = current_attempt(run.read_metrics(), "grpo")
    attempt = rows[-1].get("attempt", 1) if rows else 1
    png = train_png(
        rows,
        reward_names,
        f"grpo grpo — {run.path.name}, attempt {attempt}, model {cfg.model}, G={cfg.grpo.gens}",
    )
    if png is None:
        return None
    path = run.logs_dir / "train.png"
    atomic_write_bytes(path, png)
    return str(path)


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def _last(trainer: Any, key: str) -> float | None:
    for entry in reversed(trainer.state.log_history):
        if key in entry:
            v = float(entry[key])
            return round(v, 5) if math.isfinite(v) else None
    return None


# ---- stage 2 ------------------------------------------------------------------------------------
def run_grpo(cfg: Config, run: RunDir, setup: GrpoSetup) -> dict[str, Any]:
    """Train GRPO with what :func:`cli.train.grpo_setup.prepare` decided."""
    backend, rewards, use_vllm = setup.backend, setup.rewards, setup.use_vllm
    resume, adapter = setup.resume, setup.adapter
    console.print(f"[dim]grpo: loading {backend}, {cfg.model} and the prompts…[/]")
    eager_on_cpu_for_tiny(cfg)
    backends.import_backend(backend, use_vllm=use_vllm)  # before TRL/transformers
    backends.patch_trl_for_cpu(backend)
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from cli.train.data import grpo_dataset

    g = cfg.grpo
    batch = g.per_device_batch
    plan = _vllm_plan(cfg, run, batch) if use_vllm and not g.vllm_server else None
    t_load = time.perf_counter()
    model, tokenizer = backends.load_for_training(
        cfg,
        run,
        backend=backend,
        adapter=adapter,
        use_vllm=use_vllm and backend == "unsloth",
        vllm_utilization=plan.utilization if plan else None,
    )
    dataset, max_prompt, data_info = grpo_dataset(cfg, run, tokenizer)
    load_s = time.perf_counter() - t_load
    max_completion = _max_completion(cfg, max_prompt)
    tracker = RewardTracker()
    funcs = wrap_rewards(rewards, tracker, cfg.format_spec(), timeout=g.reward_timeout)
    vllm_args = _rollout_args(cfg, tokenizer, setup, plan)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    reporting = reporter_env(g.report_to, run)
    args = GRPOConfig(**_grpo_args(cfg, model, setup, max_completion, vllm_args))
    notes = [plan.describe() if plan else None, reporting]
    _announce(cfg, setup, data_info, max_prompt, max_completion, notes)
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=funcs, args=args, train_dataset=dataset
    )
    interrupt, memory, device_peak, live = _instrument(trainer, run, cfg, setup, tracker, plan)
    start_step, stopped, train_s = _train_or_finish(trainer, model, g.max_steps, resume, interrupt)
    device_peak.stop()
    dest = backends.save_trained_adapter(trainer, model, tokenizer, run.grpo_dir / "adapter")
    summary = _grpo_summary(
        cfg, setup, trainer, live, memory, device_peak, plan, start_step=start_step, stopped=stopped,
        max_completion=max_completion, max_prompt=max_prompt, data_info=data_info, train_s=train_s,
        load_s=load_s, dest=dest,
    )  # fmt: skip
    run.log_metrics({"stage": "grpo_summary", "time": round(time.time(), 3), **summary})
    summary["plot"] = write_train_png(run, [r.name for r in rewards], cfg)
    peak = memory_note(summary)
    if stopped is not None:
        return summary
    console.print(
        f"grpo done: {_steps(summary['steps'])} (attempt {setup.attempt}) in {train_s:.1f} s "
        f"({summary['seconds_per_step']} s/step, first "
        f"{summary['first_step_seconds']} s), rewards {100 * (summary['reward_share'] or 0):.2f}% of time"
        f"{peak} → adapter {dest}" + (f", curves {summary['plot']}" if summary["plot"] else "")
    )
    return summary


def _max_completion(cfg: Config, max_prompt: int) -> int:
    """The completion budget: --max-completion-length, else what the longest prompt leaves."""
    from cli.run.data import grpo_completion_budget

    return grpo_completion_budget(cfg.max_seq_length, cfg.grpo.max_completion_length, max_prompt)


def _rollout_args(cfg: Config, tokenizer: Any, setup: GrpoSetup, plan: VllmPlan | None) -> dict[str, Any]:
    """The GRPOConfig arguments of the rollouts: a vLLM server, colocated vLLM, or none (generate)."""
    if cfg.grpo.vllm_server:
        return _vllm_server_args(cfg, tokenizer)
    if setup.use_vllm:
        return _vllm_args(cfg, tokenizer, setup.backend, plan)
    return {}


def _grpo_args(
    cfg: Config, model: Any, setup: GrpoSetup, max_completion: int, vllm_args: dict[str, Any]
) -> dict[str, Any]:
    """TRL's GRPOConfig arguments (seed 000's objective and schedule, from the config)."""
    g = cfg.grpo
    return dict(
        **_common_args(cfg, g, model, setup.checkpoints, g.max_steps, setup.backend),
        per_device_train_batch_size=g.per_device_batch,
        gradient_accumulation_steps=g.grad_accum,
        num_generations=g.gens,
        max_completion_length=int(max_completion),
        temperature=g.temperature,
        min_p=g.min_p,
        top_p=g.top_p,
        top_k=g.top_k or 0,
        # transformers 5 folds warmup_ratio into warmup_steps: a float in [0, 1) is a ratio of the run.
        warmup_steps=float(g.warmup_ratio) if 0 < g.warmup_ratio < 1 else 0,
        lr_scheduler_type=g.lr_scheduler,
        max_steps=g.max_steps,
        beta=g.beta,
        loss_type=g.loss_type,
        epsilon=g.epsilon,
        epsilon_high=g.epsilon if g.epsilon_high is None else g.epsilon_high,
        mask_truncated_completions=bool(g.mask_truncated_completions),
        scale_rewards=g.scale_rewards,
        importance_sampling_level=g.importance_sampling_level,
        num_iterations=g.num_iterations,
        **({"steps_per_generation": g.steps_per_generation} if g.steps_per_generation else {}),
        reward_weights=[r.weight for r in setup.rewards],
        max_grad_norm=g.max_grad_norm,
        report_to=g.report_to,
        **vllm_args,
    )


def _announce(
    cfg: Config,
    setup: GrpoSetup,
    data_info: dict[str, Any],
    max_prompt: int,
    max_completion: int,
    notes: list[str | None],
) -> None:
    """The line saying what this GRPO run is about to do, then the vLLM/reporter notes."""
    g, resume, batch = cfg.grpo, setup.resume, cfg.grpo.per_device_batch
    start = f"checkpoint {resume.name}" if resume else ("SFT adapter" if setup.adapter else "fresh LoRA")
    console.print(
        f"grpo: {data_info['prompts']} prompts (≤ {max_prompt} tokens) │ backend {setup.backend}"
        f"{vllm_note(g, setup.use_vllm)}{world_note(batch)} │ G={g.gens} batch {batch} │ "
        f"completions ≤ {max_completion} tokens │ lr {g.learning_rate:g} │ attempt {setup.attempt}, "
        f"start: {start} │ rewards "
        f"{', '.join(f'{r.name}×{r.weight:g}' for r in setup.rewards)}",
        soft_wrap=True,
    )
    for note in notes:
        if note:
            console.print(f"grpo: {note}", soft_wrap=True)
    if setup.uses_dora:
        err_console.print(f"[yellow]note:[/] {backends.DORA_COST}")


def _instrument(
    trainer: Any, run: RunDir, cfg: Config, setup: GrpoSetup, tracker: RewardTracker, plan: VllmPlan | None
) -> tuple[Interrupt, PhaseMemory, DevicePeak, Any]:
    """Quiet logs, atomic checkpoints, Ctrl-C, the memory probes and the live view on the trainer."""
    quiet_trainer(trainer)
    atomic_checkpoints(trainer)
    interrupt = Interrupt(abandon_rollouts=world_size() == 1)
    interrupt.watch_rollouts(trainer)
    memory = PhaseMemory().wrap(trainer)
    device_peak = DevicePeak().start()
    live = make_callback(
        run,
        "grpo",
        max_steps=cfg.grpo.max_steps,
        tracker=tracker,
        interrupt=interrupt,
        reward_names=[r.name for r in setup.rewards],
        memory=memory,
        device_peak=device_peak,
        vllm_gib=plan.vllm_gib if plan else None,
        attempt=setup.attempt,
        from_sft=setup.adapter is not None or setup.resume is not None,
    )
    trainer.add_callback(live)
    return interrupt, memory, device_peak, live


def _train_or_finish(
    trainer: Any, model: Any, max_steps: int, resume: Path | None, interrupt: Interrupt
) -> tuple[int, Any, float]:
    """Train (from ``resume`` when given) until --max-steps or a stop: (start step, the stop, seconds)."""
    start_step = 0
    if resume is not None:
        start_step = int(resume.name.rpartition("-")[2] or 0)
        if start_step >= max_steps:
            err_console.print(
                f"[yellow]note:[/] {resume.name} is already at step {start_step} ≥ --max-steps "
                f"{max_steps}: nothing left to train (raise --max-steps)"
            )
    t0 = time.perf_counter()
    stopped = None
    if resume is not None and start_step >= max_steps and not backends.sharded():
        # Nothing to train: the checkpoint's adapter is the result (the trainer would run one more step).
        backends.load_adapter_weights(model, resume)
        trainer.state.global_step = start_step
    else:
        stopped = train_until_stopped(trainer, resume=resume, interrupt=interrupt, stage="grpo")
    return start_step, stopped, time.perf_counter() - t0


def _grpo_summary(
    cfg: Config,
    setup: GrpoSetup,
    trainer: Any,
    live: Any,
    memory: PhaseMemory,
    device_peak: DevicePeak,
    plan: VllmPlan | None,
    *,
    start_step: int,
    stopped: Any,
    max_completion: int,
    max_prompt: int,
    data_info: dict[str, Any],
    train_s: float,
    load_s: float,
    dest: Path,
) -> dict[str, Any]:
    """What the GRPO stage records (metrics.jsonl's grpo_summary, the manifest)."""
    g, rewards, resume, checkpoints = cfg.grpo, setup.rewards, setup.resume, setup.checkpoints
    batch = g.per_device_batch
    global_batch = batch * world_size() * g.grad_accum
    times = live.step_times
    typical = live.typical_step()
    reward_total = sum(float(r.get("reward_seconds") or 0) for r in live.rows)
    return {
        "backend": setup.backend,
        "vllm": setup.use_vllm,
        "vllm_server": g.vllm_server or None,
        "world_size": world_size(),
        # What accelerate really set up (MULTI_GPU = DDP, FSDP, DEEPSPEED, MULTI_CPU = gloo DDP, NO).
        "distributed_type": str(getattr(trainer.accelerator, "distributed_type", "NO")).rpartition(".")[2],
        "global_batch": global_batch,
        "samples_per_second": round(global_batch / typical, 3) if typical else None,
        "from": "checkpoint" if resume else ("sft_adapter" if setup.adapter else "base"),
        "attempt": setup.attempt,
        "checkpoints": str(checkpoints),
        "steps": int(trainer.state.global_step) - start_step,
        "global_step": int(trainer.state.global_step),
        "gens": g.gens,
        "batch": batch,
        "max_completion_length": int(max_completion),
        "max_prompt_length": max_prompt,
        "train_seconds": round(train_s, 2),
        "load_seconds": round(load_s, 2),
        "first_step_seconds": round(times[0], 3) if times else None,
        "seconds_per_step": round(typical, 3) if typical else None,
        "reward_seconds": round(reward_total, 4),
        "reward_share": round(reward_total / train_s, 4) if train_s > 0 else None,
        "peak_gpu_gib": backends.peak_gpu_gib(),
        # Apart: the training part of a step, vLLM's share, and the whole device (nvidia-smi's figure).
        "train_peak_gib": memory.train_peak_gib,
        "train_extra_gib": memory.train_extra_gib,
        "vllm_gib": plan.vllm_gib if plan else None,
        "vllm_gpu_memory_utilization": plan.utilization if plan else None,
        "gpu_peak_gib": device_peak.peak_gib,
        "final_reward": _last(trainer, "reward"),
        "rewards": {r.name: r.weight for r in rewards},
        "objective": {k: getattr(trainer.args, k, None) for k in OBJECTIVE_KEYS},
        "adapter": str(dest),
        "data": data_info,
        **stop_fields(stopped, checkpoints),
    }


# The GRPO objective as the trainer really ran it (a backend may rewrite what it was given).
OBJECTIVE_KEYS = (
    "loss_type",
    "beta",
    "epsilon",
    "epsilon_high",
    "mask_truncated_completions",
    "scale_rewards",
    "importance_sampling_level",
    "num_iterations",
    "steps_per_generation",
)


def vllm_note(g: Any, use_vllm: bool) -> str:
    if g.vllm_server:
        return f" + vLLM server {g.vllm_server}"
    return " + vLLM" if use_vllm else ""


def world_note(batch: int) -> str:
    n = world_size()
    return f" │ {n} processes (global batch {batch * n})" if n > 1 else ""


def _vllm_server_args(cfg: Config, tokenizer: Any) -> dict[str, Any]:
    """TRL's server mode: rollouts from a `trl vllm-serve` process (started by `grpo serve`), which
    receives the LoRA-merged weights over NCCL after every optimizer step."""
    from cli.train.distributed import server_url

    stops = cfg.format_spec().stop_strings(tokenizer.eos_token)
    return {
        "use_vllm": True,
        "vllm_mode": "server",
        "vllm_server_base_url": server_url(cfg.grpo.vllm_server),
        "generation_kwargs": {"stop": stops, "include_stop_str_in_output": True},
    }


def memory_note(summary: dict[str, Any]) -> str:
    """ ", training +2.5 GiB …, vLLM 12.5 GiB, GPU in use 13.6 GiB": only the figures measured."""
    parts = []
    if summary.get("train_extra_gib") is not None:
        parts.append(f"training +{summary['train_extra_gib']} GiB over the resident weights")
    elif summary.get("peak_gpu_gib") is not None:
        parts.append(f"peak GPU {summary['peak_gpu_gib']} GiB")
    if summary.get("vllm_gib") is not None:
        parts.append(f"vLLM {summary['vllm_gib']} GiB")
    if summary.get("gpu_peak_gib") is not None:
        parts.append(f"GPU in use {summary['gpu_peak_gib']} GiB")
    return "".join(f", {p}" for p in parts)


def _vllm_plan(cfg: Config, run: RunDir, batch: int) -> VllmPlan:
    """vLLM's share of the GPU for this run's rollouts (before the model loads: vLLM starts first)."""
    import torch

    from cli.models.resolve import resolve_model
    from cli.train.data import read_stats

    g = cfg.grpo
    prompt = int(g.max_prompt_length or read_stats(run).get("max_prompt_length") or cfg.max_seq_length // 2)
    completion = int(g.max_completion_length or max(cfg.max_seq_length - prompt, 1))
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    return plan_vllm(
        g.gpu_memory_utilization,
        model_shape(resolve_model(cfg, run)),
        sequences=batch * g.rollout_steps,  # TRL generates steps_per_generation batches at once
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_bytes=int(total),
    )


def _vllm_args(cfg: Config, tokenizer: Any, backend: str, plan: VllmPlan | None = None) -> dict[str, Any]:
    """Rollouts through vLLM (GPU only): Unsloth's colocated engine, or TRL's colocate mode under hf."""
    g = cfg.grpo
    stops = cfg.format_spec().stop_strings(tokenizer.eos_token)
    if backend == "unsloth":
        from vllm import SamplingParams

        # Seed 000: min_p 0.1, top_p 1.0, top_k -1, stop at EOS and keep it in the output.
        params = SamplingParams(
            min_p=g.min_p,
            top_p=g.top_p,
            top_k=g.top_k or -1,
            seed=cfg.seed,
            stop=stops,
            include_stop_str_in_output=True,
        )
        return {"use_vllm": True, "vllm_sampling_params": params}
    # TRL colocate: before each sync it merges the LoRA into the weights (works for DoRA too).
    return {
        "use_vllm": True,
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": plan.utilization if plan else 0.3,
        "generation_kwargs": {"stop": stops, "include_stop_str_in_output": True},
    }
