"""cli/train/packing.py: the padding-free log-prob and loss passes give the padded passes' numbers.

A tiny random Qwen2 (float32, built in-process) with a LoRA adapter, scored the way TRL's GRPO trainer
scores a step: prompts left-padded, completions right-padded and cut after their EOS, labels only on the
completion, ``model(..., labels=…, fused_lm_head=True)`` through our LM head. Packed and padded, on sdpa
and eager: the same per-token log-probs, the same loss, the same LoRA gradients.
"""

from __future__ import annotations

import pytest

from cli.train.lm_head import Support, install_lm_head
from cli.train.packing import first_fit_rows, plan_packing


def _model(attn: str, seed: int = 0):  # noqa: ANN202
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False,
        attn_implementation=attn,
    )  # fmt: skip
    model = Qwen2ForCausalLM(config).float()
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj", "down_proj"])
    model = get_peft_model(model, lora)
    for name, p in model.named_parameters():  # LoRA B starts at 0: make the adapter count
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.2)
    return model


def _trl_batch(seed: int = 1):  # noqa: ANN202
    """TRL's layout: (rows, prompt + completion), prompt left-padded, completion right-padded."""
    import torch

    g = torch.Generator().manual_seed(seed)
    prompt_lens, completion_lens, p_width, c_width = [5, 2, 3, 4, 7, 2], [11, 4, 13, 1, 2, 13], 9, 13
    rows = len(prompt_lens)
    ids = torch.randint(1, 97, (rows, p_width + c_width), generator=g)
    mask = torch.zeros(rows, p_width + c_width, dtype=torch.long)
    for r, (p, c) in enumerate(zip(prompt_lens, completion_lens, strict=True)):
        mask[r, p_width - p : p_width + c] = 1
    ids = ids.masked_fill(mask == 0, 0)  # the pad id
    return ids, mask, c_width


def _score(model, ids, mask, keep: int, *, pack: bool, support: Support):  # noqa: ANN001, ANN202
    """What TRL's `_get_per_token_logps_and_entropies` does, through our head."""
    install_lm_head(model.get_base_model(), support, ("log_probs", "entropy"), pack=pack)
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-keep] = -100
    # the Nones as the trainer's PEFT model passes them on (inputs_embeds, output_*, return_dict)
    nones = dict(inputs_embeds=None, output_attentions=None, output_hidden_states=None, return_dict=None)
    out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True, **nones)
    return out.log_probs[:, -keep:], out.entropy[:, -keep:]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("support", [Support(), Support(min_p=0.1)], ids=["full", "min_p"])
def test_packed_pass_matches_the_padded_pass(
    attn: str, support: Support, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from cli.train import packing

    unpacked = []  # the packed pass really ran (not the padded fallback)
    real_unpack = packing.unpack
    monkeypatch.setattr(packing, "unpack", lambda h, p: unpacked.append(h.shape) or real_unpack(h, p))
    ids, mask, keep = _trl_batch()
    completion = mask[:, -keep:].bool()
    results = {}
    for pack in (False, True):
        model = _model(attn)
        logps, entropy = _score(model, ids, mask, keep, pack=pack, support=support)
        # a GRPO-shaped loss: per-token log-probs weighed by an advantage per row, masked
        adv = torch.linspace(-1, 1, ids.shape[0])[:, None]
        loss = -(logps * adv * completion).sum() / completion.sum()
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results[pack] = (logps.detach(), entropy.detach(), loss.detach(), grads)
    assert len(unpacked) == 1 and unpacked[0][0] < ids.shape[0]  # one packed pass, fewer rows
    (lp0, en0, loss0, g0), (lp1, en1, loss1, g1) = results[False], results[True]
    delta = (lp1 - lp0)[completion].abs().max().item()
    print(
        f"{attn} {support.describe()}: max |Δ log p| {delta:.2e}, loss diff {abs(loss1 - loss0).item():.2e}"
    )
    assert delta < 1e-5, f"max |Δ log p| {delta:.2e}"
    assert torch.all(lp1[~completion] == 0)  # padding is never scored
    assert (en1 - en0)[completion].abs().max() < 1e-5
    assert abs(loss1.item() - loss0.item()) < 1e-6
    assert g0.keys() == g1.keys() and any("lora_A" in n for n in g0)
    for name in g0:
        assert torch.allclose(g0[name], g1[name], atol=1e-5, rtol=1e-4), name


def test_packing_cuts_the_padding() -> None:
    ids, mask, _ = _trl_batch()
    packing = plan_packing(ids, mask, single_row=False)
    assert packing is not None
    real = int(mask.sum())
    assert packing.real_tokens == real
    # rows no longer than the longest sequence, and fewer slots than the padded batch
    assert packing.input_ids.shape[1] == int(mask.sum(1).max())
    assert packing.input_ids.numel() < ids.numel()
    one = plan_packing(ids, mask, single_row=True)
    assert one is not None and one.input_ids.shape == (1, real)
    # each sequence's positions restart at 0 (as the rollout engine numbers them)
    assert one.position_ids[0, 0] == 0 and int((one.position_ids[0] == 0).sum()) == ids.shape[0]


def test_a_batch_that_is_not_trl_layout_is_not_packed() -> None:
    import torch

    ids, mask, _ = _trl_batch()
    holed = mask.clone()
    holed[0, -5] = 0 if holed[0, -6] and holed[0, -4] else holed[0, -5]
    holed[2, 10] = 0  # a hole inside row 2's run
    assert plan_packing(ids, holed, single_row=False) is None
    assert plan_packing(ids, torch.zeros_like(mask), single_row=False) is None  # an empty row
    assert plan_packing(ids, None, single_row=False) is None


def test_first_fit_rows_keep_every_sequence_whole() -> None:
    lengths = [7, 3, 5, 2, 7, 1, 4]
    rows = first_fit_rows(lengths, 7)
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in row) <= 7 for row in rows)
    assert len(rows) == 5  # 29 tokens: 7 | 7 | 5+2 | 4+3 | 1
    assert first_fit_rows([], 4) == []


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_in_bf16_packed_and_padded_differ_by_bf16_noise(attn: str) -> None:
    """In bf16 the two passes round differently; their difference is no larger than bf16's own (the padded
    bf16 pass against float32), as the GPU runs them (on the tiny model: max 0.0018-0.0025 nats both)."""
    import torch

    ids, mask, keep = _trl_batch()
    completion = mask[:, -keep:].bool()
    with torch.no_grad():
        ref = _score(_model(attn), ids, mask, keep, pack=False, support=Support(min_p=0.1))[0]
        padded, packed = (
            _score(_model(attn).to(torch.bfloat16), ids, mask, keep, pack=p, support=Support(min_p=0.1))[
                0
            ].float()
            for p in (False, True)
        )
    noise = (padded - ref)[completion].abs().max().item()
    delta = (packed - padded)[completion].abs().max().item()
    assert 0 < noise < 0.05 and delta <= 2 * noise, (delta, noise)
