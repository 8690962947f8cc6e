"""GPU memory: how much vLLM is given, and what a run really used.

vLLM takes a fixed share of the GPU (``gpu_memory_utilization``) for its weights, activations and a KV
cache that it grows to fill that share. A fixed 0.6 (or Unsloth's standby default of ~0.88) on an H200
gives a 4B model's rollouts over 80 GiB of KV cache they never use. ``auto`` sizes the share from what
the rollout needs instead: the weights, the KV cache for one generation batch (completions per device
× (prompt + completion) tokens) with headroom, and a fixed margin for vLLM's activations and CUDA graphs.

Three figures are reported apart, because they answer different questions:

- ``train_extra_gib``: what the training part of a step (log-probs and backward, after generation)
  allocates on top of what is resident (weights, vLLM's cache); ``train_peak_gib`` is that part's
  whole torch peak, resident memory included;
- ``vllm_gib``: the share vLLM was given (``gpu_memory_utilization`` × the card);
- ``gpu_peak_gib``: the largest device-wide use seen while the stage ran (what ``nvidia-smi`` shows),
  sampled by a background thread through NVML.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.common import GrpoError

GIB = 2**30
# vLLM's profile run (activations for its batched-token budget), CUDA graphs, the sampler's logits and
# the allocator's slack. Measured on an H200 (bench/h200.md) for Qwen3-4B and Gemma-3-270M shapes.
VLLM_MARGIN_BYTES = 3 * GIB
KV_HEADROOM = 1.5  # block rounding, prefix-cache slack, more than one generation batch in flight
MIN_UTILIZATION = 0.02
MAX_UTILIZATION = 0.9


def parse_utilization(value: Any) -> float | None:
    """``auto`` → None; a number in (0, 1) → that number; anything else is a config error."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise GrpoError(
            f"grpo.gpu_memory_utilization must be auto or a fraction in (0, 1), not {value!r}"
        ) from None
    if not 0 < number < 1:
        raise GrpoError(f"grpo.gpu_memory_utilization must be auto or a fraction in (0, 1), not {number:g}")
    return number


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


# ---- measuring ---------------------------------------------------------------------------------
class DevicePeak:
    """Largest device-wide memory use (NVML: what nvidia-smi shows), sampled in a daemon thread."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle: Any = None

    def start(self) -> DevicePeak:
        try:
            import pynvml  # nvidia-ml-py, installed with torch's CUDA wheels
            import torch

            if not torch.cuda.is_available():
                return self
            pynvml.nvmlInit()
            index = torch.cuda.current_device()
            visible = _visible_devices()
            physical = visible[index] if index < len(visible) else index
            self._handle = (
                pynvml.nvmlDeviceGetHandleByUUID(physical)
                if isinstance(physical, str)
                else pynvml.nvmlDeviceGetHandleByIndex(physical)
            )
        except Exception:  # noqa: BLE001 - no NVML (CPU, foreign GPU): the figure is simply absent
            self._handle = None
            return self
        self._thread = threading.Thread(target=self._loop, name="grpo-gpu-peak", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        import pynvml

        while not self._stop.is_set():
            try:
                used = int(pynvml.nvmlDeviceGetMemoryInfo(self._handle).used)
            except Exception:  # noqa: BLE001
                return
            self.peak_bytes = max(self.peak_bytes, used)
            self._stop.wait(self.interval)

    @property
    def peak_gib(self) -> float | None:
        return round(self.peak_bytes / GIB, 2) if self._handle is not None and self.peak_bytes else None

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)


def _visible_devices() -> list[int | str]:
    import os

    raw = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if not raw:
        return []
    out: list[int | str] = []
    for item in raw.split(","):
        item = item.strip()
        out.append(int(item) if item.isdigit() else item)
    return out


class PhaseMemory:
    """Training-phase memory. torch's peak is reset when a generation batch has been made, and what is
    resident then (the weights, vLLM's KV cache in the colocated engine) is noted, so at the step's end
    ``train_peak`` is the largest torch allocation of the log-prob + backward part, and ``train_extra``
    what that part added on top of the resident memory (activations, gradients, optimizer state)."""

    def __init__(self) -> None:
        self.train_peak_bytes = 0
        self.train_extra_bytes = 0
        self._resident = 0
        self.phases: Any = None  # cli.training.phases.PhaseTimes once wrapped

    def wrap(self, trainer: Any) -> PhaseMemory:
        """Watch ``trainer``: memory around its generation batches, and the per-step phase clock."""
        import torch

        from cli.training.phases import PhaseTimes

        original = getattr(trainer, "_generate_and_score_completions", None)
        if original is None:
            return self

        def noted(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
                self._resident = int(torch.cuda.memory_allocated())
            return out

        trainer._generate_and_score_completions = noted
        # The phase clock times the rollout (generation + scoring) among the other phases.
        self.phases = PhaseTimes(PhaseTimes.cuda_sync()).wrap(trainer)
        return self

    def take_row(self, window: float) -> dict[str, Any]:
        """This step's memory and time figures for the live view's row (resets the per-step ones)."""
        phases = self.phases.take() if self.phases is not None else {}
        gen = phases.get("phase_rollout_s", 0.0)
        return {
            "generation_seconds": round(gen, 4),
            "generation_share": round(gen / window, 4) if window > 0 else None,
            "train_peak_gib": self.train_peak_gib,
            "train_extra_gib": self.train_extra_gib,
            **phases,
        }

    def step_end(self) -> None:
        import torch

        if torch.cuda.is_available():
            peak = int(torch.cuda.max_memory_allocated())
            self.train_peak_bytes = max(self.train_peak_bytes, peak)
            self.train_extra_bytes = max(self.train_extra_bytes, peak - self._resident)

    @property
    def train_peak_gib(self) -> float | None:
        return round(self.train_peak_bytes / GIB, 2) if self.train_peak_bytes else None

    @property
    def train_extra_gib(self) -> float | None:
        return round(self.train_extra_bytes / GIB, 2) if self.train_peak_bytes else None
