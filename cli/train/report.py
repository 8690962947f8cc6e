"""What a GRPO stage ran and measured (:class:`GrpoResult`), and its report: the summary row of
``logs/metrics.jsonl`` (and so the manifest), ``logs/train.png`` and the closing line."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.run.console import console
from cli.run.ranks import world_size

if TYPE_CHECKING:
    from cli.run.rundir import RunDir
    from cli.train.plan import GrpoPlan

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
# The correction of vLLM's rollouts: it only means anything when vLLM generated them.
VLLM_OBJECTIVE_KEYS = (
    "vllm_importance_sampling_correction",
    "vllm_importance_sampling_mode",
    "vllm_importance_sampling_clip_min",
    "vllm_importance_sampling_clip_max",
)


def objective_of(args: Any) -> dict[str, Any]:
    """The objective keys of TRL's args; the vLLM correction's only on a run that used vLLM."""
    keys = OBJECTIVE_KEYS + (VLLM_OBJECTIVE_KEYS if getattr(args, "use_vllm", False) else ())
    return {k: getattr(args, k, None) for k in keys}


@dataclass
class GrpoResult:
    """What the trainer did: its steps and their times, the memory it used, where the adapter went."""

    adapter: Path
    start_step: int
    global_step: int
    stopped: int | None  # the step Ctrl-C stopped it at, or None
    train_seconds: float
    load_seconds: float
    step_times: list[float]
    typical_step: float | None
    reward_seconds: float
    final_reward: float | None
    objective: dict[str, Any]
    distributed_type: str
    data: dict[str, Any]
    memory: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def collect(cls, trainer: Any, live: Any, obs: Any, **done: Any) -> GrpoResult:
        """From the trainer, its live view and instruments, after ``train()``; ``done``: the rest."""
        from cli.train.backends import peak_gpu_gib

        memory = {
            "peak_gpu_gib": peak_gpu_gib(),
            # Apart: the training part of a step, vLLM's share, and the whole device (nvidia-smi's figure).
            "train_peak_gib": obs.memory.train_peak_gib if obs.memory else None,
            "train_extra_gib": obs.memory.train_extra_gib if obs.memory else None,
            "gpu_peak_gib": obs.device_peak.peak_gib if obs.device_peak else None,
        }
        return cls(
            global_step=int(trainer.state.global_step),
            step_times=list(live.step_times),
            typical_step=live.typical_step(),
            reward_seconds=sum(float(r.get("reward_seconds") or 0) for r in live.rows),
            final_reward=last_logged(trainer, "reward"),
            objective=objective_of(trainer.args),
            # What accelerate really set up (MULTI_GPU = DDP, FSDP, DEEPSPEED, MULTI_CPU = gloo DDP, NO).
            distributed_type=str(getattr(trainer.accelerator, "distributed_type", "NO")).rpartition(".")[2],
            memory=memory,
            **done,
        )


def last_logged(trainer: Any, key: str) -> float | None:
    for entry in reversed(trainer.state.log_history):
        if key in entry:
            v = float(entry[key])
            return round(v, 5) if math.isfinite(v) else None
    return None


def summary(plan: GrpoPlan, result: GrpoResult) -> dict[str, Any]:
    """What the GRPO stage records (metrics.jsonl's grpo_summary, the manifest)."""
    from cli.train.stopping import stop_fields

    g, r = plan.cfg.grpo, result
    global_batch = g.per_device_batch * world_size() * g.grad_accum
    return {
        "backend": plan.backend,
        "vllm": plan.use_vllm,
        "vllm_server": g.vllm_server or None,
        "world_size": world_size(),
        "distributed_type": r.distributed_type,
        "global_batch": global_batch,
        "samples_per_second": round(global_batch / r.typical_step, 3) if r.typical_step else None,
        "from": "checkpoint" if plan.resume else ("sft_adapter" if plan.adapter else "base"),
        "attempt": plan.attempt,
        "control": plan.control,
        "checkpoints": str(plan.checkpoints),
        "steps": r.global_step - r.start_step,
        "global_step": r.global_step,
        "gens": g.gens,
        "batch": g.per_device_batch,
        "max_completion_length": plan.budget.completion,
        "max_prompt_length": plan.budget.prompt,
        "train_seconds": round(r.train_seconds, 2),
        "load_seconds": round(r.load_seconds, 2),
        "first_step_seconds": round(r.step_times[0], 3) if r.step_times else None,
        "seconds_per_step": round(r.typical_step, 3) if r.typical_step else None,
        "reward_seconds": round(r.reward_seconds, 4),
        "reward_share": round(r.reward_seconds / r.train_seconds, 4) if r.train_seconds > 0 else None,
        **r.memory,
        "vllm_gib": plan.vllm.vllm_gib if plan.vllm else None,
        "vllm_gpu_memory_utilization": plan.vllm.utilization if plan.vllm else None,
        "trainer_logprobs": plan.describe()["trainer_logprobs"],  # as --dry-run says it
        "final_reward": r.final_reward,
        "rewards": {w.name: w.weight for w in plan.rewards},
        "objective": r.objective,
        "adapter": str(r.adapter),
        "data": r.data,
        **stop_fields(r.stopped, plan.checkpoints),
    }


def report(plan: GrpoPlan, result: GrpoResult) -> dict[str, Any]:
    """Record the stage (metrics.jsonl, train.png) and say how it went; returns the summary."""
    row = summary(plan, result)
    plan.run.log_metrics({"stage": "grpo_summary", "time": round(time.time(), 3), **row})
    row["plot"] = write_train_png(plan.run, [r.name for r in plan.rewards], plan.cfg, control=plan.control)
    if result.stopped is None:
        console.print(
            f"grpo done: {steps_word(row['steps'])} (attempt {plan.attempt}"
            f"{f', CONTROL: {plan.control}' if plan.control else ''}) in {result.train_seconds:.1f} s "
            f"({row['seconds_per_step']} s/step, first {row['first_step_seconds']} s), rewards "
            f"{100 * (row['reward_share'] or 0):.2f}% of time{memory_note(row)} → adapter {result.adapter}"
            + (f", curves {row['plot']}" if row["plot"] else "")
        )
    return row


def write_train_png(
    run: RunDir, reward_names: list[str], cfg: Any, *, control: str | None = None
) -> str | None:
    """``<run>/logs/train.png``: the curves of the current attempt (rank 0 only); None without matplotlib.
    A placebo attempt's go to ``logs/train-control.png``, titled as one (the GRPO curves stay)."""
    from cli.run.atomic import atomic_write_bytes
    from cli.run.plots import current_attempt, train_png
    from cli.run.ranks import is_main

    if not is_main():
        return None
    rows = current_attempt(run.read_metrics(), "grpo")
    attempt = rows[-1].get("attempt", 1) if rows else 1
    mark = f" — CONTROL ({control}): a reward without information" if control else ""
    png = train_png(
        rows,
        reward_names,
        f"grpo grpo — {run.path.name}, attempt {attempt}{mark}, model {cfg.model}, G={cfg.grpo.gens}",
    )
    if png is None:
        return None
    path = run.logs_dir / ("train-control.png" if control else "train.png")
    atomic_write_bytes(path, png)
    return str(path)


def steps_word(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def memory_note(row: dict[str, Any]) -> str:
    """ ", training +2.5 GiB …, vLLM 12.5 GiB, GPU in use 13.6 GiB": only the figures measured."""
    parts = []
    if row.get("train_extra_gib") is not None:
        parts.append(f"training +{row['train_extra_gib']} GiB over the resident weights")
    elif row.get("peak_gpu_gib") is not None:
        parts.append(f"peak GPU {row['peak_gpu_gib']} GiB")
    if row.get("vllm_gib") is not None:
        parts.append(f"vLLM {row['vllm_gib']} GiB")
    if row.get("gpu_peak_gib") is not None:
        parts.append(f"GPU in use {row['gpu_peak_gib']} GiB")
    return "".join(f", {p}" for p in parts)
