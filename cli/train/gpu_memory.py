"""GPU memory during training: what a run really used, apart from vLLM's planned share.

vLLM's share itself is planned in :mod:`cli.infer.vllm_memory`. Three figures are reported apart, because
they answer different questions:

- ``train_extra_gib``: what the training part of a step (log-probs and backward, after generation)
  allocates on top of what is resident (weights, vLLM's cache); ``train_peak_gib`` is that part's
  whole torch peak, resident memory included;
- ``vllm_gib``: the share vLLM was given (``gpu_memory_utilization`` × the card);
- ``gpu_peak_gib``: the largest device-wide use seen while the stage ran (what ``nvidia-smi`` shows),
  sampled by a background thread through NVML.
"""

from __future__ import annotations

import threading
from typing import Any

GIB = 2**30


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
    """Training-phase memory. torch's peak is reset when a generation batch has been made
    (:meth:`after_rollout`, called by the trainer), and what is resident then (the weights, vLLM's KV cache
    in the colocated engine) is noted, so at the step's end ``train_peak`` is the largest torch allocation
    of the log-prob + backward part, and ``train_extra`` what that part added on top of the resident memory
    (activations, gradients, optimizer state)."""

    def __init__(self) -> None:
        self.train_peak_bytes = 0
        self.train_extra_bytes = 0
        self._resident = 0

    def after_rollout(self) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
            self._resident = int(torch.cuda.memory_allocated())

    def take_row(self) -> dict[str, Any]:
        """The memory figures of the live view's row."""
        return {"train_peak_gib": self.train_peak_gib, "train_extra_gib": self.train_extra_gib}

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
