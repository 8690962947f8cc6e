"""How Unsloth scores the kept set of truncated vLLM rollouts, sized so that its compiled scorer stays small.

Torch-free: :class:`cli.train.plan.GrpoPlan` maps the layout to Unsloth's ``GRPOConfig`` fields and TRL's
batch arguments (``grpo grpo --dry-run`` shows it as ``unsloth_scoring``).
"""

from __future__ import annotations

from dataclasses import dataclass

SCORING_CHUNKS = 8  # chunks in one of Unsloth's compiled kept-set scoring graphs
CHUNK_TOKENS = 1024  # completion tokens per row in one chunk, at most (the rest: more chunks per row)


@dataclass(frozen=True)
class ScoringLayout:
    """How Unsloth scores the kept set of truncated vLLM rollouts so that its compiled scorer stays small.

    Unsloth 2026.10 scores a kept set with a ``torch.compile(fullgraph=True)`` function that unrolls ``rows x
    multiplier`` chunks (multiplier 4 by default) into one graph, in both passes: the old policy's log-probs
    (no grad, over the whole rollout, in ``unsloth_grpo_mini_batch`` mini-batches: a count, despite the name)
    and the loss (with grad, over one device step's rows, packed into one stream). Left to itself with 128
    rows it unrolls 512 chunks; that first compile was still running after 6.6 min on the H200 (2026-12-04)
    and grows faster than the chunk count (bench/unsloth_scoring_compile.py: 8 chunks 34.8 s, 32 -> 115 s,
    128 -> 574 s on 2 CPU cores). So each graph holds at most ``SCORING_CHUNKS`` chunks:

    - ``multiplier``: chunks per row, one per ``CHUNK_TOKENS`` completion tokens (memory: one chunk's
      float32 logits are rows x tokens x vocabulary);
    - ``rows``: rows per device step, the largest divisor of the configured batch within
      ``SCORING_CHUNKS // multiplier``; ``accumulation`` more gradient-accumulation steps keep the optimizer
      step's completions (TRL still generates them in one rollout);
    - ``mini_batches``: how many mini-batches the old-logprob pass splits the rollout into, an even split
      where a count allows, so that every mini-batch reuses one compiled graph."""

    rows: int
    accumulation: int
    mini_batches: int
    multiplier: int

    def describe(self, per_device: int) -> str:
        split = (
            f"each device step of {per_device} completions runs as {self.accumulation} accumulation steps "
            f"of {self.rows} (the same optimizer step)"
            if self.accumulation > 1
            else f"device steps of {self.rows} completions"
        )
        old = f"{self.mini_batches} mini-batches" if self.mini_batches > 1 else "one pass"
        return (
            f"Unsloth scores the rollouts' kept set in compiled graphs of ≤ {self.rows * self.multiplier} "
            f"chunks: {split}; old log-probs in {old}"
        )


def scoring_layout(per_device: int, rollout_steps: int, completion_tokens: int) -> ScoringLayout:
    """The :class:`ScoringLayout` for ``per_device`` completions a device step, ``rollout_steps`` device
    steps a rollout and completions of at most ``completion_tokens`` tokens."""
    multiplier = max(1, -(-completion_tokens // CHUNK_TOKENS))
    cap = max(1, SCORING_CHUNKS // multiplier)
    rows = max(d for d in range(1, min(cap, per_device) + 1) if per_device % d == 0)
    generated = per_device * rollout_steps
    fewest = -(-generated // cap)
    even = [n for n in range(fewest, -(-generated // max(1, cap // 2)) + 1) if generated % n == 0]
    return ScoringLayout(rows, per_device // rows, even[0] if even else fewest, multiplier)
