"""The two training stages: `grpo sft` (format warm-up) and `grpo grpo` (GRPO), under either backend.

Seed 000 is the reference: SFT lr 2e-4, batch 2 x grad-accum 4, warmup 5, packing, 8-bit AdamW;
GRPO lr 5e-6, warmup_ratio 0.1, linear schedule, weight decay 0.001, temperature 1.0, min_p 0.1.
Both stages train a LoRA; GRPO continues the run's SFT adapter when there is one.

`grpo grpo` carries out a :class:`~cli.train.plan.GrpoPlan` (every decision is the plan's) and reads as
its story: load → data → trainer → train → report (:mod:`cli.train.report`). The trainers are our
subclasses of the backend's TRL trainers (:mod:`cli.train.trainer`).

Long because: both stages' load → data → trainer → train → report, with the GPU step's levers, the tool
run and the placebo attempt hooked in, read top to bottom.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError
from cli.run import signals
from cli.run.atomic import atomic_write_json
from cli.run.console import console, err_console
from cli.run.ranks import is_main, world_size
from cli.run.rundir import RunDir
from cli.train import backends, control
from cli.train.checkpoints import INPUTS, attempt_inputs, next_attempt_from_metrics
from cli.train.live import Interrupt, LiveSpec, make_callback, quiet_trainer
from cli.train.report import GrpoResult, last_logged, report, steps_word
from cli.train.stopping import stop_fields, train_until_stopped
from cli.train.trainer import Observers
from cli.train.unsloth_scoring import COMPILE_ENV

if TYPE_CHECKING:
    from cli.config.schema import Config
    from cli.train.plan import GrpoPlan


def eager_on_cpu_for_tiny(cfg: Config) -> None:
    """The tiny smoke model on the CPU runs eagerly: Unsloth's torch.compile of it cost 38.7 s on the first
    GRPO step of a fresh machine (cold inductor cache; then 4.3 s, 0.18 s) against 0.19 s/step eager,
    same losses (measured here 2026-11-30, G=4 × 64 tokens) — it made the demo's GRPO stage 100 s instead
    of a few. Real models keep Unsloth's default; ``UNSLOTH_COMPILE_DISABLE`` set by the user wins."""
    if str(cfg.model) == "tiny" and not backends.cuda_available():
        os.environ.setdefault(COMPILE_ENV, "1")


# ---- stage 1 ------------------------------------------------------------------------------------
def run_sft(cfg: Config, run: RunDir, *, backend: str) -> dict[str, Any]:
    from cli.train.hardware import Hardware

    attempt = next_attempt_from_metrics(run, "sft")
    console.print(f"[dim]sft: loading {backend}, {cfg.model} and the warm-up examples…[/]")
    with signals.deferred():  # a stop signal inside torch's import would abort the process
        eager_on_cpu_for_tiny(cfg)
        backends.import_backend(backend)  # before TRL/transformers
    from cli.train.data import sft_dataset
    from cli.train.trainer import sft_trainer_class

    hw = Hardware.probe()
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
        + (" │ loss on the answers" if s.completion_only_loss and not cfg.tools else "")
        + (" │ loss on the model's turns (not the tool results)" if cfg.tools else "")
    )
    if cfg.lora.dora:
        err_console.print(f"[yellow]note:[/] {backends.DORA_COST}")
    args = _sft_args(cfg, run, steps, _packing(s.packing, model, backend), backend, hw)
    trainer = sft_trainer_class()(
        model=model, processing_class=tokenizer, train_dataset=dataset, args=args,
        lm_head=_cpu_head(backend, hw),
    )  # fmt: skip
    quiet_trainer(trainer)
    interrupt = Interrupt()
    live = make_callback(
        run,
        "sft",
        LiveSpec(max_steps=steps if steps > 0 else 0, attempt=attempt),
        Observers(interrupt=interrupt),
    )
    trainer.add_callback(live)
    t0 = time.perf_counter()
    stopped = train_until_stopped(trainer, resume=None, interrupt=interrupt, stage="sft")
    train_s = time.perf_counter() - t0
    dest = backends.save_trained_adapter(trainer, model, tokenizer, run.sft_dir / "adapter")
    summary = _sft_summary(trainer, live, backend, attempt, data_info)
    summary.update(
        train_seconds=round(train_s, 2), load_seconds=round(load_s, 2), adapter=str(dest),
        **stop_fields(stopped, run.sft_dir / "checkpoints"),
    )  # fmt: skip
    run.log_metrics({"stage": "sft_summary", "time": round(time.time(), 3), **summary})
    if stopped is None:
        console.print(
            f"sft done: {steps_word(summary['steps'])} in {train_s:.1f} s ({summary['seconds_per_step']} "
            f"s/step, first {summary['first_step_seconds']} s), loss {summary['final_loss']} → adapter {dest}"
        )
    return summary


def _sft_summary(trainer: Any, live: Any, backend: str, attempt: int, data: dict[str, Any]) -> dict[str, Any]:
    """What the SFT stage records. As grpo's, the first step apart (it carries warm-up) and the others'
    mean; the stage's wall time is train_seconds (it also holds the trainer's setup and the final save)."""
    loss = last_logged(trainer, "loss")
    return {
        "backend": backend,
        "attempt": attempt,
        "steps": int(trainer.state.global_step),
        "first_step_seconds": round(live.step_times[0], 3) if live.step_times else None,
        "seconds_per_step": round(live.typical_step(), 3) if live.step_times else None,
        "final_loss": loss if loss is not None else last_logged(trainer, "train_loss"),
        "data": data,
    }


def _sft_args(cfg: Config, run: RunDir, steps: int, packing: bool, backend: str, hw: Any) -> Any:
    """TRL's SFTConfig (seed 000's stage 1, from the config)."""
    from trl import SFTConfig

    from cli.train.hardware import common_args, training_dtype

    s = cfg.sft
    return SFTConfig(
        **common_args(cfg, s, run.sft_dir / "checkpoints", steps, backend, training_dtype(cfg.dtype, hw), hw),
        per_device_train_batch_size=s.batch_size,
        gradient_accumulation_steps=s.grad_accum,
        warmup_steps=s.warmup_steps,
        max_steps=steps if steps > 0 else -1,
        num_train_epochs=float(s.epochs or 1),
        lr_scheduler_type=s.lr_scheduler,
        dataset_text_field="text",
        # A tool run's rows come tokenized with the assistant mask (cli/train/data.py tool_sft_dataset).
        completion_only_loss=bool(s.completion_only_loss) and not cfg.tools,
        max_length=cfg.max_seq_length,
        packing=packing,
        report_to="none",
    )


def _cpu_head(backend: str, hw: Any) -> Any:
    """Our LM head for the hf backend on a CPU, where TRL's Triton log-prob kernel has no driver."""
    from cli.train.lm_head import Support

    return Support() if backend == "hf" and not hw.cuda else None


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


# ---- stage 2 ------------------------------------------------------------------------------------
def run_grpo(plan: GrpoPlan) -> dict[str, Any]:
    """Train GRPO as ``plan`` says: load → data → trainer → train → report."""
    from cli.train.data import grpo_dataset

    t_load = time.perf_counter()
    model, tokenizer = _load(plan)
    dataset, data_info = grpo_dataset(plan.cfg, plan.run, tokenizer, plan.budget.prompt)
    if plan.control:  # a placebo attempt (cli/train/control.py): marked before it trains
        dataset = _control_start(plan, dataset, data_info)
    load_s = time.perf_counter() - t_load
    # Ctrl-C (or SIGTERM) from the banner on means "stop at the step's end": one that comes while the trainer
    # is being built stops before the first rollout, as one during the rollout does.
    interrupt = Interrupt(abandon_rollouts=world_size() == 1)
    tools = _tool_run(plan)
    with interrupt.installed(), contextlib.ExitStack() as stack:
        if tools is not None:
            stack.enter_context(tools)  # the sandbox's workers end with the stage, whatever happens
        announce(plan, data_info)
        trainer, obs, live = _trainer(plan, model, tokenizer, dataset, interrupt, tools)
        start_step, stopped, train_s = _train_or_finish(trainer, model, plan, interrupt)
    if obs.tracker is not None and obs.tracker.audit is not None:
        obs.tracker.audit.close()  # what it was given, judged and written; then the process ends
    obs.device_peak.stop()
    where = control.adapter_dir(plan.run) if plan.control else plan.run.grpo_dir / "adapter"
    dest = backends.save_trained_adapter(trainer, model, tokenizer, where)
    if plan.control and is_main():
        control.record(plan.run, plan.control, plan.checkpoints, {
            "attempt": plan.attempt, "steps": int(trainer.state.global_step), "seed": plan.cfg.seed,
            "adapter": str(dest), "checkpoints": str(plan.checkpoints),
        })  # fmt: skip
    result = GrpoResult.collect(
        trainer, live, obs, adapter=dest, start_step=start_step, stopped=stopped, train_seconds=train_s,
        load_seconds=load_s, data=data_info,
    )  # fmt: skip
    return report(plan, result)


def _control_start(plan: GrpoPlan, dataset: Any, data_info: dict[str, Any]) -> Any:
    """A control attempt's data (shuffled-answers: each prompt takes another's gold) and its mark."""
    assert plan.control is not None
    if plan.control == "shuffled-answers":
        dataset, info = control.shuffle_answers(dataset, plan.cfg.seed)
        data_info.update(info)
    data_info["control"] = plan.control
    if is_main():
        control.record(plan.run, plan.control, plan.checkpoints, {"attempt": plan.attempt, "steps": None})
    console.print(
        f"grpo: [bold magenta]CONTROL[/] attempt {plan.attempt} ({plan.control}): the reward carries no "
        f"information about correctness; adapter → {control.adapter_dir(plan.run)}",
        soft_wrap=True,
    )
    return dataset


def _tool_run(plan: GrpoPlan) -> Any:
    """The python tool's sandbox for a tool run (config ``tools``), else None."""
    if not plan.cfg.tools:
        return None
    from cli.train.tool_use import ToolRun

    return ToolRun(plan.cfg.format_spec(), plan.cfg.sandbox.limits())


def _load(plan: GrpoPlan) -> tuple[Any, Any]:
    """The backend (Unsloth before TRL/transformers), then the model + LoRA (the SFT adapter, if any)."""
    console.print(f"[dim]grpo: loading {plan.backend}, {plan.cfg.model} and the prompts…[/]")
    with signals.deferred():  # a stop signal inside torch's import would abort the process
        eager_on_cpu_for_tiny(plan.cfg)
        for key, value in plan.backend_env().items():  # read by the backend on import or while it trains
            os.environ.setdefault(key, value)
        backends.import_backend(plan.backend, use_vllm=plan.use_vllm)
    return backends.load_for_training(
        plan.cfg,
        plan.run,
        backend=plan.backend,
        adapter=plan.adapter,
        use_vllm=plan.use_vllm and plan.backend == "unsloth",
        vllm_utilization=plan.vllm.utilization if plan.vllm else None,
    )


def announce(plan: GrpoPlan, data_info: dict[str, Any]) -> None:
    """The line saying what this GRPO run is about to do, then the vLLM/reporter notes."""
    from cli.train.reporters import reporter_env

    g, batch = plan.cfg.grpo, plan.cfg.grpo.per_device_batch
    start = (
        f"checkpoint {plan.resume.name}" if plan.resume else ("SFT adapter" if plan.adapter else "fresh LoRA")
    )
    n = world_size()
    console.print(
        f"grpo: {data_info['prompts']} prompts (≤ {plan.budget.prompt} tokens) │ backend {plan.backend}"
        f"{vllm_note(g, plan.use_vllm)}"
        f"{f' │ {n} processes (global batch {batch * n})' if n > 1 else ''} │ G={g.gens} batch {batch} │ "
        f"completions ≤ {plan.budget.completion} tokens │ lr {g.learning_rate:g} │ attempt {plan.attempt}, "
        f"start: {start} │ rewards {', '.join(f'{r.name}×{r.weight:g}' for r in plan.rewards)}",
        soft_wrap=True,
    )
    layout = plan.unsloth_scoring()
    levers = {k: v for k, v in plan.step_levers().items() if v not in (False, "full", "auto", "none")}
    notes = [
        f"backend {plan.backend_reason}" if plan.cfg.backend == "auto" else None,
        f"step levers: {', '.join(f'{k} {v}' for k, v in levers.items())}" if levers else None,
        plan.vllm.describe() if plan.vllm else None,
        layout.describe() if layout else None,
        reporter_env(g.report_to, plan.run),
    ]
    if plan.support is not None and plan.use_vllm:
        notes.append(
            f"the trainer scores log-probs over the rollouts' own distribution ({plan.support.describe()})"
        )
    for note in notes:
        if note:
            console.print(f"grpo: {note}", soft_wrap=True)
    if plan.uses_dora:
        err_console.print(f"[yellow]note:[/] {backends.DORA_COST}")


def vllm_note(g: Any, use_vllm: bool) -> str:
    if g.vllm_server:
        return f" + vLLM server {g.vllm_server}"
    return " + vLLM" if use_vllm else ""


def kept_unsloth_args(config: Any, args: dict[str, Any]) -> None:
    """Unsloth's own ``GRPOConfig`` fields the plan set (``unsloth_*``) must survive into the config: an
    Unsloth that drops or renames one would otherwise switch its fix off silently (the scoring mini-batches
    of :meth:`GrpoPlan.unsloth_scoring`, without which the first step compiles for many minutes), and so must
    the device step's size (Unsloth resets a batch it finds indivisible by the group size), which decides
    whether its scorer runs compiled."""
    step = ("per_device_train_batch_size", "gradient_accumulation_steps")
    lost = sorted(
        k for k in args if (k.startswith("unsloth_") or k in step) and getattr(config, k, None) != args[k]
    )
    if lost:
        raise GrpoError(
            f"this Unsloth's GRPOConfig does not keep {', '.join(lost)}: install the Unsloth version "
            "pinned in pyproject.toml, or use --backend hf"
        )


def _trainer(
    plan: GrpoPlan, model: Any, tokenizer: Any, dataset: Any, interrupt: Interrupt, tools: Any = None
) -> tuple[Any, Observers, Any]:
    """Our GRPO trainer over ``model`` with the plan's arguments, its instruments and its live view."""
    import torch
    from trl import GRPOConfig

    from cli.train.canary import RolloutCanary
    from cli.train.dynamic import DynamicSampling
    from cli.train.gpu_memory import DevicePeak, PhaseMemory
    from cli.train.phases import PhaseTimes
    from cli.train.rewards import RewardTracker, wrap_rewards
    from cli.train.trainer import grpo_trainer_class
    from cli.train.vllm_levers import engine_kwargs, engine_settings

    g = plan.cfg.grpo
    tracker = RewardTracker()
    funcs = wrap_rewards(list(plan.rewards), tracker, plan.cfg.format_spec(), timeout=g.reward_timeout)
    if g.audit_every and is_main():  # Math-Verify in its own process, fed from the first reward's calls
        from cli.train.audit import Auditor

        tracker.audit = Auditor(plan.cfg.format_spec(), plan.run.logs_dir, g, seed=plan.cfg.seed).start()
        funcs[0] = tracker.audit.hook(funcs[0])
    args = plan.trl_args(tokenizer.eos_token)
    if "vllm_sampling_params" in args:  # Unsloth takes vLLM's own object
        from vllm import SamplingParams

        args["vllm_sampling_params"] = SamplingParams(**args["vllm_sampling_params"])
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    obs = Observers(
        interrupt=interrupt,
        phases=PhaseTimes(PhaseTimes.cuda_sync()),
        memory=PhaseMemory(),
        refill=DynamicSampling(dataset, g.gens, max_retries=g.dynamic_max_retries, seed=plan.cfg.seed)
        if g.dynamic_sampling
        else None,
        canary=RolloutCanary(from_adapter=plan.from_adapter, dtype=plan.dtype) if plan.use_vllm else None,
        tracker=tracker,
        device_peak=DevicePeak().start(),
        tools=tools,
    )
    config = GRPOConfig(**args)
    kept_unsloth_args(config, args)
    with engine_settings(engine_kwargs(g) if plan.trl_engine else {}):  # the GPU step's levers
        trainer = grpo_trainer_class()(
            model=model, processing_class=tokenizer, reward_funcs=funcs, args=config,
            train_dataset=dataset, observers=obs, lm_head=plan.support, padding_free=plan.padding_free,
            **({"tools": tools.tools()} if tools is not None else {}),
        )  # fmt: skip
    _after_build(plan, trainer, obs)
    spec = LiveSpec(
        max_steps=g.max_steps,
        attempt=plan.attempt,
        control=plan.control,
        reward_names=[r.name for r in plan.rewards],
        from_sft=plan.from_adapter,
        vllm_gib=plan.vllm.vllm_gib if plan.vllm else None,
        first_step_note="Unsloth compiles its kernels (minutes the first time on a machine)"
        if plan.backend == "unsloth"
        else "",
    )
    live = make_callback(plan.run, "grpo", spec, obs)
    trainer.add_callback(live)
    if g.profile_step:
        from cli.train.profile import profiler_callback

        if g.profile_step > g.max_steps > 0:
            err_console.print(f"[yellow]note:[/] grpo.profile_step {g.profile_step} is after the last step "
                              f"({g.max_steps}): nothing will be profiled")  # fmt: skip

        trainer.add_callback(profiler_callback(g.profile_step, plan.run.logs_dir / "profile"))
    return trainer, obs, live


def _after_build(plan: GrpoPlan, trainer: Any, obs: Observers) -> None:
    """The GPU step's hand-off levers on the built trainer, its chatter quieted, and the attempt's record."""
    from cli.train.vllm_levers import install_lora_sync, time_hand_off

    if plan.trl_engine and plan.cfg.grpo.vllm_sync == "lora" and (why := install_lora_sync(trainer)):
        err_console.print(f"[yellow]note:[/] grpo.vllm_sync lora: TRL's hand-off stays ({why})")
    if plan.trl_engine:
        time_hand_off(trainer, obs.timed)  # phase_sync_s: the hand-off's own time
    quiet_trainer(trainer)
    if is_main():  # what the trainer runs with, after the backend's own changes (the attempt's record)
        atomic_write_json(plan.checkpoints / "trainer_args.json", trainer.args.to_dict())
        if not (plan.checkpoints / INPUTS).exists():  # what it began on: --resume refuses other inputs
            began = attempt_inputs(plan.run, plan.cfg.format_spec().contract_hash())
            atomic_write_json(plan.checkpoints / INPUTS, began)


def _train_or_finish(
    trainer: Any, model: Any, plan: GrpoPlan, interrupt: Interrupt
) -> tuple[int, Any, float]:
    """Train (from the plan's checkpoint when resuming) until --max-steps or a stop: (start step, the stop,
    seconds)."""
    resume, max_steps, start_step = plan.resume, plan.cfg.grpo.max_steps, plan.start_step
    if resume is not None and start_step >= max_steps:
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
