"""cli/eval/report.py: eval.png — every bar labelled (a zero too), long labels wrapped (cli/run/plots.py)."""

from __future__ import annotations

import pytest


def test_eval_png_shows_zero_values_and_wraps_labels(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from cli.eval.evaluation import LABELS
    from cli.eval.report import plot_png
    from cli.run.plots import wrap_label

    results = [
        {"label": LABELS[k], "format_compliance": f, "accuracy": 0.0, "mean_completion_tokens": n}
        for k, f, n in (("base", 0.0, 16), ("sft", 0.5, 40), ("grpo", 1.0, 31))
    ]
    png = plot_png(results, "test")
    assert png is not None and png[:8] == b"\x89PNG\r\n\x1a\n"
    # Every bar carries its value: a zero is a visible "0%", not a missing bar.
    from cli.eval.report import eval_figure

    fig = eval_figure(results, "test")
    shown = [t.get_text() for t in fig.axes[0].texts]
    assert shown.count("0%") == 4 and "50%" in shown and "100%" in shown  # format 0, accuracy 0 ×3
    assert [t.get_text() for t in fig.axes[1].texts] == ["16", "40", "31"]
    # Long labels are wrapped at word boundaries so neighbours do not overlap.
    assert wrap_label(LABELS["sft"]) == "After SFT\n(format\nwarm-up)"


def test_axis_ticks_each_read_as_their_own_number() -> None:
    # train.png's loss axis once read 0.000000020 … 0.000000000, two ticks alike.
    from cli.run.plots import tick_labels

    assert tick_labels([0.0, 5e-9, 1e-8, 1.5e-8, 2e-8]) == ["0", "5e-09", "1e-08", "1.5e-08", "2e-08"]
    assert tick_labels([6.9249, 6.92495, 6.925]) == ["6.9249", "6.92495", "6.925"]  # a flat series
    assert tick_labels([-1.1102230246251565e-17, 0.5, 1.0]) == ["0", "0.5", "1"]


def test_axis_ticks_read_in_plain_digits_below_a_million() -> None:
    # train.png's completion-length axis read 1e+02 for 100.
    from cli.run.plots import tick_labels

    assert tick_labels([0.0, 50.0, 100.0, 150.0]) == ["0", "50", "100", "150"]
    assert tick_labels([1000.0, 1500.0, 2000.0]) == ["1000", "1500", "2000"]
    assert tick_labels([2e6, 4e6]) == ["2e+06", "4e+06"]


def _png_width(png: bytes) -> int:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(png[16:20], "big")  # the IHDR chunk's width


def test_train_png_has_no_empty_vllm_panels_on_a_cpu_run() -> None:
    """A CPU run logs no importance-sampling ratio: 2 x 3 panels, not 2 x 4 with two "not logged"."""
    from cli.run.plots import train_png

    rows = [
        {"step": s, "reward": 0.1 * s, "reward_std": 0.1, "loss": 0.0, "entropy": 2.0,
         "completions/mean_length": 90.0 + 10 * s, "frac_reward_zero_std": 0.5}
        for s in range(1, 4)
    ]  # fmt: skip
    cpu = train_png(rows, [], "cpu")
    ratio = "sampling/importance_sampling_ratio"
    vllm = [
        {**r, f"{ratio}/mean": 1.0, f"{ratio}/min": 0.9, f"{ratio}/max": 1.1,
         "sampling/sampling_logp_difference/mean": 0.01}
        for r in rows
    ]  # fmt: skip
    gpu = train_png(vllm, [], "vllm")
    assert cpu is not None and gpu is not None
    assert _png_width(cpu) == 13 * 110 and _png_width(gpu) == 17 * 110  # 3 columns of panels, then 4
