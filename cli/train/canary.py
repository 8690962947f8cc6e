"""The rollout canary: one line, with what to do, when the rollout engine and the trainer disagree.

GRPO with vLLM rollouts is only on-policy when the engine samples from the policy the trainer scores.
TRL measures how far apart they are on every rollout: ``sampling/importance_sampling_ratio/*`` (the ratio
the loss weighs each completion by) and ``sampling/sampling_logp_difference/mean`` (the mean per-token
|trainer − engine| log-prob, on the same tokens). Unsloth's trainer logs the same keys. The canary reads
them from each logged row (no extra forward, no extra call to the engine: it costs nothing) and warns on
two failures:

- **drift**: the ratio's mean leaves [``RATIO_LOW``, ``RATIO_HIGH``]: the loss then weighs completions by
  numbers far from 1 (TRL 1.15's default correction with seed 000's min_p gave 0.004–0.05: docs say why);
- **stale rollouts**: the engine does not sample from the adapter. Started from an adapter (SFT, or a
  checkpoint), the per-token difference is already large at the first step (``FIRST_GAP``: several times
  the numerical floor measured for a healthy engine); started from a fresh LoRA, the difference grows as
  the trainer's weights move while the engine's stay (``TREND`` × its first value, ``TREND_STEPS`` rows
  in a row). Silent base-model rollouts are a known failure of these stacks (unsloth#3802, unsloth#8701).

Each warning is said once (and again only after it cleared), and recorded in the row as ``canary``.
"""

from __future__ import annotations

from typing import Any

from cli.common import finite

RATIO_LOW, RATIO_HIGH = 0.5, 2.0
# Per-token |trainer - engine| log-prob differences. A healthy engine on the same weights sits at the
# bf16 floor (docs/importance-sampling.md: ~0.01-0.03 nats/token); an adapter the engine does not have is
# worth tenths of a nat per token on the format tokens alone.
FIRST_GAP = 0.25
TREND, TREND_FLOOR, TREND_STEPS = 3.0, 0.02, 3

RATIO_KEY = "sampling/importance_sampling_ratio/mean"
GAP_KEY = "sampling/sampling_logp_difference/mean"

HINT_DRIFT = (
    "the rollout engine and the trainer score tokens differently: importance-sampling ratio mean {ratio:.3g} "
    "(per-token difference {gap:.3g}); the loss weighs each completion by that ratio. Check the sampling "
    "settings (min_p/top_p/top_k: the trainer scores the same kept set on the hf backend and under Unsloth), "
    "the dtype (the engine and the trainer must both run {dtype}), or try --vllm off"
)
HINT_FIRST = (
    "the rollout engine's log-probs are {gap:.3g} nats/token from the trainer's at the first step, started "
    "from {start}: the rollouts may come from the base model, not the adapter being trained. Check that "
    "vLLM received the LoRA (unsloth fast_inference, or TRL's colocate sync), or use --vllm off"
)
HINT_TREND = (
    "the rollout engine's log-probs drift away from the trainer's as training goes ({first:.3g} → {gap:.3g} "
    "nats/token over {steps} steps): the engine is not receiving the updated weights; stop the run "
    "(Ctrl-C saves it) and check the vLLM weight sync, or use --vllm off"
)


class RolloutCanary:
    def __init__(self, *, from_adapter: bool, dtype: str = "bf16", warn: Any = None) -> None:
        from cli.run.console import err_console

        self.from_adapter, self.dtype = from_adapter, dtype
        self.first_gap: float | None = None
        self.streak = 0
        self.steps = 0
        self.active: set[str] = set()
        self._warn = warn or (lambda text: err_console.print(f"[yellow]warning:[/] {text}", soft_wrap=True))

    def check(self, row: dict[str, Any]) -> None:
        """Read one logged row; warn, and mark the row, on a failure (see the module docs)."""
        ratio, gap = finite(row.get(RATIO_KEY)), finite(row.get(GAP_KEY))
        if ratio is None and gap is None:
            return  # no engine log-probs (HF generate, or the correction is off)
        self.steps += 1
        fired: list[str] = []
        if ratio is not None and not RATIO_LOW <= ratio <= RATIO_HIGH:
            fired.append("drift")
            self._say("drift", HINT_DRIFT.format(ratio=ratio, gap=gap or 0.0, dtype=self.dtype))
        else:
            self.active.discard("drift")
        if gap is not None:
            if self.first_gap is None:
                self.first_gap = gap
                if self.from_adapter and gap > FIRST_GAP:
                    fired.append("stale")
                    start = "an adapter"
                    self._say("stale", HINT_FIRST.format(gap=gap, start=start))
            elif gap > TREND * self.first_gap + TREND_FLOOR:
                self.streak += 1
                if self.streak >= TREND_STEPS:
                    fired.append("stale")
                    self._say("stale", HINT_TREND.format(first=self.first_gap, gap=gap, steps=self.steps))
            else:
                self.streak = 0
                if "stale" in self.active and gap <= FIRST_GAP:
                    self.active.discard("stale")
        if fired:
            row["canary"] = ",".join(fired)

    def _say(self, kind: str, text: str) -> None:
        if kind not in self.active:
            self.active.add(kind)
            self._warn(text)
