"""The trainer's log-probabilities, scored over the distribution the rollouts were sampled from.

TRL computes a completion's per-token log-probs with a fused LM head (``model(..., fused_lm_head=True)``,
installed by ``trl.trainer.utils.add_fused_lm_head``): a Triton kernel over the full softmax of the
logits in float32. That is the wrong number to compare with the rollout engine's:

- **The support.** vLLM samples after ``min_p`` / ``top_k`` / ``top_p`` and, as TRL builds its colocated
  engine (``logprobs_mode="processed_logprobs"``), reports each token's log-prob under that truncated,
  renormalised distribution. Scored over the full vocabulary, every token of the trainer comes out lower
  by log(kept mass): a systematic gap that TRL's sequence-level importance ratio turns into
  exp(-0.045 × length) (docs/importance-sampling.md has the measurements).
  Measured on the 1.5B model: 0.058 nats/token with TRL's head, 0.0089 over the kept set.
- **The logits' precision.** vLLM runs the LM head in the model's dtype (bf16 on a GPU) and only then
  casts to float32; the fused kernel computes float32 logits from the same bf16 inputs. Measured, the
  difference is within noise (0.0089 nats/token either way); this head runs the product in the weights'
  dtype, as vLLM does, because it is the cheaper one.

:func:`install_lm_head` puts our own head in front of TRL's (the same ``fused_lm_head=True`` call, the
same outputs): it runs the LM head in the weights' dtype, then scores each token over the
kept set of the rollout's sampling settings (``Support``), in token chunks under activation
checkpointing so the ``(tokens, vocab)`` logits never exist whole (on a CPU, small batches keep them:
time is what runs short there). The scored token is always counted as
kept (a boundary disagreement stays finite). With no truncation and float32 weights it is the plain
log-softmax, which is also what runs on a CPU, where TRL's Triton kernel has no driver.

Only the hf backend uses it: Unsloth scores its own log-probs, over the kept set when rollouts were
truncated (``unsloth_zoo``'s truncated-support scoring, automatic on CUDA).
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass
from typing import Any

OUTPUTS = ("log_probs", "entropy", "log_sum_sq_probs", "mean_logits", "is_top1")


@dataclass(frozen=True)
class Support:
    """How rollouts were sampled: the trainer scores tokens over the same distribution."""

    temperature: float = 1.0
    min_p: float = 0.0
    top_k: int = 0
    top_p: float = 1.0

    @property
    def truncated(self) -> bool:
        return self.min_p > 0 or self.top_k > 0 or self.top_p < 1

    def describe(self) -> str:
        parts = [f"min_p {self.min_p:g}"] if self.min_p > 0 else []
        parts += [f"top_k {self.top_k}"] if self.top_k > 0 else []
        parts += [f"top_p {self.top_p:g}"] if self.top_p < 1 else []
        return ", ".join(parts) or "the full vocabulary"


def keep_mask(z: Any, targets: Any, support: Support) -> Any:
    """Tokens the sampler could draw (vLLM v1's order: temperature, then min_p, then top_k, then top_p),
    plus each row's target. ``z``: float32 logits already divided by the temperature."""
    import torch

    keep = torch.ones_like(z, dtype=torch.bool)
    if support.min_p > 0:
        # p >= min_p * p_max  <=>  z >= z_max + log(min_p)
        keep &= z >= z.amax(dim=-1, keepdim=True) + math.log(support.min_p)
    if support.top_k > 0 and support.top_k < z.shape[-1]:
        kth = z.masked_fill(~keep, float("-inf")).topk(support.top_k, dim=-1).values[:, -1:]
        keep &= z >= kth
    if support.top_p < 1:
        masked = z.masked_fill(~keep, float("-inf"))
        sorted_z, order = masked.sort(dim=-1, descending=True)
        probs = sorted_z.softmax(dim=-1)
        # keep the smallest prefix whose mass reaches top_p (the first token always)
        before = probs.cumsum(dim=-1) - probs
        keep_sorted = before < support.top_p
        keep &= torch.zeros_like(keep).scatter(-1, order, keep_sorted)
    return keep.scatter(-1, targets[:, None], True)


def _scored_chunk(
    hidden: Any,
    weight: Any,
    bias: Any,
    targets: Any,
    support: Support,
    softcap: float | None,
    logit_scale: float,
    outputs: tuple[str, ...],
) -> tuple[Any, ...]:
    import torch

    # The LM head in the weights' dtype, as the rollout engine runs it, then float32.
    z = torch.nn.functional.linear(hidden.to(weight.dtype), weight, bias).float()
    if logit_scale != 1.0:
        z = z * logit_scale
    if softcap:
        z = softcap * torch.tanh(z / softcap)
    if support.temperature != 1.0:
        z = z / support.temperature
    if support.truncated:
        with torch.no_grad():
            keep = keep_mask(z.detach(), targets, support)
        z = z.masked_fill(~keep, float("-inf"))
    logp = torch.log_softmax(z, dim=-1)
    out = [logp.gather(-1, targets[:, None]).squeeze(-1)]
    if "entropy" in outputs:
        # A logged value, never differentiated: no graph, and a batched dot instead of a (tokens, vocab)
        # product (the entropy was a sixth of a Gemma-3-270M SFT step on the CPU, vocabulary 262,144).
        with torch.no_grad():
            p = logp.exp()  # 0 outside the kept set
            lp = logp.nan_to_num(neginf=0.0) if support.truncated else logp
            out.append(-torch.bmm(p.unsqueeze(1), lp.unsqueeze(2)).reshape(-1))
    if "log_sum_sq_probs" in outputs:
        out.append(torch.logsumexp(2 * logp, dim=-1).detach())
    if "mean_logits" in outputs:
        finite = torch.isfinite(z)
        out.append((z.nan_to_num(neginf=0.0).sum(-1) / finite.sum(-1).clamp(min=1)).detach())
    if "is_top1" in outputs:
        out.append(z.argmax(-1) == targets)
    return tuple(out)


def chunk_rows(vocab: int, cuda: bool) -> int:
    """Tokens per chunk: about 512 MiB of float32 logits on a GPU, 128 MiB on a CPU."""
    budget = (512 if cuda else 128) << 20
    return max(1, budget // (4 * max(vocab, 1)))


# On the CPU, logits up to this size are kept for the backward instead of recomputed: memory is not what
# runs short there, time is (recomputing the head was a sixth of a Gemma-3-270M SFT step, 2 cores).
CPU_KEEP_BYTES = 1 << 30


def recompute(tokens: int, vocab: int, cuda: bool) -> bool:
    """Whether the backward recomputes the chunks' logits (always on a GPU) rather than keeping them."""
    return cuda or tokens * vocab * 4 > CPU_KEEP_BYTES


def score_tokens(
    hidden: Any,
    weight: Any,
    bias: Any,
    targets: Any,
    support: Support,
    *,
    softcap: float | None = None,
    logit_scale: float = 1.0,
    outputs: tuple[str, ...] = ("log_probs",),
) -> dict[str, Any]:
    """Per-token fields (``OUTPUTS`` asked for) of ``targets`` given the final hidden states (tokens, H)."""
    import torch
    from torch.utils.checkpoint import checkpoint

    asked = tuple(k for k in OUTPUTS if k == "log_probs" or k in outputs)
    step = chunk_rows(weight.shape[0], hidden.is_cuda)
    again = recompute(hidden.shape[0], weight.shape[0], hidden.is_cuda)
    parts: list[tuple[Any, ...]] = []
    for start in range(0, max(hidden.shape[0], 1), step):
        h, t = hidden[start : start + step], targets[start : start + step]
        args = (h, weight, bias, t, support, softcap, logit_scale, asked)
        if again and torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad):
            # Recompute the chunk's logits in the backward: they are never kept whole.
            parts.append(checkpoint(_scored_chunk, *args, use_reentrant=False))
        else:
            parts.append(_scored_chunk(*args))
    return {k: torch.cat([p[i] for p in parts]) for i, k in enumerate(asked)}


def install_lm_head(model: Any, support: Support, outputs: tuple[str, ...], *, pack: bool = False) -> None:
    """``model(..., labels=…, fused_lm_head=True)`` scores with :func:`score_tokens` (everything else goes
    to the forward already there). ``model``: the causal LM itself (under PEFT, its base model), as TRL's
    ``add_fused_lm_head`` takes it. ``pack``: the scored passes run padding-free (cli/train/packing.py)."""
    from trl.trainer.utils import FusedCausalLMOutput

    from cli.train.packing import packed_hidden

    previous = model.forward
    text = model.config.get_text_config()
    softcap = getattr(text, "final_logit_softcapping", None)
    scale = getattr(text, "logit_scale", None)
    scale = 1.0 if scale is None else float(scale)

    def forward(
        self: Any,
        *args: Any,
        fused_lm_head: bool = False,
        labels: Any = None,
        shift_labels: Any = None,
        num_items_in_batch: Any = None,
        **kwargs: Any,
    ) -> Any:
        if not fused_lm_head:
            extra = {"labels": labels, "shift_labels": shift_labels, "num_items_in_batch": num_items_in_batch}
            return previous(*args, **kwargs, **{k: v for k, v in extra.items() if v is not None})
        kwargs["use_cache"] = False
        hidden = packed_hidden(self.base_model, args, kwargs) if pack else None
        if hidden is None:  # not packed (off, or a batch that is not TRL's layout)
            hidden = self.base_model(*args, **kwargs).last_hidden_state
        if shift_labels is None:
            hidden, targets = hidden[:, :-1], labels[:, 1:]
        else:
            targets = shift_labels
        head = self.get_output_embeddings()
        hidden, targets = hidden.to(head.weight.device), targets.to(head.weight.device)
        mask = targets != -100
        fields = score_tokens(
            hidden[mask], head.weight, head.bias, targets[mask], support,
            softcap=softcap, logit_scale=scale, outputs=outputs,
        )  # fmt: skip
        full = {k: v.new_zeros(mask.shape).masked_scatter(mask, v) for k, v in fields.items()}
        count = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
        return FusedCausalLMOutput(loss=-full["log_probs"].sum() / count, label_mask=mask, **full)

    model.forward = types.MethodType(forward, model)
