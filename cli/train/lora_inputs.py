"""LoRA inputs in the compute dtype under autocast (the hf backend).

PEFT keeps a LoRA's weights in float32 when the base model is bf16 (``autocast_adapter_dtype``), and each
LoRA layer casts its input to the weights' dtype before ``lora_A`` (``x.to(float32)``: a copy of the whole
activation). Under bf16 autocast, which is how the trainer runs every forward on a GPU (accelerate wraps
the model's forward; TRL's log-prob passes enter ``accelerator.autocast()`` themselves), ``lora_A`` then
casts that float32 copy straight back to bf16: two full-size copies per LoRA layer and pass, for nothing,
since bf16 → float32 → bf16 is exact. The H200 profile of a 1.5B GRPO step (bench/gpu/README.md, 2026-12-04)
put the first of them at 431 ms of the 3.98 s of kernels (1,585 casts) and the casts back in a further
216 ms.

So the cast is skipped exactly while autocast is on for the input's device, and kept otherwise (HF
``generate`` runs the base model's forward without autocast: there the float32 weights need the float32
input). The result is the same to the bit under autocast, and unchanged without it
(tests/test_lora_inputs.py).
"""

from __future__ import annotations

from typing import Any


class CastUnlessAutocast:
    """The value of a LoRA layer's ``cast_input_dtype_enabled``: true (PEFT casts the input to the adapter's
    dtype) unless autocast is on for ``device_type``, where autocast casts it to the compute dtype anyway."""

    def __init__(self, device_type: str) -> None:
        self.device_type = device_type

    def __bool__(self) -> bool:
        import torch

        return not torch.is_autocast_enabled(self.device_type)

    def __repr__(self) -> str:
        return f"CastUnlessAutocast({self.device_type!r})"


def skip_casts_under_autocast(model: Any) -> int:
    """Give every PEFT LoRA layer of ``model`` a :class:`CastUnlessAutocast` for its device; returns how many.

    Nothing changes for layers whose adapter already has the base weights' dtype (the cast is a no-op
    there), nor where PEFT has no such switch."""
    count = 0
    for module in model.modules():
        if not hasattr(module, "cast_input_dtype_enabled") or not hasattr(module, "lora_A"):
            continue
        weight = getattr(getattr(module, "base_layer", None), "weight", None)
        if weight is None:
            continue
        module.cast_input_dtype_enabled = CastUnlessAutocast(weight.device.type)
        count += 1
    return count
