"""Custom rewards that go wrong, for tests/test_training_rewards.py (loaded by dotted path)."""

from __future__ import annotations

from typing import Any


def always_raises(completions: list[Any], **kwargs: Any) -> list[float]:
    raise RuntimeError("database unreachable")


def nan_none_inf(completions: list[Any], **kwargs: Any) -> list[float | None]:
    cycle = [float("nan"), None, float("inf"), 1.0]
    return [cycle[i % 4] for i in range(len(completions))]


def never_returns(completions: list[Any], **kwargs: Any) -> list[float]:
    """Hardening, round 1 (docs/history.md): a reward stuck for good (a lost lock, a dead server without a
    socket timeout)."""
    import time

    while True:
        time.sleep(3600)


def spins(completions: list[Any], **kwargs: Any) -> list[float]:
    """Stuck in pure Python, swallowing every Exception on the way."""
    n = 0
    while True:
        try:
            n += 1
        except Exception:  # noqa: BLE001, S112 - what a careless reward does
            continue


def slow(completions: list[Any], **kwargs: Any) -> list[float]:
    """Half a second per batch: a run slow enough to Ctrl-C between steps."""
    import time

    time.sleep(0.5)
    return [0.0 if i % 2 else 1.0 for i in range(len(completions))]
