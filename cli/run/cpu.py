"""torch's CPU threads on a shared machine: they sleep while they wait, instead of spinning.

torch runs one OpenMP thread per core, and by default each waits at the end of a parallel region by
spinning. On a 2-core machine that other work also loads, the region then waits for a thread the kernel
has descheduled. Measured here (Gemma-3-270M, float32, LoRA r=16, 2026-12-01, load average 7 from other
processes): a training step of 2 x 200 tokens took 50-80 s with spinning threads and 28-32 s with
``OMP_WAIT_POLICY=PASSIVE``; 32 greedy tokens for 2 prompts 199 s and 25 s. Set before torch loads (the
commands import it inside their bodies); a value the user set wins. Only where no NVIDIA device is present.
"""

from __future__ import annotations

import os


def nvidia_device() -> bool:
    """An NVIDIA device node is present (no CUDA import: commands start before torch loads)."""
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


def configure() -> None:
    # Measured on CPU-only machines only: on a GPU host the trainer's CPU side is not what waits, and the
    # Unsloth first-step stall of bench/learning-gpu.md@ea4c471 (round 6) appeared after this line was added.
    if not nvidia_device():
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
