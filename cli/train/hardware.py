"""What the hardware decides for a trainer: precision, optimizer, gradient checkpointing, CPU ranks.

:class:`Hardware` is read without importing torch (NVML, import specs), so that `grpo grpo --dry-run`
can print the plan in a second; :func:`common_args` are the trainer arguments SFT and GRPO share.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.config.schema import Config
from cli.run import ranks


@dataclass(frozen=True)
class Hardware:
    """What the trainer's arguments depend on, read without importing torch (NVML, import specs)."""

    cuda: bool
    gpu_bytes: int | None  # the device's memory (vLLM's share is a fraction of it)
    bf16: bool  # compute capability >= 8.0
    bitsandbytes: bool  # 8-bit AdamW needs it (on CUDA)
    world: int  # processes (accelerate)
    sharded: bool  # DeepSpeed ZeRO or FSDP: the ranks hold shards
    cpu_bf16: bool = False  # the CPU multiplies bf16 natively (AVX512-BF16 or AMX): see cpu_bf16()

    @classmethod
    def probe(cls) -> Hardware:
        cuda, total, bf16 = _gpu()
        bnb = importlib.util.find_spec("bitsandbytes") is not None
        return cls(cuda, total, bf16, bnb, ranks.world_size(), sharded(), cpu_bf16())


def _gpu() -> tuple[bool, int | None, bool]:
    """(CUDA visible, its memory in bytes, bf16-capable) of this process's device."""
    if "torch" in sys.modules:  # already imported (a test, a child of the launcher): ask it
        torch = sys.modules["torch"]
        if not torch.cuda.is_available():
            return False, None, False
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        return True, int(props.total_memory), props.major >= 8
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False, None, False
    try:
        import pynvml  # nvidia-ml-py, installed with torch's CUDA wheels

        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() == 0:
            return False, None, False
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        local = ranks.local_rank()
        handle = (
            pynvml.nvmlDeviceGetHandleByUUID(visible)
            if visible and not visible.isdigit()
            else pynvml.nvmlDeviceGetHandleByIndex(int(visible) if visible.isdigit() else local)
        )
        major, _ = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        return True, int(pynvml.nvmlDeviceGetMemoryInfo(handle).total), major >= 8
    except Exception:  # noqa: BLE001 - no NVML library or no driver: no GPU
        return False, None, False


def sharded() -> bool:
    """Launched under DeepSpeed ZeRO or FSDP (accelerate sets these for the ranks)?"""
    return os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true" or (
        os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"
    )


@functools.cache
def cpu_bf16() -> bool:
    """Does this CPU multiply bf16 natively (the ``avx512_bf16`` or ``amx_bf16`` flag in /proc/cpuinfo)?
    Without it oneDNN emulates bf16 and float32 is the faster dtype; with it, bf16 halves the bytes every
    decoding step reads. Gemma-3-270M with LoRA on 2 cores of an AMD EPYC with AVX512-BF16
    (bench/cpu_dtype.py): sampling took 0.54x float32's time and a backward 0.64x; the CPU preset's GRPO step
    21.7 s against 33.4 s (docs/performance.md "CPU"). Not Linux (no /proc/cpuinfo): False, float32."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.partition(":")[2].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


def training_dtype(requested: str, hw: Hardware) -> str:
    """The weights' dtype: the config's, else bf16 where supported (compute capability 8 on a GPU, native
    bf16 on a CPU: :func:`cpu_bf16`), fp16 on older GPUs, float32 on other CPUs. The backends load with the
    same rule; LoRA's adapters stay float32 (PEFT), and on a CPU nothing autocasts."""
    names = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
    if requested not in (None, "", "auto"):
        return names.get(requested, requested)
    if not hw.cuda:
        return "bfloat16" if hw.cpu_bf16 else "float32"
    return "bfloat16" if hw.bf16 else "float16"


def common_args(
    cfg: Config, section: Any, output_dir: Path, max_steps: int, backend: str, dtype: str, hw: Hardware
) -> dict[str, Any]:
    """The trainer arguments SFT and GRPO share: schedule, logging, saving, seed, and what the hardware
    decides (precision, optimizer, gradient checkpointing, CPU ranks)."""
    save_steps = int(getattr(section, "save_steps", 0) or 0)
    gc = cfg.lora.gradient_checkpointing
    return {
        "output_dir": str(output_dir),
        "learning_rate": section.learning_rate,
        "weight_decay": section.weight_decay,
        "optim": optimizer_name(section.optim, hw),
        # Short smoke runs still log: never log less often than once per run.
        "logging_steps": max(1, min(section.logging_steps, max_steps))
        if max_steps > 0
        else section.logging_steps,
        "save_strategy": "steps" if save_steps > 0 else "no",
        "save_steps": save_steps if save_steps > 0 else 500,
        "seed": cfg.seed,
        "disable_tqdm": True,
        # Without a GPU say so: under `--gpus N --cpu` this makes the ranks gloo CPU processes.
        **({} if hw.cuda else {"use_cpu": True}),
        # LoRA leaves the base weights frozen: DDP must not wait for their (absent) gradients.
        **({"ddp_find_unused_parameters": False} if hw.world > 1 else {}),
        # Mixed precision follows the weights on CUDA; on the CPU the trainer runs as loaded.
        "bf16": hw.cuda and dtype == "bfloat16",
        "fp16": hw.cuda and dtype == "float16",
        # Gradient checkpointing for hf on a GPU (Unsloth sets up its own in get_peft_model; on the CPU the
        # tiny models do not need it and it only slows steps down). PEFT under ZeRO-3 needs the re-entrant
        # variant (transformers forces it, with a warning, otherwise).
        **(
            {
                "gradient_checkpointing": True,
                "gradient_checkpointing_kwargs": {
                    "use_reentrant": os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3"
                },
            }
            if backend == "hf" and hw.cuda and gc not in ("", "none", "false", False, None)
            else {}
        ),
    }


def optimizer_name(requested: str, hw: Hardware) -> str:
    """``auto``: 8-bit AdamW (seed 000) where bitsandbytes works, i.e. on CUDA; else plain AdamW."""
    if requested != "auto":
        return requested
    if hw.sharded:
        # bitsandbytes' 8-bit update cannot take FSDP2's DTensor shards (measured on 2 H200s:
        # "got mixed torch.Tensor and DTensor"), and ZeRO partitions the states itself.
        return "adamw_torch"
    return "adamw_8bit" if hw.cuda and hw.bitsandbytes else "adamw_torch"
