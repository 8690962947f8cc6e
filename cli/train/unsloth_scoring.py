"""How Unsloth scores the kept set of truncated vLLM rollouts: in small compiled graphs, or with compile off.

Torch-free: :class:`cli.train.plan.GrpoPlan` maps the layout to Unsloth's ``GRPOConfig`` fields and the
environment Unsloth reads on import (``grpo grpo --dry-run`` shows it as ``unsloth_scoring``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

SCORING_CHUNKS = 8  # chunks in one of Unsloth's compiled kept-set scoring graphs, at most
CHUNK_TOKENS = 1024  # completion tokens per row in one chunk, at most (the rest: more chunks per row)
COMPILE_ENV = "UNSLOTH_COMPILE_DISABLE"  # read by Unsloth when it is imported


@dataclass(frozen=True)
class ScoringLayout:
    """How Unsloth scores the kept set of truncated vLLM rollouts.

    Unsloth 2026.10 scores a kept set with a ``torch.compile(fullgraph=True)`` function that unrolls ``rows x
    multiplier`` chunks (multiplier 4 by default) into one graph, in both passes: the old policy's log-probs
    (no grad, over the whole rollout, in ``unsloth_grpo_mini_batch`` mini-batches: a count, despite the name)
    and the loss (with grad, over one device step's rows packed into one stream, whatever the count). With
    128 rows it unrolls 512 chunks; that first compile was still running after 6.6 min on the H200, and the
    compile grows faster than the chunk count (bench/gpu/unsloth_scoring_compile.py: 8 chunks 34.8 s,
    32 -> 115 s, 128 -> 574 s on 2 CPU cores). Measured on the H200 with Qwen2.5-Coder-1.5B at 128 completions
    a step (bench/learning-gpu.md@ea4c471, rounds 12-13), same prompts:

    - split into 16 accumulation steps of 8 rows, compiled (8 chunks a graph): first step 144 s, then 14.0
      and 16.2 s at steps 3-4 (the loss and backward 3x as long as in one pass);
    - one pass with Unsloth's compile off: first step 31.7 s, then 8.5 and 6.4 s.

    So a device step whose rows fit one small graph (``rows x multiplier <= SCORING_CHUNKS``) is scored
    compiled, with one chunk per ``CHUNK_TOKENS`` completion tokens (``multiplier``) and the old-logprob pass
    in ``mini_batches`` of at most as many rows (an even split where a count allows, so that every
    mini-batch reuses one graph); a bigger one runs with Unsloth's compile off (``compiled`` False)."""

    compiled: bool
    rows: int  # completions in one device step
    mini_batches: int  # the old-logprob pass's (compiled only)
    multiplier: int  # chunks per row when compiled (Unsloth's own, off the compiled path: 4)

    def args(self) -> dict[str, int]:
        """Unsloth's ``GRPOConfig`` fields for this layout."""
        if not self.compiled:
            return {}
        return {
            "unsloth_grpo_mini_batch": self.mini_batches,
            "unsloth_logit_chunk_multiplier": self.multiplier,
        }

    def env(self) -> dict[str, str]:
        """The environment Unsloth must see when it is imported."""
        return {} if self.compiled else {COMPILE_ENV: "1"}

    def describe(self, environ: Mapping[str, str] | None = None) -> str:
        """The stage's line about it; ``environ`` (the process's, by default): an exported
        ``UNSLOTH_COMPILE_DISABLE`` wins over the plan's, and the line says so."""
        exported = (os.environ if environ is None else environ).get(COMPILE_ENV)
        if not self.compiled and exported is not None and exported not in ("1", "partial"):  # Unsloth's "off"
            return (
                f"{COMPILE_ENV}={exported} is exported: Unsloth compiles its kept-set scorer, "
                f"{self.rows * 4} chunks of a {self.rows}-completion step in one graph "
                "(minutes on the first step)"
            )
        if self.compiled:
            old = f"{self.mini_batches} mini-batches" if self.mini_batches > 1 else "one pass"
            chunks = self.rows * self.multiplier
            return (
                f"Unsloth scores the rollouts' kept set in compiled graphs of ≤ {chunks} chunks "
                f"(old log-probs in {old})"
            )
        fits = SCORING_CHUNKS // self.multiplier
        return (
            f"Unsloth's torch.compile is off for this run: its kept-set scorer would unroll "
            f"{self.rows * 4} chunks of a {self.rows}-completion step into one graph (minutes to compile, "
            f"and split steps ran 2x slower); batch_size ≤ {fits} keeps it compiled"
        )


def scoring_layout(per_device: int, rollout_steps: int, completion_tokens: int) -> ScoringLayout:
    """The :class:`ScoringLayout` for ``per_device`` completions a device step, ``rollout_steps`` device
    steps a rollout and completions of at most ``completion_tokens`` tokens."""
    multiplier = max(1, -(-completion_tokens // CHUNK_TOKENS))
    cap = max(1, SCORING_CHUNKS // multiplier)
    if per_device > cap:
        return ScoringLayout(compiled=False, rows=per_device, mini_batches=0, multiplier=multiplier)
    generated = per_device * rollout_steps
    fewest = -(-generated // cap)
    even = [n for n in range(fewest, -(-generated // max(1, cap // 2)) + 1) if generated % n == 0]
    return ScoringLayout(True, per_device, even[0] if even else fewest, multiplier)
