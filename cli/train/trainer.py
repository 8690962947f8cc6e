"""Our trainers: one subclass of the backend's TRL trainer per stage, instead of patches at run time.

``grpo_trainer_class()`` subclasses the ``GRPOTrainer`` the backend provides (TRL's, or Unsloth's
``UnslothGRPOTrainer``, which Unsloth puts in its place when it is imported), ``sft_trainer_class()`` the
``SFTTrainer``. The subclass overrides a few of the trainer's own methods and calls what the stage
attached to it (:class:`Observers`):

- the rollout (``_generate_and_score_completions``): Ctrl-C drops a rollout at once (:mod:`cli.train.live`),
  dynamic sampling refills groups with no reward spread (:mod:`cli.train.dynamic`), and the memory probe
  notes what is resident (the rollout canary, :mod:`cli.train.canary`, reads the logged rows);
- the phase clock (:mod:`cli.train.phases`) around the rollout, the generation, the rewards, the log-prob
  passes, the loss and the whole training step;
- ``_save_checkpoint``: each checkpoint is written under a staging name and renamed when every rank has
  written its part, so a kill at any moment leaves the whole checkpoint or none.

Every name overridden or called here is listed in :data:`GRPO_NAMES` / :data:`SFT_NAMES`, and
:func:`missing_names` checks them against the installed classes: the trainer refuses to start, and a test
fails, if an upgrade of TRL, Unsloth or transformers renamed one — never a silent loss of a feature.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.common import GrpoError

# Methods of TRL's trainers (and of transformers' Trainer below them) that the subclasses override or call.
GRPO_NAMES = (
    "_generate_and_score_completions",
    "_generate",
    "_calculate_rewards",
    "_get_per_token_logps_and_entropies",
    "compute_loss",
    "training_step",
    "_save_checkpoint",
    "_get_output_dir",
)
SFT_NAMES = ("_save_checkpoint", "_get_output_dir")


def missing_names(cls: type, names: tuple[str, ...]) -> list[str]:
    """The names of ``names`` that ``cls`` lacks (or that are no longer callables)."""
    return [n for n in names if not callable(getattr(cls, n, None))]


def _checked(cls: type, names: tuple[str, ...]) -> type:
    gone = missing_names(cls, names)
    if gone:
        where = f"{cls.__module__}.{cls.__qualname__}"
        raise GrpoError(
            f"the installed {where} has no {', '.join(gone)}: this grpo release supports trl 1.15 "
            "(and unsloth 2026.10); install those versions, or upgrade grpo"
        )
    return cls


@dataclass
class Observers:
    """What a stage measures while it trains (the trainer calls the first four, the live view reads them
    all); each one may be absent."""

    interrupt: Any = None  # cli.train.live.Interrupt: Ctrl-C / SIGTERM
    phases: Any = None  # cli.train.phases.PhaseTimes: where a step's time goes
    memory: Any = None  # cli.train.gpu_memory.PhaseMemory: the training part's memory
    refill: Any = None  # cli.train.dynamic.DynamicSampling: groups with no reward spread refilled
    canary: Any = None  # cli.train.canary.RolloutCanary: rollout engine vs trainer (reads the rows)
    tracker: Any = None  # cli.train.rewards.RewardTracker: time in rewards, format hits (read by the view)
    device_peak: Any = None  # cli.train.gpu_memory.DevicePeak: the device's memory (read by the view)
    tools: Any = None  # cli.train.tool_use.ToolRun: the python tool's sandbox and counters (tool runs)

    def timed(self, phase: str) -> contextlib.AbstractContextManager[None]:
        return self.phases.timed(phase) if self.phases is not None else contextlib.nullcontext()


class _StagedCheckpoints:
    """Each ``checkpoint-N`` is written under ``.checkpoint-N.partial/`` and renamed into place once every
    rank has written its part (a SIGKILL during a save once left a 0-byte adapter_config.json and no
    trainer state, and --resume picked that checkpoint and failed)."""

    _staging: str | None = None

    def _get_output_dir(self, trial: Any) -> str:
        if self._staging is not None:
            return self._staging
        return super()._get_output_dir(trial)  # type: ignore[misc]

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        from cli.run.ranks import barrier, is_main

        step = int(self.state.global_step)  # type: ignore[attr-defined]
        parent = Path(self._get_output_dir(trial))
        staging = parent / f".checkpoint-{step}.partial"
        if is_main():
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
        barrier()
        self._staging = str(staging)
        try:
            super()._save_checkpoint(model, trial)  # type: ignore[misc]
        finally:
            self._staging = None
        barrier()  # every rank has written its files (RNG states, DeepSpeed's optimizer shards)
        if is_main():
            final = parent / f"checkpoint-{step}"
            if final.exists():  # the same step saved again (an interrupt right after a save)
                shutil.rmtree(final)
            os.replace(staging / f"checkpoint-{step}", final)
            shutil.rmtree(staging, ignore_errors=True)
        barrier()


def grpo_trainer_class() -> type:
    """``GRPOTrainer`` of the backend imported first (import it after :func:`backends.import_backend`)."""
    from trl import GRPOTrainer

    base = _checked(GRPOTrainer, GRPO_NAMES)

    class Trainer(_StagedCheckpoints, base):  # type: ignore[misc, valid-type]
        """TRL's GRPO trainer, reporting to :class:`Observers` (see the module docs)."""

        def __init__(
            self,
            *args: Any,
            observers: Observers | None = None,
            lm_head: Any = None,
            padding_free: bool = False,
            **kwargs: Any,
        ) -> None:
            super().__init__(*args, **kwargs)
            self.grpo_observers = observers or Observers()
            _own_head(self, lm_head, ("log_probs", "entropy"), pack=padding_free)

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            obs = self.grpo_observers
            with _rollout(obs.interrupt), obs.timed("rollout"):
                out = super()._generate_and_score_completions(inputs)
                if obs.refill is not None:
                    out = obs.refill.refill(self, inputs, out, super()._generate_and_score_completions)
            if obs.memory is not None:
                obs.memory.after_rollout()
            return out

        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            with self.grpo_observers.timed("generate"):
                return super()._generate(*args, **kwargs)

        def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, *args: Any) -> Any:
            tools = self.grpo_observers.tools
            if tools is not None:  # the rewards score the model's own text of a tool conversation
                completions = tools.see(completions)
            with self.grpo_observers.timed("rewards"):
                return super()._calculate_rewards(inputs, prompts, completions, *args)

        def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
            with self.grpo_observers.timed("logprobs"):
                return super()._get_per_token_logps_and_entropies(*args, **kwargs)

        def compute_loss(self, *args: Any, **kwargs: Any) -> Any:
            with self.grpo_observers.timed("loss"):
                return super().compute_loss(*args, **kwargs)

        def training_step(self, *args: Any, **kwargs: Any) -> Any:
            with self.grpo_observers.timed("train_step"):
                return super().training_step(*args, **kwargs)

    Trainer.__qualname__ = Trainer.__name__ = f"Grpo{base.__name__}"
    return Trainer


def sft_trainer_class() -> type:
    """``SFTTrainer`` of the backend imported first, with staged checkpoints."""
    from trl import SFTTrainer

    base = _checked(SFTTrainer, SFT_NAMES)

    class Trainer(_StagedCheckpoints, base):  # type: ignore[misc, valid-type]
        """TRL's SFT trainer with whole-or-nothing checkpoints."""

        def __init__(self, *args: Any, lm_head: Any = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            _own_head(self, lm_head, ("log_probs", "entropy", "is_top1"))

    Trainer.__qualname__ = Trainer.__name__ = f"Grpo{base.__name__}"
    return Trainer


def _own_head(trainer: Any, support: Any, outputs: tuple[str, ...], *, pack: bool = False) -> None:
    """Score log-probs with our LM head (:mod:`cli.train.lm_head`) over ``support``, in front of the one TRL
    installed in ``__init__`` (on the causal LM itself, under PEFT its base model, as TRL does); ``pack``:
    padding-free passes (:mod:`cli.train.packing`)."""
    if support is None:
        return
    from cli.train.lm_head import install_lm_head

    model = trainer.model
    causal = model.get_base_model() if hasattr(model, "get_base_model") else model
    install_lm_head(causal, support, outputs, pack=pack)


@contextlib.contextmanager
def _rollout(interrupt: Any) -> Iterator[None]:
    """Ctrl-C between steps starts no rollout; one during it drops the rollout (no weight has changed)."""
    if interrupt is None:
        yield
        return
    interrupt.before_rollout()
    interrupt.in_rollout += 1
    try:
        yield
    finally:
        interrupt.in_rollout -= 1
