"""The GPU step's rollout levers for TRL's colocated vLLM engine (hf backend), each a setting, off by default.

- ``grpo.vllm_cudagraph`` / ``grpo.vllm_quantization`` / ``grpo.vllm_async_scheduling``: settings of the
  engine TRL builds in its trainer's ``__init__`` (``LLM(...)`` in ``trl.generation.vllm_generation``), which
  has no way to pass them: while our trainer is built, :func:`engine_settings` gives that ``LLM`` call vLLM's
  ``compilation_config`` (``cudagraph_mode``), ``quantization="fp8"`` or ``async_scheduling`` too, and puts
  TRL's ``LLM`` back after. vLLM's default (``auto``) already decodes under CUDA graphs; ``fp8`` quantizes the
  engine's weights when it loads them (online, per tensor): a different sampler than the bf16 trainer, so
  it moves the importance ratio, and vLLM's weight reload into FP8 layers is a known weak point (vLLM
  issues #17272, #28425) — the lease measures it before anyone keeps it.
- ``grpo.vllm_async_scheduling``: vLLM's ``async_scheduling`` (the scheduler prepares the next decode step
  while the GPU runs this one: host work overlapped with the GPU, where the profiled step had 1.1-1.6 s with
  no kernel running). ``auto`` leaves vLLM's choice, which may turn it off for TRL's in-process
  (``external_launcher``) engine; ``on`` asks for it, and an engine that cannot do it fails at start.
- ``grpo.vllm_sync: lora``: TRL's colocate hand-off merges the LoRA into the weights in place, calls vLLM's
  ``load_weights`` once per parameter, every parameter, every step, then unmerges. After the first hand-off
  only the LoRA-adapted layers' weights change (the embeddings, norms and LM head are the engine's own copy
  of the same base weights), so :func:`install_lora_sync` pushes those alone, in one call, merged out of
  place (:func:`merged_weights`): the same weights in the engine, bit for bit (tests/test_vllm_levers.py
  compares with TRL's own walk), and the trainer's base weights untouched (TRL's unmerge leaves a bf16
  rounding behind each step).

Under DeepSpeed / FSDP, server mode, sleep mode or a model without PEFT, TRL's hand-off stays as it is.
Either hand-off is timed as the phase clock's ``sync`` phase (:func:`time_hand_off`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from cli.common import GrpoError


def engine_kwargs(grpo: Any) -> dict[str, Any]:
    """The extra ``LLM(...)`` arguments the config asks for (empty: TRL's engine as it is)."""
    extra: dict[str, Any] = {}
    if grpo.vllm_cudagraph != "auto":
        extra["compilation_config"] = {"cudagraph_mode": grpo.vllm_cudagraph.upper()}
    if grpo.vllm_quantization == "fp8":
        extra["quantization"] = "fp8"
    if grpo.vllm_async_scheduling != "auto":
        extra["async_scheduling"] = grpo.vllm_async_scheduling == "on"
    return extra


@contextlib.contextmanager
def engine_settings(extra: dict[str, Any]) -> Iterator[None]:
    """While the trainer is built, TRL's colocated ``LLM(...)`` also gets ``extra`` (a quantization TRL
    chose itself, bitsandbytes for a 4-bit model, is refused rather than overridden)."""
    if not extra:
        yield
        return
    import trl.generation.vllm_generation as generation

    original = getattr(generation, "LLM", None)
    if original is None:
        raise GrpoError("grpo.vllm_cudagraph / grpo.vllm_quantization need vLLM: it is not importable here")

    def build(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("quantization") and "quantization" in extra:
            raise GrpoError(
                f"grpo.vllm_quantization {extra['quantization']}: the model is already quantized "
                f"({kwargs['quantization']}); set grpo.vllm_quantization: none"
            )
        return original(*args, **{**kwargs, **extra})

    generation.LLM = build
    try:
        yield
    finally:
        generation.LLM = original


def vllm_names(model: Any, *, lora_only: bool) -> Iterator[tuple[str, Any]]:
    """The PEFT model's weights under the names vLLM loads, as TRL's colocate walk names them (the model as it
    is: merged or not); ``lora_only``: just the weights of LoRA-adapted layers (the ones a merge changes)."""
    for name, param in _walk(model, lora_only=lora_only):
        yield name, param.data


def merged_weights(model: Any, *, lora_only: bool) -> Iterator[tuple[str, Any]]:
    """:func:`vllm_names` of the merged model, merged out of place: each LoRA layer's weight is a new tensor,
    the base weight plus PEFT's own delta (the arithmetic of PEFT's ``merge``, so the same values), and the
    model is never touched. TRL merges in place and unmerges after: in bf16, W + ΔW - ΔW is not W, and the
    frozen base weights drift by a rounding each hand-off (tests/test_vllm_levers.py measures it)."""
    layers = {id(m.get_base_layer().weight): m for m in _lora_layers(model)}
    for name, param in _walk(model, lora_only=lora_only):
        layer = layers.get(id(param))
        tensor = param.data
        if layer is not None:
            tensor = tensor.clone()
            for adapter in layer.active_adapters:
                if adapter in layer.lora_A:
                    tensor += layer.get_delta_weight(adapter)
        yield name, tensor


def _walk(model: Any, *, lora_only: bool) -> Iterator[tuple[str, Any]]:
    prefix = getattr(model, "prefix", "lora_")
    for raw, param in model.named_parameters():
        name = raw.removeprefix("base_model.model.").replace(".base_layer", "")
        if prefix in name or "original_module" in name:
            continue
        if lora_only and ".base_layer" not in raw and "modules_to_save" not in raw:
            continue
        yield name.replace("_checkpoint_wrapped_module.", "").replace("modules_to_save.default.", ""), param


def _lora_layers(model: Any) -> list[Any]:
    from peft.tuners.lora.layer import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


def _out_of_place_merge_applies(model: Any) -> str | None:
    """Why PEFT's plain LoRA merge cannot be done out of place here (None: it can)."""
    for layer in _lora_layers(model):
        if getattr(layer, "merged", False):
            return "the adapter is merged into the weights"
        active = [a for a in layer.active_adapters if a in layer.lora_A]
        if any(a in getattr(layer, "lora_variant", {}) for a in active):
            return "a LoRA variant (DoRA) merges its own way"
        if any(getattr(layer, "lora_bias", {}).get(a) for a in active):
            return "LoRA biases"
        if not hasattr(layer.get_base_layer(), "weight"):
            return f"a LoRA layer without a weight ({type(layer).__name__})"
    return None


def lora_sync_applies(generation: Any) -> str | None:
    """Why the one-call LoRA hand-off cannot replace TRL's here (None: it can)."""
    from accelerate.utils import is_peft_model

    if getattr(generation, "mode", None) != "colocate":
        return "not a colocated engine"
    if getattr(generation, "enable_sleep_mode", False):
        return "vLLM sleep mode (the engine drops its weights between rollouts)"
    dist = getattr(generation, "_dist", None)
    if dist is None or getattr(dist, "is_fsdp", False) or generation.accelerator.num_processes > 1:
        return "several processes (TRL gathers the shards itself)"
    if not is_peft_model(generation.model):
        return "no LoRA adapter"
    return _out_of_place_merge_applies(generation.model)


def install_lora_sync(trainer: Any) -> str | None:
    """Replace the trainer's colocate hand-off with the one-call, LoRA-only one; returns why not, if not."""
    generation = getattr(trainer, "vllm_generation", None)
    if generation is None:
        return "no vLLM engine"
    why = lora_sync_applies(generation)
    if why is not None:
        return why
    state = {"synced": False}

    def sync_weights() -> None:
        import torch

        runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
        with torch.no_grad():  # one merged weight at a time, as vLLM's loader takes them
            runner.model.load_weights(merged_weights(generation.model, lora_only=state["synced"]))
        state["synced"] = True
        generation.llm.reset_prefix_cache()

    generation.sync_weights = sync_weights
    return None


def time_hand_off(trainer: Any, timed: Any) -> bool:
    """Count the weight hand-off to the colocated engine (TRL's or :func:`install_lora_sync`'s) as the phase
    clock's ``sync`` phase (``phase_sync_s``: inside ``generate``), so a lease reads the hand-off's own time;
    returns whether there was one to time."""
    generation = getattr(trainer, "vllm_generation", None)
    hand_off = getattr(generation, "sync_weights", None)
    if generation is None or hand_off is None:
        return False

    def sync_weights() -> None:
        with timed("sync"):
            hand_off()

    generation.sync_weights = sync_weights
    return True
