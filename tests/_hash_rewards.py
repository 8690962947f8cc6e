"""A reward with a spread in every group, deterministic in the completion (loaded by dotted path): runs that
sample the same completions score them the same (tests/test_step_levers.py)."""

from __future__ import annotations

import zlib
from typing import Any


def text_hash(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """A value in [0, 1) from a hash of each completion's text."""
    return [zlib.crc32(str(c).encode()) % 97 / 97 for c in completions]
