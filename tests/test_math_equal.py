"""py_rewards.math_equal / math_equal_batch / check_math_answer: the Python surface of the
Rust verifier. Rules and their tables live in reward_core/math (cargo test); here: the binding's
contract (never raises on bad input, batch = scalar, GIL released), the reward, properties.
`test_grpo_config_resolves_check_math_answer` (cli/train/rewards.py) belongs in
tests/test_training_rewards.py; it stays here while that file is being edited on another branch.

Run: ``pytest tests/test_math_equal.py`` (needs the extension built: ``pip install -e .``).
"""

from __future__ import annotations

import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import py_rewards
from py_rewards import (
    FormatSpec,
    RewardScores,
    check_math_answer,
    extract_math_answer,
    get_reward,
    make_reward_funcs,
    math_equal,
    math_equal_batch,
    normalize_math,
)

# (pred, gold, equal) — one line per rule of the spec, with the reason
TABLE = [
    ("0.5", "\\frac{1}{2}", True),  # decimal vs fraction
    ("\\dfrac12", "\\frac{1}{2}", True),  # \dfrac, braceless arguments
    ("\\sqrt{12}", "2\\sqrt{3}", True),  # exact radicals
    ("( 1 , 2 )", "(1,2)", True),  # spacing
    ("90", "90^\\circ", True),  # degrees
    ("B", "\\text{(B)}", True),  # multiple choice
    ("10", "10\\%", True),  # percent
    ("[0,1)", "x \\in [0,1)", True),  # membership
    ("3", "x = 3", True),  # plain equation vs value
    ("10080", "10,\\!080", True),  # thousands separators
    ("137.5", "137 \\frac{1}{2}", True),  # mixed numbers
    ("7, 5, 3", "3, 5, 7", True),  # lists are unordered
    ("(2,1)", "(1,2)", False),  # tuples are ordered
    ("\\frac{1}{2^{98}}", "\\frac{1}{2^{99}}", False),  # exact, not rounded to 6 places
    ("0.33", "\\frac13", False),  # too few places
    ("-4 - 2\\cdot i", "-4 - 2i", True),  # Math-Verify gets this wrong
    ("12 + 10t", "10t + 12", True),  # Math-Verify gets this wrong
    ("The answer is $\\frac{1}{2}$.", "0.5", True),  # prose around the answer
    ("x \\le 3", "(-\\infty, 3]", True),  # an inequality is its solution set
    ("52_8", "52_{10}", False),  # different bases
    ("\\boxed{1} and \\boxed{2}", "1, 2", True),  # joined boxes are one set
    ("\\boxed{1} and \\boxed{2}", "2", False),  # … and not one of its candidates
    ("The largest $n$ is 34.", "34", True),  # prose: the last number, `$n$` only names
    ("(p,q)=(3,2)", "(3,2)", True),  # a label that is not one variable
    ("-2\\le x\\le 7", "x\\in[-2,7]", True),  # relations read as one normal form
    ("x >= 2", "[2, \\infty)", True),  # ASCII relations
    ("\\{2,1,1\\}", "\\{1,2\\}", True),  # sets ignore repeats
    ("19, 46, and 82", "19, 46, 82", True),  # a bare `and`
    ("The answer is $\\boxed{}$. It is 5.", "5", False),  # an empty box is no answer
]


@pytest.mark.parametrize(("pred", "gold", "equal"), TABLE)
def test_table(pred: str, gold: str, equal: bool) -> None:
    assert math_equal(pred, gold) is equal
    assert math_equal(gold, pred) is equal  # symmetric


def test_bad_input_is_false_not_an_error() -> None:
    for bad in (None, 3, b"1", ["1"], "\ud800", "", "   "):
        assert math_equal(bad, "1") is False
        assert math_equal("1", bad) is False
    assert math_equal_batch(["1", None, "\ud800", 1], ["1", "1", "1", "1"]) == [True, False, False, False]
    # The lengths' error names the arguments (it said "completions" for preds); bytes are no batch of
    # answers (b"12" was judged as two answers, the ints 49 and 50).
    with pytest.raises(ValueError, match="golds has 1 items but preds has 2"):
        math_equal_batch(["1", "2"], ["1"])
    with pytest.raises(TypeError, match="single str"):
        math_equal_batch("12", "12")
    with pytest.raises(TypeError, match="preds must be a list of answers, got bytes"):
        math_equal_batch(b"12", ["1", "2"])
    with pytest.raises(TypeError, match="golds must be a list of answers, got bytearray"):
        math_equal_batch(["1"], bytearray(b"1"))
    assert math_equal_batch(iter(["1", "2"]), ("1", "3")) == [True, False]  # any iterables, same length


def test_batch_equals_scalar_also_in_parallel() -> None:
    pairs = [(p, g) for p, g, _ in TABLE] * 400  # ~7K pairs; padded below past the parallel threshold
    pad = " " * 64
    preds = [p + pad for p, _ in pairs]
    golds = [g for _, g in pairs]
    want = [math_equal(p, g) for p, g in zip(preds, golds, strict=True)]
    assert math_equal_batch(preds, golds) == want
    assert sum(want) == 400 * sum(e for *_, e in TABLE)


def test_batch_releases_the_gil() -> None:
    """Another Python thread runs while a batch is judged. With a switch interval far longer than the test,
    this thread never hands the GIL over on its own: the other thread can only run while a call has
    detached from the interpreter (PyO3 `py.detach`). No clock is read: a batch that kept the GIL leaves
    `ran` empty after every call, however fast or slow the machine."""
    preds = ["\\frac{" * 40 + "1" + "}{2}" * 40] * 6000  # ~0.3 s a call on 2 cores
    golds = ["1"] * 6000
    gate = threading.Lock()
    gate.acquire()
    ran: list[bool] = []

    def other() -> None:
        with gate:  # blocks off the GIL until released below; then it needs the GIL to go on
            ran.append(True)

    thread = threading.Thread(target=other)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e6)
    try:
        thread.start()  # waits until `other` runs, i.e. is blocked on the gate
        gate.release()  # from here on `other` only waits for the GIL, which this thread holds
        calls = 0
        while not ran and calls < 10:  # the other thread needs a moment to wake up: give it 10 calls
            assert math_equal_batch(preds, golds) == [False] * 6000
            calls += 1
        ran_inside_a_call = bool(ran)
    finally:
        sys.setswitchinterval(interval)
        thread.join()
    assert ran_inside_a_call


def test_adversarial_latex_is_linear() -> None:
    # Just under the 1 MiB an answer is read up to (reward_core/math lex::MAX_LEN): judged in
    # milliseconds (bench/bench_math.py measures it); quadratic work on these would take far longer than
    # the per-test timeout, which is what fails a super-linear verifier (no clock is read here).
    n = 900_000
    inputs = [
        "{" * (n // 2) + "}" * (n // 2),
        "\\frac{1}{" * (n // 9) + "2" + "}" * (n // 9),
        "9" * n,
        "\\sqrt{" * (n // 6),
        "\\left(" * (n // 6),
    ]
    for s in inputs:
        assert len(s) < 1 << 20
        assert math_equal(s, "1") is False


def test_extract_and_normalize() -> None:
    text = "<start_working_out>…<end_working_out><SOLUTION>\\dfrac{1}{2}</SOLUTION>"
    assert extract_math_answer(text, "<SOLUTION>", "</SOLUTION>") == "\\dfrac{1}{2}"
    assert extract_math_answer("so $\\boxed{\\frac{\\sqrt3}{2}}$", "<S>", "</S>") == "\\frac{\\sqrt3}{2}"
    assert extract_math_answer("nothing", "<S>", "</S>") is None
    assert normalize_math("\\left( \\dfrac{1}{2}, 90^\\circ \\right)") == "(\\frac {1}{2}, 90)"


def test_check_math_answer_reward() -> None:
    done = "<start_working_out>x<end_working_out><SOLUTION>{}</SOLUTION>".format
    completions = [
        done("\\frac12"),
        [{"role": "assistant", "content": done("0.6")}],
        "no answer",
        "\\boxed{3}",
    ]
    assert check_math_answer(completions=completions, answer=["0.5", "0.5", "1", "x=3"]) == [
        5.0,
        -2.5,
        -2.0,
        5.0,
    ]
    assert get_reward("check_math_answer") is py_rewards.REGISTRY["check_math_answer"]
    with pytest.raises(ValueError, match="needs answer="):
        check_math_answer(completions=["1"])
    # scores and tags come from the format spec (the config's `format.scores`)
    spec = FormatSpec(
        name="mine",
        solution_start="<answer>",
        solution_end="</answer>",
        scores=RewardScores(math_correct=1.0, math_wrong=0.0, math_missing=-1.0),
    )
    (f,), weights = make_reward_funcs(spec, ["check_math_answer"], [2.0])
    assert weights == [2.0]
    assert f(
        completions=["<answer>2\\sqrt3</answer>", "<answer>3</answer>", "none"], answer=["\\sqrt{12}"] * 3
    ) == [
        1.0,
        0.0,
        -1.0,
    ]
    # the python backend has no reference of its own: it uses the same verifier
    (g,), _ = make_reward_funcs(spec, ["check_math_answer"], backend="python")
    assert g(completions=["<answer>0.5</answer>"], answer=["\\frac12"]) == [1.0]
    # a lone surrogate in one completion scores that one as wrong, not the batch
    assert check_math_answer(completions=[done("1"), done("\ud800")], answer=["1", "1"]) == [5.0, -2.5]


LATEX = st.lists(
    st.sampled_from(
        [
            "\\frac",
            "\\sqrt",
            "\\left(",
            "\\right)",
            "{",
            "}",
            "(",
            ")",
            "[",
            "]",
            ",",
            "^",
            "_",
            "\\pi",
            "x",
            "y",
        ]
        + list("0123456789+-*/=. ")
        + ["\\text{cm}", "\\%", "^\\circ", "\\pm", "\\cup", "\\{", "\\}"]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(LATEX)
def test_normalize_is_idempotent(s: str) -> None:
    once = normalize_math(s)
    assert normalize_math(once) == once


@settings(max_examples=400, deadline=None)
@given(LATEX, LATEX)
def test_reflexive_and_symmetric(a: str, b: str) -> None:
    if normalize_math(a):
        assert math_equal(a, a)
    assert math_equal(a, b) == math_equal(b, a)


def test_grpo_config_resolves_check_math_answer() -> None:
    """`--rewards match_format_exactly,check_math_answer=2` → TRL callables bound to the run's format."""
    from cli.config.schema import _rewards
    from cli.train.rewards import RewardTracker, resolve_rewards, wrap_rewards

    spec = py_rewards.get_spec("seed000")
    rewards = resolve_rewards(_rewards("match_format_exactly,check_math_answer=2"), spec)
    assert [(r.name, r.weight) for r in rewards] == [
        ("match_format_exactly", 1.0),
        ("check_math_answer", 2.0),
    ]
    funcs = wrap_rewards(rewards, RewardTracker(), spec)
    msgs = [[{"role": "assistant", "content": "x<end_working_out><SOLUTION>\\frac{1}{2}</SOLUTION>"}]]
    assert [f(prompts=[[]], completions=msgs, answer=["0.5"]) for f in funcs] == [[3.0], [5.0]]
