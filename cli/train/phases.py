"""Where a GRPO step's time goes: generation, weight hand-off, rewards, log-prob passes, backward.

``PhaseTimes.wrap(trainer)`` replaces a few bound methods on the trainer instance (and on its vLLM
engine, when there is one) with timed versions; each step's seconds per phase are taken by the live view
into ``logs/metrics.jsonl`` as ``phase_<name>_s``. Phases nest (``generate`` is inside ``rollout``),
so they are inclusive times, not a partition:

- ``rollout``    ``_generate_and_score_completions``: everything before the loss (the next three, plus
                 tokenising, the old log-prob pass of the importance-sampling correction, advantages);
- ``generate``   TRL's vLLM generation step (``vllm_generation.generate``: weight hand-off, standby
                 wake/sleep, prefill + decode), or the HF model's ``generate`` without vLLM;
- ``decode``     the vLLM engine's own ``generate`` (prefill + decode of the whole generation batch);
- ``wake_sleep`` vLLM standby: releasing and re-mapping the KV cache around each generation;
- ``weight_sync`` handing the current weights to vLLM (Unsloth ``load_lora``, TRL's ``sync_weights``; the
                 latter wakes vLLM's sleeping weights first, so it overlaps ``wake_sleep``);
- ``rewards``    ``_calculate_rewards`` (all reward functions);
- ``logprobs``   every ``_get_per_token_logps_and_entropies`` call (the old-policy pass in the rollout and
                 the forward of the loss);
- ``loss``       ``compute_loss`` (the forward with gradients);
- ``train_step`` ``training_step`` (rollout + loss + backward); ``backward`` is derived as
                 ``train_step - rollout - loss``.

On CUDA each timed call is bracketed by ``torch.cuda.synchronize()`` so a phase owns its kernels; that is a
handful of synchronisations per step, next to the many the trainer already makes (``.item()`` calls).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

# (phase, attribute path on the trainer). A path that does not exist on this trainer is skipped.
TRAINER_PHASES: tuple[tuple[str, str], ...] = (
    ("rollout", "_generate_and_score_completions"),
    ("rewards", "_calculate_rewards"),
    ("logprobs", "_get_per_token_logps_and_entropies"),
    ("loss", "compute_loss"),
    ("train_step", "training_step"),
    ("weight_sync", "_unsloth_load_lora"),
    ("weight_sync", "_move_model_to_vllm"),
)
# TRL >= 1.x keeps vLLM behind ``trainer.vllm_generation`` (its ``.llm`` is the engine; Unsloth's
# fast_inference puts its own engine there); older TRL and Unsloth's patched trainers use ``trainer.llm``.
GENERATION_PHASES: tuple[tuple[str, str], ...] = (
    ("generate", "generate"),
    ("weight_sync", "sync_weights"),
    ("weight_sync", "_unsloth_load_lora"),
)
ENGINE_PHASES: tuple[tuple[str, str], ...] = (
    ("decode", "generate"),
    ("wake_sleep", "wake_up"),
    ("wake_sleep", "sleep"),
)


class PhaseTimes:
    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._sync = sync
        self._depth: dict[str, int] = defaultdict(int)
        self.wrapped: list[str] = []

    @staticmethod
    def cuda_sync() -> Callable[[], None] | None:
        import torch

        return torch.cuda.synchronize if torch.cuda.is_available() else None

    def timed(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # A phase re-entered from inside itself (a method calling its own wrapped twin) counts once.
            outer = self._depth[phase] == 0
            self._depth[phase] += 1
            if outer and self._sync is not None:
                self._sync()
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if outer:
                    if self._sync is not None:
                        self._sync()
                    self.seconds[phase] += time.perf_counter() - t0
                    self.calls[phase] += 1
                self._depth[phase] -= 1

        wrapper._grpo_phase = phase  # type: ignore[attr-defined]
        return wrapper

    def wrap_attr(self, obj: Any, name: str, phase: str) -> bool:
        fn = getattr(obj, name, None)
        if fn is None or not callable(fn) or hasattr(fn, "_grpo_phase"):
            return False
        try:
            setattr(obj, name, self.timed(phase, fn))
        except (AttributeError, TypeError):
            return False
        self.wrapped.append(f"{phase}:{name}")
        return True

    def wrap(self, trainer: Any) -> PhaseTimes:
        for phase, name in TRAINER_PHASES:
            self.wrap_attr(trainer, name, phase)
        holder = getattr(trainer, "vllm_generation", None)
        if holder is not None:
            for phase, name in GENERATION_PHASES:
                self.wrap_attr(holder, name, phase)
        engines = {
            id(e): e for e in (getattr(trainer, "llm", None), getattr(holder, "llm", None)) if e is not None
        }
        for engine in engines.values():
            for phase, name in ENGINE_PHASES:
                self.wrap_attr(engine, name, phase)
        if not engines:
            model = getattr(trainer, "model", None)
            if model is not None:
                self.wrap_attr(model, "generate", "generate")
        return self

    def take(self) -> dict[str, float]:
        """This step's ``phase_<name>_s`` (and the derived ``phase_backward_s``); resets the counters."""
        out = {f"phase_{k}_s": round(v, 4) for k, v in self.seconds.items()}
        s = self.seconds
        if "train_step" in s:
            rest = s["train_step"] - s.get("rollout", 0.0) - s.get("loss", 0.0)
            out["phase_backward_s"] = round(max(rest, 0.0), 4)
        self.seconds.clear()
        self.calls.clear()
        return out
