"""Confidence intervals for eval figures: Wilson for rates, a t-interval for means, and a paired
bootstrap over prompts for the difference between two checkpoints scored on the same prompts."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion (well-behaved at 0 % and 100 %)."""
    if n <= 0:
        return (math.nan, math.nan)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def mean_ci(values: Sequence[float], z: float = Z95) -> tuple[float, float, float]:
    """(mean, low, high): normal interval of the mean (n is in the hundreds or more for eval sets)."""
    n = len(values)
    if n == 0:
        return (math.nan, math.nan, math.nan)
    mean = sum(values) / n
    if n == 1:
        return (mean, math.nan, math.nan)
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = z * math.sqrt(var / n)
    return (mean, mean - half, mean + half)


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, iters: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """(mean(b − a), low, high): 95 % percentile interval, resampling prompts with their pairs."""
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    n = len(a)
    if n == 0:
        return (math.nan, math.nan, math.nan)
    import numpy as np

    diffs = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, n, size=(iters, n))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return (float(diffs.mean()), float(lo), float(hi))


def bootstrap_ci(values: Sequence[float], *, iters: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): 95 % percentile interval of the mean, resampling prompts (pass@k, maj@k: each
    prompt's value is already a mean over its samples, so the prompts are the unit)."""
    n = len(values)
    if n == 0:
        return (math.nan, math.nan, math.nan)
    import numpy as np

    arr = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, n, size=(iters, n))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return (float(arr.mean()), float(lo), float(hi))
