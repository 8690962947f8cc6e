"""Where a GRPO step's time goes: rollout, generation, rewards, log-prob passes, loss, backward.

The trainer (:mod:`cli.train.trainer`) times its own methods with :meth:`PhaseTimes.timed`; each step's
seconds per phase are taken by the live view into ``logs/metrics.jsonl`` as ``phase_<name>_s``. Phases
nest (``generate`` is inside ``rollout``), so they are inclusive times, not a partition:

- ``rollout``    the trainer's rollout (``_generate_and_score_completions``): everything before the loss
                 (the next three, plus tokenising, the old log-prob pass of the importance-sampling
                 correction, advantages, dynamic sampling's refills);
- ``generate``   the completions themselves (``_generate``): vLLM's weight hand-off, standby wake/sleep,
                 prefill and decode, or HF ``generate`` without vLLM;
- ``rewards``    all reward functions (``_calculate_rewards``);
- ``logprobs``   every ``_get_per_token_logps_and_entropies`` call (the old-policy pass in the rollout and
                 the forward of the loss);
- ``loss``       ``compute_loss`` (the forward with gradients);
- ``train_step`` ``training_step`` (rollout + loss + backward); ``backward`` is derived as
                 ``train_step - rollout - loss``.

On CUDA each timed call is bracketed by ``torch.cuda.synchronize()`` so a phase owns its kernels; that is a
handful of synchronisations per step, next to the many the trainer already makes (``.item()`` calls).
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Callable, Iterator

PHASES = ("rollout", "generate", "rewards", "logprobs", "loss", "train_step")


class PhaseTimes:
    def __init__(self, sync: Callable[[], None] | None = None) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._sync = sync
        self._depth: dict[str, int] = defaultdict(int)

    @staticmethod
    def cuda_sync() -> Callable[[], None] | None:
        import torch

        return torch.cuda.synchronize if torch.cuda.is_available() else None

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Count the time inside as ``phase``; a phase re-entered from inside itself counts once."""
        outer = self._depth[phase] == 0
        self._depth[phase] += 1
        if outer and self._sync is not None:
            self._sync()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if outer:
                if self._sync is not None:
                    self._sync()
                self.seconds[phase] += time.perf_counter() - t0
                self.calls[phase] += 1
            self._depth[phase] -= 1

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
