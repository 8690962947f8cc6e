"""A reward that leaves some groups without spread, for dynamic sampling's test (loaded by dotted path)."""

from __future__ import annotations

import zlib
from typing import Any


def coin(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """Half the prompts (by a hash of the prompt) score 0 on every completion: their groups have no spread.
    The others alternate 0 / 1 down the batch: every group of an even size has a spread."""
    out = []
    for i, prompt in enumerate(prompts):
        dead = zlib.crc32(str(prompt).encode()) % 2 == 0
        out.append(0.0 if dead else float(i % 2))
    return out
