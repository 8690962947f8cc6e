"""cli/train/lm_head.py: the trainer's log-probs over the rollouts' own distribution.

Checked against the plain reference (the full logits, masked as vLLM's sampler masks them, then
log_softmax), values and gradients, and on the tests' tiny Qwen3 through `model(..., fused_lm_head=True)`.
"""

from __future__ import annotations

import math

import pytest

from cli.train.lm_head import Support, keep_mask, score_tokens


def _reference(hidden, weight, targets, support: Support):  # noqa: ANN001, ANN202
    """vLLM v1's processed log-probs, written the plain way: probabilities, thresholds, renormalise."""
    import torch

    z = (hidden @ weight.t()) / support.temperature
    p = torch.softmax(z, -1)
    keep = torch.ones_like(z, dtype=torch.bool)
    if support.min_p > 0:
        keep &= p >= support.min_p * p.amax(-1, keepdim=True)
    if support.top_k > 0:
        kth = z.masked_fill(~keep, -math.inf).topk(support.top_k, -1).values[:, -1:]
        keep &= z >= kth
    if support.top_p < 1:
        q = torch.softmax(z.masked_fill(~keep, -math.inf), -1)
        order = q.argsort(-1, descending=True)
        before = q.gather(-1, order).cumsum(-1) - q.gather(-1, order)
        keep &= torch.zeros_like(keep).scatter(-1, order, before < support.top_p)
    keep = keep.scatter(-1, targets[:, None], True)
    logp = torch.log_softmax(z.masked_fill(~keep, -math.inf), -1)
    return logp.gather(-1, targets[:, None]).squeeze(-1)


@pytest.mark.parametrize(
    "support",
    [
        Support(),  # the CPU head: the plain log-softmax
        Support(temperature=0.7),
        Support(min_p=0.1),  # seed 000's rollouts
        Support(temperature=1.3, min_p=0.05, top_k=7),
        Support(top_p=0.8),
    ],
    ids=["full", "temperature", "min_p", "min_p+top_k", "top_p"],
)
def test_scores_match_the_reference_values_and_gradients(support: Support) -> None:
    import torch

    torch.manual_seed(0)
    hidden = torch.randn(37, 16, dtype=torch.float64).float().requires_grad_(True)
    weight = (torch.randn(50, 16) * 2).requires_grad_(True)
    targets = torch.randint(0, 50, (37,))
    ours = score_tokens(hidden, weight, None, targets, support, outputs=("log_probs", "entropy", "is_top1"))
    ref = _reference(hidden, weight, targets, support)
    assert torch.allclose(ours["log_probs"], ref, atol=1e-5), (ours["log_probs"] - ref).abs().max()
    assert torch.all(ours["log_probs"] <= 1e-6) and torch.all(torch.isfinite(ours["entropy"]))
    # the entropy of the distribution scored (the kept set's, renormalised), a logged value with no graph
    logits = (hidden @ weight.t()) / support.temperature
    kept = keep_mask(logits, targets, support)
    q = torch.softmax(logits.masked_fill(~kept, -math.inf), -1)
    entropy = -(q * q.clamp_min(1e-30).log()).sum(-1)
    assert torch.allclose(ours["entropy"], entropy, atol=1e-4) and not ours["entropy"].requires_grad
    (g_ours,) = torch.autograd.grad(ours["log_probs"].sum(), hidden)
    (g_ref,) = torch.autograd.grad(ref.sum(), hidden)
    assert torch.allclose(g_ours, g_ref, atol=1e-5)
    if (
        support.truncated
    ):  # the kept set's mass is below 1: every token scores at least its full-softmax value
        full = _reference(hidden, weight, targets, Support(temperature=support.temperature))
        assert torch.all(ours["log_probs"] >= full - 1e-6) and torch.any(ours["log_probs"] > full + 1e-3)


def test_min_p_keeps_what_the_sampler_keeps_and_always_the_target() -> None:
    import torch

    z = torch.log(torch.tensor([[0.5, 0.3, 0.049, 0.151], [0.9, 0.05, 0.03, 0.02]]))
    keep = keep_mask(z, torch.tensor([2, 3]), Support(min_p=0.1))
    # row 0: p >= 0.05 keeps 0.5, 0.3, 0.151 (0.049 only as the scored token); row 1: only 0.9 (+ the target)
    assert keep.tolist() == [[True, True, True, True], [True, False, False, True]]


def test_chunks_do_not_change_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from cli.train import lm_head

    torch.manual_seed(1)
    hidden, weight, targets = torch.randn(20, 8), torch.randn(30, 8), torch.randint(0, 30, (20,))
    whole = score_tokens(hidden, weight, None, targets, Support(min_p=0.2))["log_probs"]
    monkeypatch.setattr(lm_head, "chunk_rows", lambda vocab, cuda: 3)  # 7 chunks, the last of 2 rows
    assert torch.allclose(score_tokens(hidden, weight, None, targets, Support(min_p=0.2))["log_probs"], whole)


def test_installed_head_scores_the_tiny_model(tiny_model_dir) -> None:  # noqa: ANN001
    """`model(..., fused_lm_head=True)` through our head gives the model's own log-softmax (full support)."""
    import torch
    from transformers import AutoModelForCausalLM

    from cli.train.lm_head import install_lm_head

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ids = torch.randint(0, model.config.vocab_size, (2, 9))
    labels = ids.clone()
    labels[:, :4] = -100  # only the completion is scored, as TRL asks
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, :-1]
    install_lm_head(model, Support(), ("log_probs", "entropy"))
    out = model(input_ids=ids, labels=labels, fused_lm_head=True)
    ref = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    mask = labels[:, 1:] != -100
    assert torch.equal(out.label_mask, mask)
    assert torch.allclose(out.log_probs[mask], ref[mask], atol=1e-5)
    assert torch.all(out.log_probs[~mask] == 0)
    assert torch.allclose(out.loss, -ref[mask].sum() / mask.sum(), atol=1e-5)
    assert model(input_ids=ids).logits.shape == (
        2,
        9,
        model.config.vocab_size,
    )  # the plain forward is untouched
