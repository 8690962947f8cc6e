"""Which process this is under `accelerate launch`: rank helpers with no launcher attached.

Apart from :mod:`cli.train.distributed` (the launcher) so that the run directory, the trainer and the live
view can ask "am I rank 0?" without importing the launcher, which itself writes through the run
directory (the import cycle of docs/history.md "Structure"). torch is imported only inside the collectives.
"""

from __future__ import annotations

import os

LAUNCHED_ENV = "GRPO_LAUNCHED"  # set by `grpo grpo --gpus N` in the environment of its ranks


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, "") or default)
    except ValueError:
        return default


def rank() -> int:
    return _env_int("RANK", 0)


def local_rank() -> int:
    return _env_int("LOCAL_RANK", 0)


def world_size() -> int:
    return _env_int("WORLD_SIZE", 1)


def is_main() -> bool:
    """True in a single process and on global rank 0: the only process that writes the run dir."""
    return rank() == 0


def launched() -> bool:
    return os.environ.get(LAUNCHED_ENV) == "1"


def barrier() -> None:
    """Wait for every rank (no-op in a single process)."""
    if world_size() <= 1:
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def any_rank(flag: bool) -> bool:
    """True when ``flag`` is true on any rank (a collective: every rank must call it)."""
    if world_size() <= 1:
        return flag
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return flag
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    t = torch.tensor([1 if flag else 0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())
