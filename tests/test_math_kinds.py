"""py_rewards.math_equal on answer shapes beyond bare answers, and against completions built to cheat.

The corpus is bench/math_kinds.jsonl.gz (``python bench/math_kinds.py`` rebuilds it from MATH, MATH500,
the DAPO sample, GSM8K and Gemma-3-270M completions): several boxed answers, answers in prose,
labelled answers, relations, bare ``and``/``or`` lists, matrix sums, and adversarial completions.
Every case is judged in both orders, as a new user would call ``math_equal``; each kind must stay at
or above its target (bench/math_verify.md, "Answer shapes"), and no adversarial case may score.
The properties below build such completions around any gold answer.
"""

from __future__ import annotations

import importlib.util
import sys
from fractions import Fraction
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from py_rewards import extract_math_answer, math_equal, math_equal_batch

ROOT = Path(__file__).resolve().parents[1]
# the lowest agreement each kind may fall to (both orders counted); adversarial cases: none may pass
TARGET = {
    "several": 0.97,
    "prose": 0.97,
    "labelled": 0.97,
    "relations": 0.97,
    "and_or": 0.97,
    "matrix_sum": 0.97,
}


def _kinds_module():
    spec = importlib.util.spec_from_file_location("math_kinds", ROOT / "bench" / "math_kinds.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("math_kinds", mod)
    spec.loader.exec_module(mod)
    return mod


def test_each_kind_meets_its_target() -> None:
    mk = _kinds_module()
    cases = mk.load()
    assert {c.kind for c in cases} == set(mk.KINDS)
    forward = math_equal_batch([c.pred for c in cases], [c.gold for c in cases])
    backward = math_equal_batch([c.gold for c in cases], [c.pred for c in cases])
    for kind in mk.KINDS:
        rows = [(c, f, b) for c, f, b in zip(cases, forward, backward, strict=True) if c.kind == kind]
        right = sum((f == c.want) + (b == c.want) for c, f, b in rows)
        wrong = [(c.pred[-60:], c.gold[-40:], c.why) for c, f, b in rows if c.want not in (f, b) or f != b]
        share = right / (2 * len(rows))
        if kind == "hack":
            assert share == 1.0, f"adversarial completions scored: {wrong[:5]}"
        else:
            assert share >= TARGET[kind], f"{kind}: {share:.3f}; first misses: {wrong[:5]}"


def test_the_verdict_is_the_same_both_ways() -> None:
    mk = _kinds_module()
    cases = mk.load()
    preds, golds = [c.pred for c in cases], [c.gold for c in cases]
    assert math_equal_batch(preds, golds) == math_equal_batch(golds, preds)


# ---- hack resistance: completions around any gold ---------------------------------------------------
GOLD = st.one_of(
    st.integers(-10_000, 10_000).filter(bool).map(str),  # (0 is its own double)
    st.tuples(st.integers(1, 99), st.integers(2, 99))
    .filter(lambda t: Fraction(*t).denominator != 1)
    .map(lambda t: f"\\frac{{{t[0]}}}{{{t[1]}}}"),
    st.integers(2, 99).filter(lambda n: int(n**0.5) ** 2 != n).map(lambda n: f"\\sqrt{{{n}}}"),
)


def _other(gold: str, k: int) -> str:
    """A different answer of the same shape (``k`` ≥ 1)."""
    if gold.startswith("\\frac"):
        return gold.replace("}{", f"{k}}}{{", 1)
    if gold.startswith("\\sqrt"):
        return f"\\sqrt{{{int(gold[6:-1]) + 4 * k * k}}}"
    return str(int(gold) + k)


@settings(max_examples=300, deadline=None)
@given(GOLD, st.integers(1, 9), st.integers(2, 6), st.randoms(use_true_random=False))
def test_listing_candidates_never_scores(gold: str, k: int, n: int, rnd) -> None:
    """However the candidates are listed, a list that holds the gold and others is not the gold."""
    cands = [gold] + [_other(gold, k + j) for j in range(n - 1)]
    rnd.shuffle(cands)
    for pred in (
        ", ".join(f"\\boxed{{{c}}}" for c in cands),
        " or ".join(f"$\\boxed{{{c}}}$" for c in cands),
        "\\boxed{" + ", ".join(cands) + "}",
        "The answer is $" + "$ or $".join(cands) + "$.",
        "\\boxed{" + " \\text{ or } ".join(cands) + "}",
    ):
        assert not math_equal(pred, gold), pred
        assert not math_equal(gold, pred), pred


@settings(max_examples=300, deadline=None)
@given(GOLD, st.integers(1, 9))
def test_the_gold_outside_the_answer_never_scores(gold: str, k: int) -> None:
    """An empty or unclosed box, a wrong box with the gold in an aside or in the prose, the gold
    inside a longer wrong expression: none is a correct answer."""
    wrong = _other(gold, k)
    for pred in (
        f"The answer is $\\boxed{{}}$. It is {gold}.",
        f"\\boxed{{}} {gold}",
        f"\\boxed{{{gold}",
        f"\\boxed{{{wrong}}} \\text{{ (or maybe {gold})}}",
        f"I first got ${gold}$, but the answer is $\\boxed{{{wrong}}}$.",
        f"\\boxed{{{gold} + 1}}",
        f"\\boxed{{2 \\cdot {gold}}}",
        f"Answer: {wrong} (not {gold})",
    ):
        assert not math_equal(pred, gold), pred
        assert not math_equal(gold, pred), pred


@settings(max_examples=200, deadline=None)
@given(
    GOLD, st.sampled_from(["", "So ", "Thus, the final answer is "]), st.sampled_from(["", ".", " units."])
)
def test_the_gold_stated_is_accepted(gold: str, before: str, after: str) -> None:
    """The other side of the coin: the gold, boxed or stated, with prose around it, scores."""
    for pred in (f"{before}$\\boxed{{{gold}}}${after}", f"{before}${gold}${after}"):
        assert math_equal(pred, gold), pred
        assert math_equal(gold, pred), pred


def test_extract_marks_joined_boxes_and_answer_phrases() -> None:
    """The reward reads the answer with extract_math_answer: joined boxes come whole (one set),
    an answer phrase is a marked answer, bare prose is none; an empty box is an empty answer (wrong,
    not missing, as before)."""
    tags = ("<SOLUTION>", "</SOLUTION>")
    two = extract_math_answer("so $\\boxed{1}$ and $\\boxed{2}$.", *tags)
    assert two == "\\boxed{1}$ and $\\boxed{2}"
    assert math_equal(two, "1, 2") and not math_equal(two, "2")
    assert extract_math_answer("Final Answer: The final answer is $5$. I hope it is correct.", *tags)
    assert math_equal(extract_math_answer("The answer is $\\frac12$.", *tags) or "", "0.5")
    assert extract_math_answer("I think it is 5.", *tags) is None
    empty = extract_math_answer("\\boxed{} 5", *tags)
    assert empty == "" and not math_equal(empty, "5")
