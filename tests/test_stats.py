"""cli/eval/stats.py: the 95 % intervals of `grpo eval` — Wilson, normal mean, paired bootstrap."""

from __future__ import annotations

import pytest

from cli.eval.stats import mean_ci, paired_bootstrap, wilson


def test_intervals() -> None:
    lo, hi = wilson(0, 50)
    assert lo == 0.0 and 0.06 < hi < 0.08  # zero successes still bound the rate
    lo, hi = wilson(48, 50)
    assert 0.86 < lo < 0.87 and 0.98 < hi < 0.99
    mean, lo, hi = mean_ci([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and lo < 2.5 < hi and round(hi - 2.5, 6) == round(2.5 - lo, 6)
    # Every prompt improves by exactly 1: the interval collapses onto 1.
    assert paired_bootstrap([0.0, 1.0, 2.0], [1.0, 2.0, 3.0]) == (1.0, 1.0, 1.0)
    diff, lo, hi = paired_bootstrap([0.0] * 100, [1.0] * 10 + [0.0] * 90, seed=1)
    assert diff == pytest.approx(0.1) and 0.03 < lo < 0.1 < hi < 0.17
    with pytest.raises(ValueError):
        paired_bootstrap([1.0], [1.0, 2.0])
