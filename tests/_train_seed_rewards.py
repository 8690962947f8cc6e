"""Seed 000's four rewards, verbatim in behaviour (a test helper for custom dotted-path rewards).

Used as ``--rewards tests.seed_rewards.match_format_exactly,...`` to exercise the dotted-path loader;
the CLI's defaults come from ``py_rewards`` by name.
"""

from __future__ import annotations

import re
from typing import Any

REASONING_END = "<end_working_out>"
SOLUTION_START = "<SOLUTION>"
SOLUTION_END = "</SOLUTION>"
FORMAT_REGEX = re.compile(rf"{REASONING_END}.*?{SOLUTION_START}(.+?){SOLUTION_END}[\s]*$", re.DOTALL)
NUMERIC_REGEX = re.compile(SOLUTION_START + r".*?[\s]*([-]?[\d\.\,]{1,})", re.DOTALL)


def _text(c: Any) -> str:
    return c if isinstance(c, str) else c[0]["content"]


def match_format_exactly(completions: list[Any], **kwargs: Any) -> list[float]:
    return [3.0 if FORMAT_REGEX.search(_text(c)) else 0.0 for c in completions]


def match_format_approximately(completions: list[Any], **kwargs: Any) -> list[float]:
    scores = []
    for c in completions:
        t = _text(c)
        s = 0.0
        s += 0.5 if t.count(REASONING_END) == 1 else -1.0
        s += 0.5 if t.count(SOLUTION_START) == 1 else -1.0
        s += 0.5 if t.count(SOLUTION_END) == 1 else -1.0
        scores.append(s)
    return scores


def check_answer_accuracy(
    prompts: list[Any], completions: list[Any], answer: list[str], **kwargs: Any
) -> list[float]:
    extracted = [m.group(1).strip() if (m := FORMAT_REGEX.search(_text(c))) else None for c in completions]
    scores = []
    for guess, true in zip(extracted, answer, strict=False):
        if guess is None:
            scores.append(-2.0)
        elif guess == true:
            scores.append(5.0)
        elif guess.strip() == true.strip():
            scores.append(3.5)
        else:
            try:
                ratio = float(guess) / float(true)
                scores.append(2.0 if 0.9 <= ratio <= 1.1 else 1.5 if 0.8 <= ratio <= 1.2 else -2.5)
            except Exception:  # noqa: BLE001 - the seed's fallback
                scores.append(-4.5)
    return scores


def check_numeric_extraction(
    prompts: list[Any], completions: list[Any], answer: list[str], **kwargs: Any
) -> list[float]:
    extracted = [m.group(1).strip() if (m := NUMERIC_REGEX.search(_text(c))) else None for c in completions]
    scores = []
    for guess, true in zip(extracted, answer, strict=False):
        if guess is None:
            scores.append(-2.5)
            continue
        try:
            scores.append(3.5 if float(guess.replace(",", "")) == float(true.strip()) else -1.5)
        except Exception:  # noqa: BLE001 - the seed's fallback
            scores.append(0.0)
    return scores


def always_raises(completions: list[Any], **kwargs: Any) -> list[float]:
    raise RuntimeError("boom")
