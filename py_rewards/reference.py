"""Pure-Python reference: the seeds' reward code, parameterized by a :class:`FormatSpec`.

This is the test oracle for the Rust core and a fallback backend (``PY_REWARDS_BACKEND=python`` or
``backend="python"``). The bodies are the seeds' code (seed 000 "Four-Tier Reward Definitions",
seed 001 "Multi-Dimensional Reward Engine") with the tags taken from the spec and ``re.escape``d
(identical patterns for the seed tags) and the scores from ``spec.scores``. Inputs are checked
first (:mod:`py_rewards._inputs`), so a bad call raises a clear error instead of a seed crash.

The seed regexes backtrack: FORMAT is cubic on looping output, NUMERIC quadratic on long
whitespace runs (docs/design-facts.md "Rewards"). Do not run this on untrusted long completions.

>>> completion = "<start_working_out>2+2<end_working_out><SOLUTION>4</SOLUTION>"
>>> match_format_exactly(completions=[completion])
[3.0]
>>> check_answer_accuracy(completions=[completion], answer=["4"])
[5.0]
"""

from __future__ import annotations

import functools
import re
from typing import Any

from . import _inputs
from .spec import FormatSpec, get_spec

__all__ = [
    "check_answer_accuracy",
    "check_numeric_extraction",
    "cosine_correctness_reward_func",
    "extract_boxed",
    "format_regex",
    "int_parsable_reward_func",
    "match_format_approximately",
    "match_format_exactly",
    "numeric_regex",
    "strict_format_reward_func",
]


@functools.lru_cache(maxsize=64)
def _regexes(
    reasoning_end: str, solution_start: str, solution_end: str
) -> tuple[re.Pattern[str], re.Pattern[str]]:
    re_, ss, se = re.escape(reasoning_end), re.escape(solution_start), re.escape(solution_end)
    format_regex = re.compile(rf"{re_}.*?{ss}(.+?){se}[\s]*$", re.DOTALL)
    numeric_regex = re.compile(ss + r".*?[\s]*([-]?[\d\.\,]{1,})", re.DOTALL)
    return format_regex, numeric_regex


def format_regex(spec: FormatSpec | str | None = None) -> re.Pattern[str]:
    """Seed 000's ``FORMAT_REGEX`` for ``spec``'s tags."""
    s = get_spec(spec)
    return _regexes(s.reasoning_end, s.solution_start, s.solution_end)[0]


def numeric_regex(spec: FormatSpec | str | None = None) -> re.Pattern[str]:
    """Seed 000's ``NUMERIC_REGEX`` for ``spec``'s tags."""
    s = get_spec(spec)
    return _regexes(s.reasoning_end, s.solution_start, s.solution_end)[1]


# ---- seed 000 ---------------------------------------------------------------------------------


def match_format_exactly(
    prompts: Any = None, completions: Any = None, answer: Any = None, *, spec: Any = None, **kwargs: Any
) -> list[float]:
    FORMAT_REGEX = format_regex(spec)
    exact = get_spec(spec).scores.exact
    return [exact if FORMAT_REGEX.search(c) else 0.0 for c in _inputs.contents(completions)]


def match_format_approximately(
    prompts: Any = None, completions: Any = None, answer: Any = None, *, spec: Any = None, **kwargs: Any
) -> list[float]:
    s_ = get_spec(spec)
    hit, miss = s_.scores.approx_hit, s_.scores.approx_miss
    scores = []
    for t in _inputs.contents(completions):
        s = 0.0
        s += hit if t.count(s_.reasoning_end) == 1 else miss
        s += hit if t.count(s_.solution_start) == 1 else miss
        s += hit if t.count(s_.solution_end) == 1 else miss
        scores.append(s)
    return scores


def check_answer_accuracy(
    prompts: Any = None, completions: Any = None, answer: Any = None, *, spec: Any = None, **kwargs: Any
) -> list[float]:
    FORMAT_REGEX = format_regex(spec)
    sc = get_spec(spec).scores
    responses = _inputs.contents(completions)
    answer = _inputs.answers(answer, len(responses), "check_answer_accuracy")
    extracted = [m.group(1).strip() if (m := FORMAT_REGEX.search(r)) is not None else None for r in responses]
    scores = []
    for guess, true_ans in zip(extracted, answer):  # noqa: B905 - the seed's loop; lengths checked above
        if guess is None:
            scores.append(sc.answer_missing)
            continue
        if guess == true_ans:
            scores.append(sc.answer_exact)
        elif guess.strip() == true_ans.strip():
            scores.append(sc.answer_strip)
        else:
            try:
                ratio = float(guess) / float(true_ans)
                if 0.90 <= ratio <= 1.10:
                    scores.append(sc.answer_ratio_10)
                elif 0.80 <= ratio <= 1.20:
                    scores.append(sc.answer_ratio_20)
                else:
                    scores.append(sc.answer_wrong)
            except Exception:
                scores.append(sc.answer_unparsable)
    return scores


def check_numeric_extraction(
    prompts: Any = None, completions: Any = None, answer: Any = None, *, spec: Any = None, **kwargs: Any
) -> list[float]:
    NUMERIC_REGEX = numeric_regex(spec)
    sc = get_spec(spec).scores
    responses = _inputs.contents(completions)
    answer = _inputs.answers(answer, len(responses), "check_numeric_extraction")
    extracted = [
        m.group(1).strip() if (m := NUMERIC_REGEX.search(r)) is not None else None for r in responses
    ]
    scores = []
    for guess, true_ans in zip(extracted, answer):  # noqa: B905 - the seed's loop; lengths checked above
        if guess is None:
            scores.append(sc.numeric_missing)
            continue
        try:
            val_guess = float(guess.replace(",", ""))
            val_true = float(true_ans.strip())
            scores.append(sc.numeric_hit if val_guess == val_true else sc.numeric_miss)
        except Exception:
            scores.append(sc.numeric_unparsable)
    return scores


# ---- seed 001 (default tags: the ``seed001`` preset) ------------------------------------------


def _spec001(spec: Any) -> FormatSpec:
    return get_spec("seed001" if spec is None else spec)


def strict_format_reward_func(
    prompts: Any = None, completions: Any = None, answer: Any = None, *, spec: Any = None, **kwargs: Any
) -> list[float]:
    """Validates full structural enclosure: <<reasoning>> <<\\boxed{answer}>>."""
    s = _spec001(spec)
    responses = _inputs.contents(completions)
    scores = []
    for r in responses:
        has_tags = r.count(s.reasoning_start) == 2 and r.count(s.reasoning_end) == 2
        has_boxed = s.solution_start in r and r.rstrip().endswith(s.solution_end)
        scores.append(0.5 if (has_tags and has_boxed) else 0.0)
    return scores


def int_parsable_reward_func(
    prompts: Any = None, completions: Any = None, answer: Any = None, *, spec: Any = None, **kwargs: Any
) -> list[float]:
    """Verifies that the content within boxed{} parses cleanly as an integer."""
    s = _spec001(spec)
    responses = _inputs.contents(completions)
    scores = []
    for r in responses:
        if s.solution_start in r and s.solution_end in r:
            extracted = r.split(s.solution_start)[-1].split(s.solution_end)[0].strip()
            scores.append(0.5 if re.fullmatch(r"-?\d+", extracted) else 0.0)
        else:
            scores.append(0.0)
    return scores


def extract_boxed(completions: Any, spec: Any = None) -> list[str]:
    """Seed 001's answer extraction for the cosine reward (``""`` where there is none)."""
    s = _spec001(spec)
    extracted = []
    for r in _inputs.contents(completions):
        if s.solution_start in r and s.solution_end in r:
            extracted.append(r.split(s.solution_start)[-1].split(s.solution_end)[0].strip())
        else:
            extracted.append("")
    return extracted


def cosine_correctness_reward_func(
    prompts: Any = None, completions: Any = None, answer: Any = None, *, spec: Any = None, **kwargs: Any
) -> list[float]:
    """Computes amplified continuous semantic similarity against ground truth."""
    from ._embed import cosine_scores

    extracted = extract_boxed(completions, spec)
    answer = _inputs.answers(answer, len(extracted), "cosine_correctness_reward_func")
    return cosine_scores(extracted, answer)
