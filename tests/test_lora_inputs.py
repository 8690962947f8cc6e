"""The hf backend's LoRA skips PEFT's input cast to float32 under autocast (cli/train/lora_inputs.py).

A real tiny Qwen2 in bf16 with float32 LoRA weights (PEFT's default), loaded by the backend's own loader:
under bf16 autocast the loss and every LoRA gradient are the same to the bit as PEFT's stock cast gives,
with fewer dtype copies; without autocast the float32 adapters still get their float32 input.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import tiny_qwen2_pad_eos

from cli.config.schema import Config
from cli.train import backends
from cli.train.lora_inputs import CastUnlessAutocast, skip_casts_under_autocast


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_qwen2_pad_eos(tmp_path_factory.mktemp("lora-inputs") / "qwen2")


def _load(model_dir: Path, *, skip: bool):
    import torch

    cfg = Config()
    cfg.model = str(model_dir)
    cfg.dtype = "bf16"
    torch.manual_seed(0)
    model = backends._load_hf(cfg, str(model_dir), backends.lora_settings(cfg, None))
    layers = [m for m in model.modules() if hasattr(m, "cast_input_dtype_enabled") and hasattr(m, "lora_A")]
    if not skip:  # PEFT as it comes
        for m in layers:
            m.cast_input_dtype_enabled = True
    for m in layers:  # a LoRA that has learnt something (lora_B starts at zero)
        torch.nn.init.normal_(m.lora_B["default"].weight, std=0.02)
    return model, layers


def _step(model, ids, *, autocast: bool):
    """One forward and backward: (loss, the LoRA gradients, how many dtype copies torch made)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    model.zero_grad()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    copies = sum(e.count for e in prof.key_averages() if e.key == "aten::_to_copy")
    return loss.detach(), grads, copies


def test_the_loader_sets_the_switch_on_every_lora_layer(model_dir: Path) -> None:
    import torch

    model, layers = _load(model_dir, skip=True)
    assert len(layers) == 2 * 7  # 2 layers × q k v o gate up down
    assert all(isinstance(m.cast_input_dtype_enabled, CastUnlessAutocast) for m in layers)
    # the setting this is for: bf16 base weights, float32 adapters
    assert layers[0].base_layer.weight.dtype == torch.bfloat16
    assert layers[0].lora_A["default"].weight.dtype == torch.float32
    assert bool(layers[0].cast_input_dtype_enabled) is True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert bool(layers[0].cast_input_dtype_enabled) is False
    assert skip_casts_under_autocast(torch.nn.Linear(2, 2)) == 0  # nothing to do without LoRA layers


def _stock_and_ours(model_dir: Path, *, autocast: bool, seed: int) -> tuple[int, int]:
    """The same step with PEFT's cast and with ours: the loss and every LoRA gradient must be equal to the
    bit. Returns the dtype copies (stock, ours)."""
    import torch

    stock, _ = _load(model_dir, skip=False)
    ours, _ = _load(model_dir, skip=True)
    ids = torch.randint(0, stock.config.vocab_size, (2, 24), generator=torch.Generator().manual_seed(seed))
    loss_a, grads_a, copies_a = _step(stock, ids, autocast=autocast)
    # without autocast a skipped cast would raise here: bf16 input, float32 adapter weights
    loss_b, grads_b, copies_b = _step(ours, ids, autocast=autocast)
    assert torch.equal(loss_a, loss_b)
    assert grads_a.keys() == grads_b.keys() and len(grads_a) == 2 * 2 * 7
    for name in grads_a:
        assert torch.equal(grads_a[name], grads_b[name]), name
    return copies_a, copies_b


def test_under_autocast_the_step_is_the_same_to_the_bit_with_fewer_copies(model_dir: Path) -> None:
    copies_a, copies_b = _stock_and_ours(model_dir, autocast=True, seed=1)
    # one input cast per LoRA layer and pass is gone (14 layers)
    assert copies_b <= copies_a - 14, (copies_a, copies_b)


def test_without_autocast_the_float32_adapters_still_get_float32_inputs(model_dir: Path) -> None:
    copies_a, copies_b = _stock_and_ours(model_dir, autocast=False, seed=2)
    assert copies_a == copies_b  # the cast happens as before
