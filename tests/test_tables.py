"""cli/run/tables.py: `grpo eval` and `grpo export` result tables at 80 columns: headers, numbers whole."""

from __future__ import annotations

import io
import re

import pytest


def _console(width: int):  # noqa: ANN202
    from rich.console import Console

    return Console(file=io.StringIO(), width=width, force_terminal=False, highlight=False)


def _cut(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "…" in ln]


EVAL_ROWS = [
    {"label": name, "format_compliance": f, "accuracy": a, "accuracy_math": a, "accuracy_lenient": a,
     "mean_completion_tokens": 187.4, "seconds": 1234.5}
    for name, f, a in (("Base (pretrained)", 0.0, 0.125), ("After SFT (format warm-up)", 0.96, 0.25),
                       ("After GRPO", 1.0, 0.3125))
]  # fmt: skip


@pytest.mark.parametrize("width", [80, 200])
def test_eval_results_read_whole(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.eval import report

    console = _console(width)
    monkeypatch.setattr(report, "console", console)
    report.print_results(EVAL_ROWS, [], "data/eval.parquet", 16)
    out = console.file.getvalue()
    assert not _cut(out) and max(map(len, out.splitlines())) <= width, out
    for figure in ("0.0%", "12.5%", "96.0%", "100.0%", "31.2%", "187", "1234.5s", "Avg Completion"):
        assert figure in out, (figure, out)
    if width == 80:  # on its side: one row per figure, the models side by side
        assert re.search(r"│ Format Compliance +│ +0\.0% │ +96\.0% │ +100\.0% │", out), out
    else:  # wide enough: the table as built, one row per model
        assert re.search(r"│ After GRPO +│ +100\.0% │", out), out


def test_export_table_reads_whole_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    from cli.export import report

    console = _console(80)
    monkeypatch.setattr(report, "console", console)
    rewards = {"hf": {"match_format_exactly": 3.0, "check_answer_accuracy": 5.0},
               "artifact": {"match_format_exactly": 2.25, "check_answer_accuracy": -1.5}}  # fmt: skip
    artifacts = [
        {"name": name, "bytes": 1_234_567, "zero_tensors": [], "reloaded": True, "seconds": 29.3,
         "agreement": {"token_match": 0.984, "prefix": 0.875, "exact": 0.5}, "rewards": rewards}
        for name in ("lora", "merged-16bit", "gguf-q4_k_m")
    ]  # fmt: skip
    report.print_table(artifacts, {"verify_prompts": 8, "verify_tokens": 64, "source": "grpo"})
    out = console.file.getvalue()
    assert not _cut(out) and max(map(len, out.splitlines())) <= 80, out
    for figure in ("1.2 MB", "98.4%", "87.5%", "50%", "3.00 / 2.25", "5.00 / -1.50", "29.3s", "gguf-q4_k_m"):
        assert figure in out, (figure, out)
