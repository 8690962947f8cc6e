"""Scoring completions for `grpo eval` and export verification: the training rewards plus the verdicts.

Format compliance and correctness (the seed rule, and ``py_rewards.math_equal`` for MATH-style answers)
from the same ``py_rewards`` functions training used, and a lenient correctness that needs no format: the
last number in the completion equals the gold one (:func:`lenient_verdicts`), as GSM8K graders score.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cli.infer.prompting import split_completion

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec


def reward_functions(spec: FormatSpec) -> tuple[Callable[..., list[float]], Callable[..., list[float]], str]:
    """(match_format_exactly, check_answer_accuracy, where-they-came-from), bound to ``spec``'s tags.

    ``py_rewards.make_reward_funcs`` (Rust core, or its pure-Python reference backend with
    ``PY_REWARDS_BACKEND=python``) — the same functions training used.
    """
    from py_rewards import make_reward_funcs

    funcs, _ = make_reward_funcs(spec, ["match_format_exactly", "check_answer_accuracy"])
    return funcs[0], funcs[1], "py_rewards"


@dataclass
class Scores:
    format: list[float]
    accuracy: list[float]
    format_ok: list[bool]
    correct: list[bool]
    source: str = ""
    # The marked answer (solution tags, else the boxes, else an answer phrase) equals the gold one
    # under py_rewards.math_equal (rules: reward_core/math/src/lib.rs).
    math_correct: list[bool] = field(default_factory=list)
    # The last number anywhere in the completion equals the gold answer (no format needed).
    lenient_correct: list[bool] = field(default_factory=list)

    def mean(self, name: str) -> float:
        vals = [float(v) for v in getattr(self, name)]
        return sum(vals) / len(vals) if vals else float("nan")


_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(,\d{3})+(\.\d*)?$")


def _number(text: str) -> float | None:
    """``float`` of an answer, allowing thousands separators ("1,000" but not "1,0")."""
    text = text.strip()
    if "," in text:
        if not _THOUSANDS.match(text):
            return None
        text = text.replace(",", "")
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _numeric_equal(guess: str, true: str) -> bool:
    a, b = _number(guess), _number(true)
    return a is not None and a == b


# A number as GSM8K answers write it: digits with optional thousands groups and decimals, and a minus sign
# unless the dash follows a word or a number ("60-20" is 60 and 20). "1,000" is one number, "1,2,3" three;
# "$18.00" is 18.00; a sentence's final "." is not a decimal point.
_ANY_NUMBER = re.compile(r"(?:(?<![\w)])-)?\d+(?:,\d{3})*(?:\.\d+)?")


def last_number(text: str) -> float | None:
    """The last number in ``text`` (see ``_ANY_NUMBER``), or None when it has none.

    >>> last_number("5 ducks... so she makes $1,234.50 a day.")
    1234.5
    """
    found = _ANY_NUMBER.findall(text)
    return _number(found[-1]) if found else None


def lenient_verdicts(completions: Sequence[str], answers: Sequence[str]) -> list[bool]:
    """Whether the last number in each completion equals the gold answer as a number: the "flexible"
    GSM8K grading (lm-evaluation-harness's flexible-extract), which needs no format. A gold answer that is
    not a number (MATH's LaTeX) is never matched this way."""
    out = []
    for completion, answer in zip(completions, answers, strict=True):
        guess, gold = last_number(completion), _number(str(answer))
        out.append(guess is not None and gold is not None and guess == gold)
    return out


def score(
    spec: FormatSpec, completions: Sequence[str], answers: Sequence[str], prompts: Sequence[Any] | None = None
) -> Scores:
    """Rewards of ``completions`` plus the two eval verdicts.

    - format compliance: ``match_format_exactly > 0`` (seed 000's FORMAT regex matched);
    - correct: ``check_answer_accuracy`` reached its exact or strip tier (the extracted solution equals the
      gold answer, maybe after ``strip()``), or the solution equals the answer numerically
      (thousands separators allowed: ``"1,000"`` == ``"1000.0"``).
      The 90-110 % ratio tiers are partial credit, not correct;
    - lenient: the last number of the completion equals the gold answer (:func:`lenient_verdicts`).
    """
    fmt_fn, acc_fn, source = reward_functions(spec)
    msgs = [[{"role": "assistant", "content": c}] for c in completions]
    prompts = list(prompts) if prompts is not None else [""] * len(completions)
    answers = [str(a) for a in answers]
    fmt = [float(x) for x in fmt_fn(prompts=prompts, completions=msgs, answer=answers)]
    acc = [float(x) for x in acc_fn(prompts=prompts, completions=msgs, answer=answers)]
    correct = seed_verdicts(spec, completions, answers, acc)
    return Scores(
        fmt,
        acc,
        [f > 0 for f in fmt],
        correct,
        source,
        math_verdicts(spec, completions, answers),
        lenient_verdicts(completions, answers),
    )


def seed_verdicts(
    spec: FormatSpec, completions: Sequence[str], answers: Sequence[str], acc: Sequence[float] | None = None
) -> list[bool]:
    """Correct by the seed rule (:func:`score`'s ``correct``) alone: ``acc``, the answer reward's scores, is
    computed when not given. The verifier audit calls it on every rollout batch (cli/train/audit.py)."""
    sc = spec.scores
    answers = [str(a) for a in answers]
    if acc is None:
        _, acc_fn, _ = reward_functions(spec)
        msgs = [[{"role": "assistant", "content": c}] for c in completions]
        acc = [float(x) for x in acc_fn(prompts=[""] * len(completions), completions=msgs, answer=answers)]
    correct = []
    for c, a, s in zip(completions, answers, acc, strict=False):
        ok = s >= min(sc.answer_exact, sc.answer_strip)
        if not ok:
            _, solution, _ = split_completion(spec, c)
            ok = s != sc.answer_missing and solution is not None and _numeric_equal(solution, a)
        correct.append(bool(ok))
    return correct


def math_verdicts(spec: FormatSpec, completions: Sequence[str], answers: Sequence[str]) -> list[bool]:
    """Whether each completion's answer (between the solution tags, else its boxes, several joined
    boxes being one set, else an answer phrase such as ``The final answer is $5$``) equals the gold
    answer under ``py_rewards.math_equal``; no answer (an empty or unclosed box too) is not correct."""
    from py_rewards import extract_math_answer, math_equal_batch

    extracted = [extract_math_answer(c, spec.solution_start, spec.solution_end) for c in completions]
    verdicts = math_equal_batch([e if e is not None else "" for e in extracted], [str(a) for a in answers])
    return [bool(v) and e is not None for v, e in zip(verdicts, extracted, strict=True)]
