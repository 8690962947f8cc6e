"""`grpo grpo`'s plan: every decision of the stage, made once, before a model loads.

:func:`make_plan` reads the config, the run directory and the launcher flags and returns a frozen
:class:`GrpoPlan`: the backend, the rewards, vLLM or not (and its share of the GPU), DoRA, the attempt and
the checkpoint to resume, the :class:`~cli.run.budget.RolloutBudget` (prompt cut, completion budget,
sequences per rollout), the hardware facts the trainer's arguments depend on, and how the trainer scores
its log-probs (:class:`~cli.train.lm_head.Support`). Nothing here imports torch: the plan is what
``grpo grpo --dry-run`` prints. :meth:`GrpoPlan.trl_args` is the one place where our names meet TRL's
``GRPOConfig``; :mod:`cli.train.stages` only carries the plan out.

Cheap checks first, so a bad flag fails in a second: the batch against the group size and the world,
the rewards (resolved and bound to the format), the launcher plan, the vLLM server, DoRA against vLLM.

Long because: it is the one place every decision of the stage is made and mapped to TRL's and Unsloth's
arguments, each beside its reason; the computations behind them live in the modules they name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError, err_console
from cli.config.schema import Config
from cli.infer.vllm_memory import VllmPlan
from cli.run import ranks
from cli.run.budget import RolloutBudget
from cli.run.data import FILTERED
from cli.run.rundir import RunDir
from cli.train import distributed
from cli.train.distributed import Plan as Launch
from cli.train.hardware import Hardware, common_args, training_dtype
from cli.train.lm_head import Support
from cli.train.rewards import Reward

if TYPE_CHECKING:
    from cli.train.unsloth_scoring import ScoringLayout

UNSLOTH_KEPT_SET_ENV = "UNSLOTH_GRPO_TRUNCATED_SUPPORT"  # unset: Unsloth's automatic kept-set scoring


@dataclass(frozen=True)
class GrpoPlan:
    """What the GRPO stage runs with (see the module docs)."""

    cfg: Config
    run: RunDir
    launch: Launch
    backend: str  # unsloth | hf
    backend_reason: str  # one line: why this backend (``auto`` picks the faster one for the hardware)
    rewards: tuple[Reward, ...]
    use_vllm: bool
    uses_dora: bool
    adapter: Path | None  # the run's SFT adapter, when there is one
    attempt: int
    checkpoints: Path  # this attempt's checkpoint folder
    resume: Path | None  # the checkpoint to resume from
    budget: RolloutBudget
    hardware: Hardware
    vllm: VllmPlan | None  # the colocated engine's share of the GPU (None: no colocated engine)
    support: Support | None  # our LM head scores over this support (None: the backend's own head)
    control: str | None = None  # a placebo attempt (cli/train/control.py): shuffled-answers | random-reward

    @property
    def dtype(self) -> str:
        return training_dtype(self.cfg.dtype, self.hardware)

    @property
    def start_step(self) -> int:
        return int(self.resume.name.rpartition("-")[2] or 0) if self.resume else 0

    @property
    def from_adapter(self) -> bool:
        return self.adapter is not None or self.resume is not None

    @property
    def padding_free(self) -> bool:
        """Packed log-prob and loss passes: asked for, and our LM head scores them (the hf backend)."""
        return self.cfg.grpo.padding_free and self.support is not None

    @property
    def trl_engine(self) -> bool:
        """TRL builds a colocated vLLM engine (the hf backend): the vLLM step levers apply to it."""
        return self.backend == "hf" and self.vllm is not None

    def step_levers(self) -> dict[str, Any]:
        """The GPU step's levers as they apply (docs/performance.md "GPU step"); a lever asked for where it
        cannot apply says why."""
        g = self.cfg.grpo
        free: bool | str = self.padding_free
        if g.padding_free and not free:
            free = "off: needs the hf backend's LM head (hf backend, score_rollout_support)"
        engine = "off: needs TRL's colocated vLLM engine (hf backend, --vllm on)"
        return {
            "padding_free": free,
            "vllm_sync": g.vllm_sync if self.trl_engine or g.vllm_sync == "full" else engine,
            "vllm_cudagraph": g.vllm_cudagraph if self.trl_engine or g.vllm_cudagraph == "auto" else engine,
            "vllm_quantization": g.vllm_quantization
            if self.trl_engine or g.vllm_quantization == "none"
            else engine,
            "vllm_async_scheduling": g.vllm_async_scheduling
            if self.trl_engine or g.vllm_async_scheduling == "auto"
            else engine,
        }

    def describe(self) -> dict[str, Any]:
        """The plan as ``grpo grpo --dry-run`` prints it."""
        g, mode = self.cfg.grpo, is_mode(self.cfg.grpo.vllm_is_mode)
        return {
            "backend": self.backend,
            "backend_reason": self.backend_reason,
            "rollouts": _rollout_word(self),
            "start": f"checkpoint {self.resume}" if self.resume else str(self.adapter or "fresh LoRA"),
            "attempt": self.attempt,
            **({"control": self.control} if self.control else {}),
            "checkpoints": str(self.checkpoints),
            "rewards": {r.name: r.weight for r in self.rewards},
            "budget": {"prompt_tokens": self.budget.prompt, "completion_tokens": self.budget.completion,
                       "sequences_per_rollout": self.budget.sequences},
            "vllm_gpu_memory_utilization": self.vllm.utilization if self.vllm else None,
            "trainer_logprobs": _logprobs_word(self),
            "importance_sampling": None if not self.use_vllm or mode == "off" else {
                "mode": mode, "min": g.vllm_is_min, "max": g.vllm_is_max,
            },
            "dynamic_sampling": {"max_retries": g.dynamic_max_retries} if g.dynamic_sampling else None,
            "tools": {"tools": list(self.cfg.tools), "max_tool_calls": g.max_tool_calls,
                      "loop": "TRL tools= (max_tool_calling_iterations)"} if self.cfg.tools else None,
            "unsloth_scoring": dataclasses.asdict(layout) if (layout := self.unsloth_scoring()) else None,
            "dtype": self.dtype,
            "world_size": self.hardware.world,
            "step_levers": self.step_levers(),
        }  # fmt: skip

    def backend_env(self) -> dict[str, str]:
        """Environment the backend reads, set before it is imported (an exported value wins):
        ``grpo.score_rollout_support: false`` turns Unsloth's kept-set scoring off too
        (docs/importance-sampling.md), and a step too big for Unsloth's compiled kept-set scorer turns its
        compile off (:meth:`unsloth_scoring`)."""
        if self.backend == "unsloth" and self.use_vllm and not self.cfg.grpo.score_rollout_support:
            return {UNSLOTH_KEPT_SET_ENV: "0"}
        layout = self.unsloth_scoring()
        return layout.env() if layout else {}

    def unsloth_scoring(self) -> ScoringLayout | None:
        """How Unsloth scores the kept set of truncated vLLM rollouts (:class:`~cli.train.unsloth_scoring.
        ScoringLayout`: in small compiled graphs, or with its compile off); None: Unsloth's own choice."""
        from cli.train.unsloth_scoring import scoring_layout

        g = self.cfg.grpo
        truncated = _rollout_support(self.cfg).truncated
        if self.backend != "unsloth" or not self.use_vllm or not truncated or not g.score_rollout_support:
            return None
        return scoring_layout(g.per_device_batch, g.rollout_steps, self.budget.completion)

    # ---- TRL's GRPOConfig ---------------------------------------------------------------------------
    def trl_args(self, eos_token: str) -> dict[str, Any]:
        """TRL's ``GRPOConfig`` arguments (seed 000's objective and schedule, from the config): the one place
        where our names meet TRL's. ``eos_token``: the loaded tokenizer's (the rollouts stop at it)."""
        g, hw = self.cfg.grpo, self.hardware
        return dict(
            **common_args(self.cfg, g, self.checkpoints, g.max_steps, self.backend, self.dtype, hw),
            per_device_train_batch_size=g.per_device_batch,
            gradient_accumulation_steps=g.grad_accum,
            num_generations=g.gens,
            max_completion_length=self.budget.completion,
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
            reward_weights=[r.weight for r in self.rewards],
            max_grad_norm=g.max_grad_norm,
            report_to=g.report_to,
            # TRL's own tool loop (tools=): the same on HF generate and on colocated or server vLLM.
            **({"max_tool_calling_iterations": g.max_tool_calls} if self.cfg.tools else {}),
            **self._rollout_args(eos_token),
        )

    def _rollout_args(self, eos_token: str) -> dict[str, Any]:
        """The rollouts: a vLLM server, colocated vLLM (Unsloth's engine or TRL's), or none (HF generate)."""
        g = self.cfg.grpo
        if not self.use_vllm:
            return {}
        stops = self.cfg.format_spec().stop_strings(eos_token)
        mode = is_mode(g.vllm_is_mode)
        correction: dict[str, Any] = {"vllm_importance_sampling_correction": mode != "off"}
        if mode != "off":
            correction.update(
                vllm_importance_sampling_mode=mode,
                vllm_importance_sampling_clip_min=g.vllm_is_min,
                vllm_importance_sampling_clip_max=g.vllm_is_max,
            )
        if g.vllm_server:
            # TRL's server mode: rollouts from a `trl vllm-serve` process (started by `grpo serve`), which
            # receives the LoRA-merged weights over NCCL after every optimizer step.
            return {
                "use_vllm": True,
                "vllm_mode": "server",
                "vllm_server_base_url": distributed.server_url(g.vllm_server),
                "generation_kwargs": {"stop": stops, "include_stop_str_in_output": True},
                **correction,
            }
        if self.backend == "unsloth":
            # Seed 000: min_p 0.1, top_p 1.0, top_k -1, stop at EOS and keep it in the output. Unsloth takes
            # vLLM's own SamplingParams (built from this dict by the stage, which may import vLLM).
            params = {
                "min_p": g.min_p, "top_p": g.top_p, "top_k": g.top_k or -1, "seed": self.cfg.seed,
                "stop": stops, "include_stop_str_in_output": True,
            }  # fmt: skip
            layout = self.unsloth_scoring()
            mini = layout.args() if layout else {}
            return {"use_vllm": True, "vllm_sampling_params": params, **mini, **correction}
        # TRL colocate: before each sync it merges the LoRA into the weights (works for DoRA too).
        assert self.vllm is not None  # a colocated engine always has its share planned
        return {
            "use_vllm": True,
            "vllm_mode": "colocate",
            "vllm_gpu_memory_utilization": self.vllm.utilization,
            "generation_kwargs": {"stop": stops, "include_stop_str_in_output": True},
            **correction,
        }


def _logprobs_word(plan: GrpoPlan) -> str:
    if plan.support or plan.backend != "unsloth" or not plan.use_vllm:
        return f"over {plan.support.describe()}" if plan.support else "the backend's own"
    kept = plan.cfg.grpo.score_rollout_support
    over = "the kept set when rollouts are truncated" if kept else "the full vocabulary"
    return f"Unsloth's own, over {over}"


def _rollout_word(plan: GrpoPlan) -> str:
    g = plan.cfg.grpo
    if g.vllm_server:
        return f"vLLM server {g.vllm_server}"
    if not plan.use_vllm:
        return "HF generate"
    return "vLLM (Unsloth fast_inference)" if plan.backend == "unsloth" else "vLLM (TRL colocate)"


def make_plan(
    rd: RunDir,
    cfg: Config,
    launch: Launch,
    *,
    resume: bool,
    allow_dora_merge: bool,
    control: str | None = None,
) -> GrpoPlan:
    """Decide everything (see the module docs); raises :class:`GrpoError` on the first thing that is wrong."""
    from cli.models.resolve import check_model
    from cli.run.preflight import check_run
    from cli.train import backends
    from cli.train.checkpoints import attempt_inputs, check_resume_inputs, plan_attempt
    from cli.train.control import check_resume, rewards_for
    from cli.train.reporters import check_reporter
    from cli.train.rewards import resolve_rewards

    g, child = cfg.grpo, ranks.launched()
    # What it will read, before any work: a damaged file or a model path that is not there is one line now.
    consumes = ("prep", "sft", "filter", *(("grpo",) if resume else ()))
    adapters = [a for a in (rd.sft_adapter,) if a]
    check_run(rd, data=("train.parquet", FILTERED), adapters=adapters, cfg=cfg, consumes=consumes)
    check_model(cfg, rd)
    distributed.check_batch(
        g.per_device_batch, g.gens, ranks.world_size() if child else launch.world, g.rollout_steps
    )
    check_reporter(g.report_to)
    reward_list = resolve_rewards(g.rewards, cfg.format_spec())
    adapter = rd.sft_adapter
    dora = backends.uses_dora(cfg, adapter)
    url = distributed.server_url(g.vllm_server) if g.vllm_server else None
    attempt, attempt_dir, checkpoint = plan_attempt(rd.grpo_dir / "checkpoints", resume)
    if checkpoint is not None:
        check_resume(control, attempt, attempt_dir)
    if checkpoint is not None and not child:
        distributed.check_resume(checkpoint, launch)
        check_resume_inputs(attempt_dir, attempt, attempt_inputs(rd, cfg.format_spec().contract_hash()))
    if launch.wanted and not child:
        distributed.check_plan(launch)
    if url:
        if not child:  # the parent checked it a moment ago
            distributed.check_vllm_server(url)
        distributed.require_vllm("--vllm-server")
    hw = Hardware.probe()
    gpu_vllm = bool(url) or (g.vllm != "off" and _vllm_possible(hw))
    chosen, why = backends.choose_grpo_backend(cfg.backend, gpu_vllm=gpu_vllm)
    if (launch.wanted or url) and chosen != (chosen := _scale_out_backend(cfg.backend, chosen, launch)):
        why = "hf: several processes and TRL's vLLM server train under the hf backend"
    if cfg.tools and chosen != (chosen := backends.tool_backend(cfg.backend, chosen)):
        why = "hf: a tool run trains with TRL's tool loop (the hf backend)"
    if dora and (g.vllm_server or (g.vllm != "off" and (g.vllm == "on" or _vllm_possible(hw)))):
        if chosen != (chosen := _dora_with_vllm(chosen, allow_dora_merge)):
            why = "hf: DoRA reaches vLLM merged into the weights (--allow-dora-merge), TRL colocate's way"
    use_vllm = bool(g.vllm_server) or _decide_vllm(g.vllm, hw)
    if g.dynamic_sampling and (launch.wanted or child):
        raise GrpoError(
            "grpo.dynamic_sampling runs in one process: the ranks of --gpus N cannot retry together"
        )
    rd.require(rd.data_dir / "train.parquet", "data", "prepped data")
    if adapter is None and checkpoint is None:
        err_console.print(
            "[yellow]note:[/] no SFT adapter in this run: GRPO starts from the base model "
            "(`grpo sft` first teaches the format, so rewards vary from the first steps)"
        )
    from cli.run.data import read_stats

    budget = RolloutBudget.of(cfg, read_stats(rd))
    colocated = use_vllm and not g.vllm_server
    return GrpoPlan(
        cfg=cfg, run=rd, launch=launch, backend=chosen, backend_reason=why,
        rewards=rewards_for(control, reward_list, cfg.seed), use_vllm=use_vllm, control=control,
        uses_dora=dora, adapter=adapter, attempt=attempt, checkpoints=attempt_dir, resume=checkpoint,
        budget=budget, hardware=hw, support=_support(cfg, chosen, use_vllm, hw),
        vllm=_vllm_share(cfg, rd, budget, hw) if colocated else None,
    )  # fmt: skip


def _vllm_possible(hw: Hardware) -> bool:
    return hw.cuda and importlib.util.find_spec("vllm") is not None


def _decide_vllm(mode: str, hw: Hardware) -> bool:
    """Rollouts through vLLM? ``auto``: when vLLM is installed and CUDA is present."""
    if mode == "off":
        return False
    if mode == "on" and not _vllm_possible(hw):
        why = (
            "vllm is not installed" if importlib.util.find_spec("vllm") is None else "no CUDA GPU is visible"
        )
        raise GrpoError(f"--vllm on: {why}; use --vllm off (rollouts with HF generate)")
    return _vllm_possible(hw)


def _vllm_share(cfg: Config, rd: RunDir, budget: RolloutBudget, hw: Hardware) -> VllmPlan:
    """vLLM's share of the GPU for this run's rollouts (before the model loads: vLLM starts first)."""
    from cli.infer.vllm_memory import model_shape, plan_vllm
    from cli.models.resolve import resolve_model

    return plan_vllm(
        cfg.grpo.gpu_memory_utilization,
        model_shape(resolve_model(cfg, rd)),
        sequences=budget.sequences,  # TRL generates steps_per_generation batches at once
        prompt_tokens=budget.prompt,
        completion_tokens=budget.completion,
        total_bytes=int(hw.gpu_bytes or 0),
    )


def is_mode(mode: str) -> str:
    """``auto``: per-token truncation (``token_truncate``) on every backend; under Unsloth the per-token and
    per-sequence forms were measured to cost the same (docs/importance-sampling.md)."""
    return "token_truncate" if mode == "auto" else mode


def _support(cfg: Config, backend: str, use_vllm: bool, hw: Hardware) -> Support | None:
    """How our LM head scores the trainer's log-probs, or None for the backend's own head.

    - hf on a CPU: TRL's Triton kernel has no CPU driver; ours is plain torch (full softmax: HF generate
      samples, and without an engine there is no ratio to correct).
    - hf with vLLM: the rollout's own distribution (min_p / top_k / top_p, logits in the weights' dtype),
      so the importance ratio compares like with like (:mod:`cli.train.lm_head`). Not under ZeRO-3 / FSDP,
      where the head's weight is sharded and TRL gathers it itself.
    - unsloth: its own log-probs (over the kept set, automatically, when the rollouts were truncated).
    """
    if backend != "hf":
        return None
    if not hw.cuda:
        return Support()
    if use_vllm and not hw.sharded and cfg.grpo.score_rollout_support:
        return _rollout_support(cfg)
    return None


def _rollout_support(cfg: Config) -> Support:
    """The distribution the rollouts are sampled from (temperature, min_p / top_k / top_p)."""
    g = cfg.grpo
    return Support(temperature=g.temperature, min_p=g.min_p, top_k=g.top_k or 0, top_p=g.top_p)


def _dora_with_vllm(chosen: str, allow_dora_merge: bool) -> str:
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
    return "hf"


def _scale_out_backend(requested: str, chosen: str, plan: Launch) -> str:
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


def announce_attempt(rd: RunDir, setup: GrpoPlan) -> None:
    """Say which attempt this is: resumed, or new beside earlier attempts' checkpoints."""
    from cli.train.checkpoints import attempts, latest_checkpoint

    earlier = {
        n: f
        for n, f in attempts(rd.grpo_dir / "checkpoints").items()
        if n != setup.attempt and latest_checkpoint(f) is not None
    }
    if setup.resume is not None:
        err_console.print(f"grpo: resuming attempt {setup.attempt} from {setup.resume}", soft_wrap=True)
    elif earlier:
        err_console.print(
            f"[yellow]note:[/] new attempt {setup.attempt} (checkpoints → {setup.checkpoints}); "
            f"the checkpoints of attempt{'s' if len(earlier) > 1 else ''} {', '.join(map(str, earlier))} "
            "stay where they are — `grpo grpo --resume` continues the most recent attempt",
            soft_wrap=True,
        )


@contextlib.contextmanager
def undone_unless_saved(rd: RunDir, setup: GrpoPlan, *, enabled: bool = True) -> Iterator[None]:
    """A `grpo grpo` that fails (or is stopped) before its attempt saved a checkpoint leaves the run as it
    was: its config.yaml as before (the failed flags are not remembered) and no empty attempt folder, so
    the next run is the same attempt again (docs/history.md "Hardening, round 1": "the run directory exactly
    as it was")."""
    from cli.train.checkpoints import latest_checkpoint

    config = rd.config_path.read_bytes() if enabled and rd.config_path.is_file() else None
    metrics = rd.metrics_path.stat().st_size if rd.metrics_path.is_file() else None  # rows before this one
    created = setup.checkpoints  # the outermost folder of it that this command creates (grpo/ on a new run)
    while not created.parent.exists():
        created = created.parent
    fresh = not created.exists()
    try:
        yield
    except BaseException:
        if enabled and latest_checkpoint(setup.checkpoints) is None:
            if fresh:
                shutil.rmtree(created, ignore_errors=True)
            _forget_rows(rd, metrics)  # the next run is this attempt again: its rows must not mix in
            with contextlib.suppress(OSError):
                if config is not None:
                    from cli.run.atomic import atomic_write_bytes

                    atomic_write_bytes(rd.config_path, config)
                else:
                    rd.config_path.unlink(missing_ok=True)
        raise


def _forget_rows(rd: RunDir, size: int | None) -> None:
    """metrics.jsonl back to ``size`` bytes (gone when it did not exist): an attempt that saved nothing
    leaves no rows under the attempt number that the next run takes again."""
    with contextlib.suppress(OSError):
        if size is None:
            rd.metrics_path.unlink(missing_ok=True)
        else:
            os.truncate(rd.metrics_path, size)
