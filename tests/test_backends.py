"""Tests for cli/train/backends.py."""

from __future__ import annotations


def test_torch_logprob_stand_in_matches_log_softmax() -> None:
    """The CPU stand-in for TRL's Triton kernel: same log-probs/entropy, and gradients flow."""
    import torch

    from cli.train.backends import _TorchChunkedLogProb

    torch.manual_seed(0)
    hidden = torch.randn(7, 16, requires_grad=True)
    weight = torch.randn(50, 16, requires_grad=True)
    targets = torch.randint(0, 50, (7,))
    lp, ent, lssp, mean, top1 = _TorchChunkedLogProb.apply(
        hidden, weight, None, targets, 0.7, 4096, None, 1.0, ("log_probs", "entropy", "is_top1")
    )
    logits = (hidden @ weight.t()) / 0.7
    ref = torch.log_softmax(logits, -1)
    assert torch.allclose(lp, ref.gather(-1, targets[:, None]).squeeze(-1), atol=1e-5)
    assert torch.allclose(ent, -(ref.exp() * ref).sum(-1), atol=1e-5)
    assert lssp is None and mean is None
    assert torch.equal(top1, logits.argmax(-1) == targets)
    lp.sum().backward()
    assert hidden.grad is not None and weight.grad is not None
