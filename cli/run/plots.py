"""Plots of a run: ``train.png`` (`grpo grpo`, from metrics.jsonl) and helpers shared with eval.png.

``train.png`` shows the current attempt of GRPO (docs/history.md "First runs": rows of earlier attempts,
which restart at
step 1, would otherwise be drawn over each other): the total reward with its within-group spread, each
reward's mean, the share of groups with zero reward spread (no learning signal), completion length, KL
(or the policy entropy when β = 0 and TRL logs no KL) and the loss. matplotlib is part of the ``train``
extra; without it nothing is drawn and nothing fails.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Sequence
from typing import Any

from cli.common import finite as _num  # a metrics value as the live view reads it: finite float or None


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def to_png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def wrap_label(label: str, width: int = 14) -> str:
    return "\n".join(textwrap.wrap(label, width, break_on_hyphens=False)) or label


def tick_labels(values: Sequence[float]) -> list[str]:
    """The fewest significant digits (2 or more) that tell every tick apart; 0 for a tick that is zero
    up to rounding (matplotlib places it at 1e-17 and the like)."""
    span = (max(values) - min(values)) if values else 0.0
    tiny = span * 1e-9
    clean = [0.0 if abs(v) <= tiny else v for v in values]
    labels: list[str] = []
    for digits in range(2, 16):
        labels = [_significant(v, digits) for v in clean]
        if len(set(labels)) == len(labels):
            break
    return labels


def _significant(value: float, digits: int) -> str:
    """``value`` to ``digits`` significant digits; below a million in plain digits (``100``, not the
    ``1e+02`` of ``format(100, ".2g")``), tiny values keep their exponent (``5e-09``)."""
    text = f"{value:.{digits}g}"
    if "e+" in text and abs(value) < 1e6:
        text = f"{float(text):.0f}"
    return text


def distinct_ticks() -> Any:
    """A matplotlib tick formatter over :func:`tick_labels`."""
    from matplotlib.ticker import Formatter

    class Distinct(Formatter):  # type: ignore[misc]
        def __call__(self, x: float, pos: int | None = None) -> str:
            return f"{x:.6g}"

        def format_ticks(self, values: Sequence[float]) -> list[str]:
            return tick_labels(list(values))

    return Distinct()


def current_attempt(rows: Sequence[dict[str, Any]], stage: str = "grpo") -> list[dict[str, Any]]:
    """The step rows of the most recent attempt of ``stage`` (rows from before attempts count as 1)."""
    steps = [r for r in rows if r.get("stage") == stage and "step" in r]
    if not steps:
        return []
    last = int(steps[-1].get("attempt") or 1)
    return [r for r in steps if int(r.get("attempt") or 1) == last]


def _tool_row(axes: Any, steps: list[int], series: Any, marker: str | None) -> None:
    """A tool run's third row: calls per completion, the share that used the tool, errors, time in it (in the
    errors' panel, on its right axis, when the row has three panels: a run without the vLLM panels)."""
    ax_calls, ax_used, ax_err, *rest = axes
    ax_time = rest[0] if rest else ax_err.twinx()
    ax_calls.plot(steps, series("tools/calls_per_completion"), marker=marker, color="tab:cyan")
    ax_calls.set_title("tool calls per completion", fontsize=10)
    ax_used.plot(steps, [100 * v for v in series("tools/used_share")], marker=marker, color="tab:olive")
    ax_used.set_ylim(-5, 105)
    ax_used.set_title("completions that used the tool (%)", fontsize=10)
    ax_err.plot(steps, [100 * v for v in series("tools/error_rate")], marker=marker, color="tab:red")
    ax_err.set_title("tool calls that failed (%)\nerror, timeout, memory, cut", fontsize=10)
    ax_time.plot(steps, series("tools/seconds"), marker=marker, color="tab:gray")
    ax_time.set_title("seconds in the tool per log step", fontsize=10)


def train_png(rows: Sequence[dict[str, Any]], reward_names: Sequence[str], title: str) -> bytes | None:
    """The GRPO training curves of one attempt; None without matplotlib or without rows."""
    plt = pyplot()
    if plt is None or not rows:
        return None
    steps = [int(r["step"]) for r in rows]

    def series(key: str) -> list[float]:
        return [v if (v := _num(r.get(key))) is not None else math.nan for r in rows]

    marker = "o" if len(rows) <= 30 else None
    ratio = "sampling/importance_sampling_ratio"
    # The two vLLM panels only when the run logged them (rollouts through vLLM): a CPU run has none.
    vllm = any(not math.isnan(v) for v in series(f"{ratio}/mean"))
    tools = any(_num(r.get("tools/calls_per_completion")) is not None for r in rows)  # a tool run
    size = (17 if vllm else 13, 9.6 if tools else 6.4)
    fig, axes = plt.subplots(3 if tools else 2, 4 if vllm else 3, figsize=size)
    (ax_r, ax_each, ax_zero, *ax_is), (ax_len, ax_kl, ax_loss, *ax_gap) = axes[:2]
    if tools:
        _tool_row(axes[2], steps, series, marker)

    reward, spread = series("reward"), series("reward_std")
    ax_r.plot(steps, reward, marker=marker, color="tab:blue", label="mean reward")
    lo = [m - s for m, s in zip(reward, spread, strict=True)]
    hi = [m + s for m, s in zip(reward, spread, strict=True)]
    ax_r.fill_between(steps, lo, hi, color="tab:blue", alpha=0.2, label="± reward std")
    ax_r.set_title("total reward (weighted sum)", fontsize=10)
    ax_r.legend(fontsize=8)

    for name in reward_names:
        ax_each.plot(steps, series(f"rewards/{name}/mean"), marker=marker, label=name)
    ax_each.set_title("mean of each reward", fontsize=10)
    if reward_names:
        ax_each.legend(fontsize=7, loc="best", framealpha=0.7)

    zero = [100 * v for v in series("frac_reward_zero_std")]
    ax_zero.plot(steps, zero, marker=marker, color="tab:red")
    ax_zero.set_ylim(-5, 105)
    ax_zero.set_title("groups with zero reward spread (%)\nno learning signal there", fontsize=10)

    ax_len.plot(steps, series("completions/mean_length"), marker=marker, label="mean")
    if any(not math.isnan(v) for v in series("completions/max_length")):
        ax_len.plot(steps, series("completions/max_length"), marker=marker, linestyle="--", label="max")
        ax_len.legend(fontsize=8)
    ax_len.set_title("completion length (tokens)", fontsize=10)

    kl = series("kl")
    if any(not math.isnan(v) for v in kl):
        ax_kl.plot(steps, kl, marker=marker, color="tab:purple")
        ax_kl.set_title("KL to the reference", fontsize=10)
    else:  # TRL logs no KL when beta = 0 (seed 000's objective): show the policy's entropy instead
        ax_kl.plot(steps, series("entropy"), marker=marker, color="tab:purple")
        ax_kl.set_title("policy entropy (no KL logged: β = 0)", fontsize=10)
    ax_loss.plot(steps, series("loss"), marker=marker, color="tab:green")
    ax_loss.set_title("loss (near 0 is normal in GRPO)", fontsize=10)

    if vllm:
        _vllm_panels(ax_is[0], ax_gap[0], steps, series, marker)
    _finish(axes.flat)
    if len(set(steps)) == 1:  # one step: its number, not 0.96 … 1.04 around it
        for ax in axes.flat:
            ax.set_xticks(steps)
    fig.suptitle(title, fontsize=10)
    return to_png(fig)


def _vllm_panels(ax_is: Any, ax_gap: Any, steps: list[int], series: Any, marker: str | None) -> None:
    """vLLM rollouts: what TRL's correction weighs each token by, and the per-token gap behind it."""
    ratio = "sampling/importance_sampling_ratio"
    ax_is.plot(steps, series(f"{ratio}/mean"), marker=marker, color="tab:orange", label="mean")
    ax_is.fill_between(steps, series(f"{ratio}/min"), series(f"{ratio}/max"), color="tab:orange", alpha=0.2,
                       label="min–max")  # fmt: skip
    ax_is.axhline(1.0, color="gray", linewidth=0.8)
    ax_is.set_title("importance-sampling ratio (vLLM)\n1 = on-policy", fontsize=10)
    ax_gap.plot(steps, series("sampling/sampling_logp_difference/mean"), marker=marker, color="tab:brown")
    ax_gap.set_title("|trainer − vLLM| log-prob per token", fontsize=10)


def _finish(axes: Any) -> None:
    for ax in axes:
        if not any(not math.isnan(v) for line in ax.get_lines() for v in line.get_ydata()):
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes, color="gray")
            ax.set_yticks([])
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=8)
        # Each tick its own number, no offset ("+6.925" landed on the title of a flat series) and no fixed
        # decimals (a loss of 2e-8 read "0.000000020 … 0.000000000", two ticks alike).
        ax.yaxis.set_major_formatter(distinct_ticks())
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
