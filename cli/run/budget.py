"""A rollout's token budget: the one rule for the prompt cut, the completion budget and the batch.

`grpo prep` keeps a prompt only if it leaves room for its completion (:func:`completion_room`) and records
the cut (seed 000: the 90th percentile of the kept prompts' lengths) in ``data/stats.json``. From there
every stage that generates as GRPO does reads the same :class:`RolloutBudget`: `grpo grpo` (the prompts
over the cut are dropped, the completions get what the cut leaves), `grpo filter` (samples as GRPO will)
and the vLLM memory plan (the engine's KV cache holds ``sequences`` × (prompt + completion) tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError

if TYPE_CHECKING:
    from cli.config.schema import Config


def completion_room(max_seq_length: int, max_completion_length: int | None) -> int:
    """Tokens a prompt must leave for its completion at prep: grpo.max_completion_length, else a quarter of
    the context (one 5 MB question was once kept as a 2.5 M-token prompt at max_seq_length 2048)."""
    return int(max_completion_length or max(max_seq_length // 4, 1))


def sft_length_cap(max_seq_length: int, max_example_tokens: int = 0) -> int:
    """Seed 000 stage 1: whole format examples up to half the context (``sft.max_example_tokens`` lower)."""
    cap = max_seq_length // 2
    return min(cap, max_example_tokens) if max_example_tokens else cap


@dataclass(frozen=True)
class RolloutBudget:
    """Tokens of one rollout: the prompt cut, the completion budget, and the sequences generated at once."""

    prompt: int  # prompts longer than this are not trained on
    completion: int  # completions stop here (TRL's max_completion_length)
    sequences: int  # completions one generation call makes per device (batch × steps_per_generation)

    @classmethod
    def of(
        cls,
        cfg: Config,
        stats: dict[str, Any],
        *,
        completion: int | None = None,
        flag: str = "--max-completion-length",
    ) -> RolloutBudget:
        """The budget of ``cfg`` over prep's ``stats``: the cut is grpo.max_prompt_length, else prep's, else
        half the context; the completion budget is ``completion`` (a command's own flag, named ``flag``),
        else grpo.max_completion_length, else what the cut leaves of ``max_seq_length``."""
        g = cfg.grpo
        prompt = int(g.max_prompt_length or stats.get("max_prompt_length") or cfg.max_seq_length // 2)
        budget = int(completion or g.max_completion_length or (cfg.max_seq_length - prompt))
        if budget <= 0:
            raise GrpoError(
                f"max_seq_length {cfg.max_seq_length} leaves no room for completions after prompts of "
                f"{prompt} tokens: raise max_seq_length or set {flag}"
            )
        return cls(prompt=prompt, completion=budget, sequences=g.per_device_batch * g.rollout_steps)

    @property
    def kv_tokens(self) -> int:
        return max(1, self.sequences) * max(1, self.prompt + self.completion)
