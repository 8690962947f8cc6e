"""vLLM's share of the GPU: how much memory a rollout engine is given.

vLLM takes a fixed share of the GPU (``gpu_memory_utilization``) for its weights, activations and a KV
cache that it grows to fill that share. A fixed 0.6 (or Unsloth's standby default of ~0.88) on an H200
gives a 4B model's rollouts over 80 GiB of KV cache they never use. ``auto`` sizes the share from what
the rollout needs instead: the weights, the KV cache for one generation batch (completions per device
× (prompt + completion) tokens) with headroom, and a fixed margin for vLLM's activations and CUDA graphs.
Used by `grpo grpo` (colocated rollouts), `grpo filter` and `grpo eval` (``--engine vllm``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.common import GrpoError
from cli.config.schema import parse_utilization

GIB = 2**30
# vLLM's profile run (activations for its batched-token budget), CUDA graphs, the sampler's logits and
# the allocator's slack. Measured on an H200 (bench/gpu/README.md) for Qwen3-4B and Gemma-3-270M shapes.
VLLM_MARGIN_BYTES = 3 * GIB
KV_HEADROOM = 1.5  # block rounding, prefix-cache slack, more than one generation batch in flight
MIN_UTILIZATION = 0.02
MAX_UTILIZATION = 0.9


@dataclass(frozen=True)
class ModelShape:
    """What the memory plan needs to know about a model (read from its config.json)."""

    layers: int
    kv_heads: int
    head_dim: int
    weight_bytes: int

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * 2  # K and V, 16-bit


def _cfg_get(cfg: dict[str, Any], key: str, default: Any = None) -> Any:
    text = cfg.get("text_config")
    if isinstance(text, dict) and key in text:
        return text[key]
    return cfg.get(key, default)


def model_shape(path: str | Path) -> ModelShape | None:
    """Shape of a local model folder (None when it is not a local folder with a config.json)."""
    folder = Path(path)
    try:
        cfg = json.loads((folder / "config.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    hidden = int(_cfg_get(cfg, "hidden_size", 0) or 0)
    heads = int(_cfg_get(cfg, "num_attention_heads", 1) or 1)
    layers = int(_cfg_get(cfg, "num_hidden_layers", 0) or 0)
    kv_heads = int(_cfg_get(cfg, "num_key_value_heads", heads) or heads)
    head_dim = int(_cfg_get(cfg, "head_dim", 0) or 0) or (hidden // heads if heads else 0)
    weights = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    if not weights:
        weights = sum(f.stat().st_size for f in folder.glob("*.bin"))
    if not weights:  # no weight files beside the config: estimate a dense transformer in 16-bit
        vocab = int(_cfg_get(cfg, "vocab_size", 0) or 0)
        inter = int(_cfg_get(cfg, "intermediate_size", 4 * hidden) or 4 * hidden)
        per_layer = 4 * hidden * hidden + 3 * hidden * inter
        weights = 2 * (layers * per_layer + vocab * hidden)
    if not (layers and kv_heads and head_dim):
        return None
    return ModelShape(layers=layers, kv_heads=kv_heads, head_dim=head_dim, weight_bytes=int(weights))


@dataclass(frozen=True)
class VllmPlan:
    utilization: float
    auto: bool
    need_bytes: int  # what the plan asked for (auto) or the share given (a number)
    kv_tokens: int
    total_bytes: int

    @property
    def vllm_gib(self) -> float:
        return round(self.utilization * self.total_bytes / GIB, 2)

    def describe(self) -> str:
        how = "auto" if self.auto else "set"
        return (
            f"vLLM gets {self.vllm_gib:.1f} GiB (gpu_memory_utilization {self.utilization:.3f}, {how}"
            + (f": weights + KV for {self.kv_tokens} tokens + margin" if self.auto else "")
            + ")"
        )


def plan_vllm(
    requested: Any,
    shape: ModelShape | None,
    *,
    sequences: int,
    prompt_tokens: int,
    completion_tokens: int,
    total_bytes: int,
) -> VllmPlan:
    """The vLLM share for one generation batch of ``sequences`` × (prompt + completion) tokens."""
    fixed = parse_utilization(requested)
    tokens = max(1, sequences) * max(1, prompt_tokens + completion_tokens)
    if fixed is not None:
        return VllmPlan(fixed, False, int(fixed * total_bytes), tokens, total_bytes)
    if shape is None:
        # Unknown shape (a hub id not downloaded yet): the old fixed default.
        return VllmPlan(0.6, True, int(0.6 * total_bytes), tokens, total_bytes)
    need = shape.weight_bytes + int(KV_HEADROOM * tokens * shape.kv_bytes_per_token) + VLLM_MARGIN_BYTES
    util = min(MAX_UTILIZATION, max(MIN_UTILIZATION, need / total_bytes))
    if need > MAX_UTILIZATION * total_bytes:
        raise GrpoError(
            f"vLLM rollouts need about {need / GIB:.1f} GiB (weights {shape.weight_bytes / GIB:.1f} GiB + KV "
            f"cache for {tokens} tokens) but the GPU has {total_bytes / GIB:.1f} GiB: lower --gens, "
            "--batch-size or --max-completion-length, or use --vllm off"
        )
    return VllmPlan(round(util, 4), True, need, tokens, total_bytes)
