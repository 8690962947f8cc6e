"""Custom rewards that go wrong, for tests/test_training_rewards.py (loaded by dotted path)."""

from __future__ import annotations

from typing import Any


def always_raises(completions: list[Any], **kwargs: Any) -> list[float]:
    raise RuntimeError("database unreachable")


def nan_none_inf(completions: list[Any], **kwargs: Any) -> list[float | None]:
    cycle = [float("nan"), None, float("inf"), 1.0]
    return [cycle[i % 4] for i in range(len(completions))]
