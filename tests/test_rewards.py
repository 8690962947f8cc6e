"""py_rewards public API: seed tables, TRL call shapes, registry, errors, cache, parallelism, speed.

Run: ``pytest tests/test_rewards.py`` (needs the extension built: ``pip install -e .``).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import py_rewards
from py_rewards import (
    PRESETS,
    REGISTRY,
    FormatSpec,
    RewardCorePanic,
    _core,
    check_answer_accuracy,
    check_numeric_extraction,
    get_reward,
    get_scorer,
    int_parsable_reward_func,
    make_reward_funcs,
    match_format_approximately,
    match_format_exactly,
    reference,
    score_seed000,
    strict_format_reward_func,
)

OK = "<start_working_out>2+2<end_working_out><SOLUTION>{}</SOLUTION>".format


def both(fn_name: str, completions: list, answer: list[str] | None = None, spec=None) -> list[float]:
    """Score with the Rust backend and the reference, assert they agree, return the scores."""
    (rust,), _ = make_reward_funcs(spec, [fn_name], backend="rust")
    (ref,), _ = make_reward_funcs(spec, [fn_name], backend="python")
    got = rust(prompts=None, completions=completions, answer=answer)
    assert got == ref(prompts=None, completions=completions, answer=answer)
    return got


# ---- seed 000 tables (expected values worked out from the seed code by hand) -----------------

FORMAT_CASES = [
    (OK(4), 3.0),  # well formed
    (OK(4) + "\n\n \t", 3.0),  # trailing whitespace is allowed by [\s]*$
    (OK(4) + "\r\n", 3.0),  # CRLF ending
    (OK(4) + "\u3000\x1c\x85", 3.0),  # Unicode whitespace counts as \s
    (OK(4) + "\u200b", 0.0),  # zero-width space is not \s
    (OK(4) + ".", 0.0),  # text after </SOLUTION>
    (OK(4) + "</SOLUTION>", 3.0),  # a later </SOLUTION> ends the match
    (OK(""), 0.0),  # empty answer: (.+?) needs a character
    ("<end_working_out><SOLUTION></SOLUTION></SOLUTION>", 3.0),  # ...which may be a tag
    ("<SOLUTION>4</SOLUTION>", 0.0),  # no reasoning end tag
    ("<SOLUTION>4</SOLUTION><end_working_out>", 0.0),  # tags out of order
    ("", 0.0),  # empty completion
]


@pytest.mark.parametrize(("text", "want"), FORMAT_CASES)
def test_match_format_exactly(text: str, want: float) -> None:
    assert both("match_format_exactly", [text]) == [want]


APPROX_CASES = [
    (OK(4), 1.5),  # each tag once
    ("<SOLUTION>4</SOLUTION>", 0.0),  # reasoning end missing
    ("", -3.0),  # nothing
    (OK(4) * 2, -3.0),  # everything twice
    ("<end_working_out><end_working_out>", -3.0),  # duplicated tag
]


@pytest.mark.parametrize(("text", "want"), APPROX_CASES)
def test_match_format_approximately(text: str, want: float) -> None:
    assert both("match_format_approximately", [text]) == [want]


ACCURACY_CASES = [
    (OK(4), "4", 5.0),  # exact
    (OK(" 4 "), "4", 5.0),  # group(1).strip() before comparing
    (OK(4), " 4\n", 3.5),  # equal after stripping the answer
    (OK(95), "100", 2.0),  # ratio 0.95
    (OK(110), "100", 2.0),  # ratio 1.10 is inside the 10 % band
    (OK(85), "100", 1.5),  # ratio 0.85
    (OK(50), "100", -2.5),  # wrong
    (OK("-0.5"), "-0.5", 5.0),  # negative, exact string
    (OK("-0.50"), "-0.5", 2.0),  # negative, ratio 1
    (OK("1,234"), "1234", -4.5),  # float("1,234") fails
    (OK("1_000"), "1000", 2.0),  # PEP 515 underscores parse
    (OK("\u0664\u0662"), "42", 2.0),  # Arabic-Indic digits parse
    (OK("inf"), "inf", 5.0),  # same string
    (OK("inf"), "1e999", -2.5),  # inf / inf is nan
    (OK("nan"), "1", -2.5),  # nan ratio falls through every band
    (OK(5), "0", -4.5),  # ZeroDivisionError
    (OK(0), "0.0", -4.5),  # 0 / 0 is ZeroDivisionError too
    (OK("1e400"), "1", -2.5),  # overflow to inf
    (OK("x"), "4", -4.5),  # not a number
    ("no tags", "4", -2.0),  # no answer found
]


@pytest.mark.parametrize(("text", "answer", "want"), ACCURACY_CASES)
def test_check_answer_accuracy(text: str, answer: str, want: float) -> None:
    assert both("check_answer_accuracy", [text], [answer]) == [want]


NUMERIC_CASES = [
    ("<SOLUTION>42", "42", 3.5),  # plain
    ("<SOLUTION> 1,234 </SOLUTION>", "1234", 3.5),  # commas dropped
    ("<SOLUTION>The answer is -0.5.", "-0.5", 0.0),  # capture '-0.5.' does not parse
    ("<SOLUTION>x -7", "-7", 3.5),  # sign kept when a digit follows
    ("<SOLUTION>--7", "-7", 3.5),  # only the last '-' before the digit
    ("<SOLUTION>7", "8", -1.5),  # miss
    ("<SOLUTION>7", "7.0", 3.5),  # numeric equality
    ("<SOLUTION>7", " 7 ", 3.5),  # answer stripped
    ("<SOLUTION>7", "seven", 0.0),  # answer does not parse
    ("<SOLUTION>no number", "1", -2.5),  # nothing captured
    ("7 <SOLUTION>", "7", -2.5),  # number before the tag only
    ("<SOLUTION>\u0663", "3", 3.5),  # Unicode digit
    ("<SOLUTION>1.2.3", "1", 0.0),  # capture does not parse
    ("<SOLUTION>" + " " * 50 + "5", "5", 3.5),  # whitespace run before the number
]


@pytest.mark.parametrize(("text", "answer", "want"), NUMERIC_CASES)
def test_check_numeric_extraction(text: str, answer: str, want: float) -> None:
    assert both("check_numeric_extraction", [text], [answer]) == [want]


# ---- seed 001 --------------------------------------------------------------------------------

STRICT_CASES = [
    ("<<think>> <<\\boxed{4}>>", 0.5),  # canonical
    ("<<think>> <<\\boxed{4}>>\n ", 0.5),  # trailing whitespace stripped
    ("<<think>> <<\\boxed{4}>> done", 0.0),  # text after
    ("<<\\boxed{4}>>", 0.0),  # only one << and >>
    ("<<a>> <<b>> <<\\boxed{4}>>", 0.0),  # three of each
]


@pytest.mark.parametrize(("text", "want"), STRICT_CASES)
def test_strict_format(text: str, want: float) -> None:
    assert both("strict_format_reward_func", [text]) == [want]


INT_CASES = [
    ("<<\\boxed{42}>>", 0.5),  # integer
    ("<<\\boxed{ -42 }>>", 0.5),  # stripped, signed
    ("<<\\boxed{4.0}>>", 0.0),  # not an integer literal
    ("<<\\boxed{\u0664}>>", 0.5),  # Unicode digit matches \d
    ("<<\\boxed{1}>> <<\\boxed{x}>>", 0.0),  # the last box counts
    ("<<\\boxed{1", 0.0),  # no closing }>>
    ("}>> <<\\boxed{7", 0.5),  # closing before: split() keeps the tail
]


@pytest.mark.parametrize(("text", "want"), INT_CASES)
def test_int_parsable(text: str, want: float) -> None:
    assert both("int_parsable_reward_func", [text]) == [want]


def test_misaligned_searcher_regression() -> None:
    # Once segfaulted: the scorer's AVX2 searcher sat unaligned inside the Python object.
    meta = FormatSpec(
        name="meta", reasoning_start="(*", reasoning_end="*)", solution_start="[[", solution_end="]]"
    )
    text = "]]>\u20071__0-0@åC\U000632a8\U000389a9/õ.51__0\x85¦\U0006c7b5\x82\t"
    for _ in range(200):
        assert both("int_parsable_reward_func", [text * 3, text], spec=meta) == [0.0, 0.0]


# ---- TRL call shapes ------------------------------------------------------------------------


def test_trl_signature_and_names() -> None:
    msgs = [[{"role": "assistant", "content": OK(4)}], [{"role": "assistant", "content": "x"}]]
    kwargs = {"completion_ids": [[1], [2]], "trainer_state": None, "extra_column": [1, 2]}
    assert match_format_exactly(prompts=[[], []], completions=msgs, answer=["4", "4"], **kwargs) == [3.0, 0.0]
    assert check_answer_accuracy([[], []], msgs, ["4", "4"]) == [5.0, -2.0]  # positional, as in the seed
    names = [f.__name__ for f in make_reward_funcs()[0]]
    assert names == list(_core.SEED000_NAMES)
    assert get_reward("check_numbers").__name__ == "check_numbers"
    assert set(REGISTRY) >= {"check_answer", "check_numbers", "cosine_correctness_reward_func"}
    for name, f in REGISTRY.items():
        assert f.__name__ == name and f.__doc__


def test_custom_tags_bind_through_make_reward_funcs() -> None:
    think = FormatSpec(
        name="t", reasoning_end="</think>", solution_start="<answer>", solution_end="</answer>"
    )
    funcs, weights = make_reward_funcs(think, list(_core.SEED000_NAMES), [1, 1, 2, 0.5])
    assert weights == [1.0, 1.0, 2.0, 0.5]
    text = "<think>x</think><answer>12</answer>"
    assert [f(completions=[text], answer=["12"])[0] for f in funcs] == [3.0, 1.5, 5.0, 3.5]
    # seed 000 tags do not match under the custom spec
    assert funcs[0](completions=[OK(12)], answer=["12"]) == [0.0]


def test_custom_scores() -> None:
    from dataclasses import replace

    spec = replace(PRESETS["seed000"], scores=replace(PRESETS["seed000"].scores, exact=7.25, approx_hit=0.1))
    assert both("match_format_exactly", [OK(1)], spec=spec) == [7.25]
    assert both("match_format_approximately", [OK(1)], spec=spec) == [0.1 + 0.1 + 0.1]


# ---- registry -------------------------------------------------------------------------------


def test_get_reward_dotted_paths() -> None:
    assert get_reward("py_rewards.reference:match_format_exactly") is reference.match_format_exactly
    assert get_reward("py_rewards.reference.match_format_exactly") is reference.match_format_exactly
    funcs, _ = make_reward_funcs(None, ["check_answer", "py_rewards.reference:int_parsable_reward_func"])
    assert funcs[1] is reference.int_parsable_reward_func


@pytest.mark.parametrize(
    "bad",
    [
        "no_such_reward",  # not registered, not a path
        "py_rewards.reference:nope",  # missing attribute
        "no_such_pkg.mod:func",  # missing module
        "py_rewards.spec:PRESETS",  # not callable
    ],
)
def test_get_reward_errors_name_the_reward(bad: str) -> None:
    with pytest.raises(ValueError, match="known names are|not callable") as exc:
        get_reward(bad)
    assert repr(bad) in str(exc.value)


def test_make_reward_funcs_checks() -> None:
    with pytest.raises(ValueError, match="weights has 1 items but names has 2"):
        make_reward_funcs(None, ["check_answer", "check_numbers"], [1.0])
    with pytest.raises(ValueError, match="unknown reward backend"):
        make_reward_funcs(None, ["check_answer"], backend="cuda")


# ---- bad calls ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["rust", "python"])
@pytest.mark.parametrize(
    ("fn", "completions", "answer", "exc", "words"),
    [
        (
            "check_answer_accuracy",
            [OK(1), OK(2)],
            ["1"],
            ValueError,
            "answer has 1 items but completions has 2",
        ),
        ("check_numeric_extraction", [OK(1)], None, ValueError, "needs answer="),
        ("check_answer_accuracy", [OK(1)], [None], TypeError, r"answer\[0\] must be str, got NoneType"),
        ("check_answer_accuracy", [OK(1)], "1", TypeError, "answer must be a list"),
        ("match_format_exactly", [OK(1), 5], None, TypeError, r"completions\[1\] must be a str"),
        (
            "match_format_exactly",
            [[{"content": b"x"}]],
            None,
            TypeError,
            r"completions\[0\]\[0\]\['content'\]",
        ),
        ("match_format_exactly", None, None, ValueError, "completions is required"),
        ("match_format_exactly", "text", None, TypeError, "got a single str"),
        ("strict_format_reward_func", [[]], None, TypeError, r"completions\[0\] must be a str"),
        # A dict was scored over its keys (docs/history.md, hardening round 1); a set has no order to pair
        # with answers.
        (
            "match_format_exactly",
            {OK(1): 1},
            None,
            TypeError,
            "completions must be a list of completions, got dict",
        ),
        (
            "match_format_exactly",
            {OK(1)},
            None,
            TypeError,
            "completions must be a list of completions, got set",
        ),
        ("check_answer_accuracy", [OK(1)], {"1": 1}, TypeError, "answer must be a list of str .* got dict"),
        # Bare bytes were iterated as ints ("completions[0] must be a str ..., got int").
        ("match_format_exactly", b"ab", None, TypeError, "must be a list of completions, got bytes"),
        ("check_answer_accuracy", [OK(1), OK(2)], b"12", TypeError, "answer must be a list .* got bytes"),
        ("check_numeric_extraction", [OK(1)], frozenset({"1"}), TypeError, "got frozenset"),
    ],
)
def test_bad_calls(backend: str, fn: str, completions, answer, exc: type, words: str) -> None:
    (f,), _ = make_reward_funcs(None, [fn], backend=backend)
    with pytest.raises(exc, match=words):
        f(prompts=None, completions=completions, answer=answer)


def test_format_rewards_do_not_need_answers() -> None:
    # The seed's format rewards ignore `answer`; a bad answer column must not break them.
    assert match_format_exactly(completions=[OK(1)], answer=[None]) == [3.0]
    assert match_format_approximately(completions=[OK(1)], answer=None) == [1.5]


def test_empty_tag_is_rejected() -> None:
    with pytest.raises(ValueError, match="reasoning_end"):
        FormatSpec(reasoning_end="")
    with pytest.raises(ValueError, match="solution_end"):
        _core.Scorer("a", "b", "c", "")


DEBUG_CORE_ENV = "PY_REWARDS_DEBUG_CORE"

_PANIC_CHECK = """
import importlib.util, os, sys
path = os.environ.get("PY_REWARDS_DEBUG_CORE")
if path:  # this build of the extension, in place of the installed one
    spec = importlib.util.spec_from_file_location("py_rewards._core", path)
    core = importlib.util.module_from_spec(spec)
    sys.modules["py_rewards._core"] = core
    spec.loader.exec_module(core)
from py_rewards import RewardCorePanic, _core, match_format_exactly
try:
    _core._debug_panic()
except RewardCorePanic as exc:
    assert "debug panic at item 12345" in str(exc), exc
else:
    sys.exit("no exception")
assert issubclass(RewardCorePanic, RuntimeError)
text = "<start_working_out>2+2<end_working_out><SOLUTION>1</SOLUTION>"
assert match_format_exactly(completions=[text]) == [3.0]  # still usable afterwards
"""


def test_rust_panic_is_a_python_exception() -> None:
    """A panic in a pool thread, with the GIL released, is a RewardCorePanic (a RuntimeError).

    The hook ``_debug_panic`` exists only with the cargo feature ``debug-hooks``, which release
    builds leave out: ``make test`` builds such a core and names it in PY_REWARDS_DEBUG_CORE.
    """
    assert issubclass(RewardCorePanic, RuntimeError)
    if not os.environ.get(DEBUG_CORE_ENV) and not hasattr(_core, "_debug_panic"):
        pytest.skip(
            f"needs a core built with the cargo feature debug-hooks: run `make test`, or set "
            f"{DEBUG_CORE_ENV} to the libreward_core.so of `cargo build --release -p reward_core "
            f"--features python,debug-hooks`"
        )
    proc = subprocess.run([sys.executable, "-c", _PANIC_CHECK], timeout=60, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_lone_surrogates_fall_back_to_the_reference() -> None:
    text = OK("4") + "\ud800"
    assert both("match_format_exactly", [text, OK(4)]) == [0.0, 3.0]
    assert both("check_answer_accuracy", ["\udfff" + OK(4)], ["4"]) == [5.0]


def test_empty_batch() -> None:
    for name in [*_core.SEED000_NAMES, "strict_format_reward_func", "int_parsable_reward_func"]:
        assert both(name, [], []) == []


# ---- the batch cache ------------------------------------------------------------------------


def test_cache_serves_the_other_three_calls() -> None:
    scorer = get_scorer()
    scorer.clear_cache()
    completions = [[{"content": OK(i)}] for i in range(50)] + [[{"content": "junk"}]]
    answer = [str(i) for i in range(51)]
    hits0, misses0, _ = scorer.cache_info()
    results = [f(prompts=None, completions=completions, answer=answer) for f in make_reward_funcs()[0]]
    hits, misses, size = scorer.cache_info()
    assert (hits - hits0, misses - misses0, size) == (3, 1, 51)
    ref = [
        f(prompts=None, completions=completions, answer=answer)
        for f in make_reward_funcs(backend="python")[0]
    ]
    assert results == ref


def test_cache_is_invalidated_by_new_content_or_answers() -> None:
    scorer = get_scorer()
    completions = [OK(1), OK(2)]
    assert check_answer_accuracy(completions=completions, answer=["1", "2"]) == [5.0, 5.0]
    completions[1] = OK(3)  # same list object, new string
    assert check_answer_accuracy(completions=completions, answer=["1", "2"]) == [5.0, -2.5]
    assert check_answer_accuracy(completions=completions, answer=["1", "3"]) == [5.0, 5.0]
    # equal but distinct string objects are a miss, never a wrong hit
    again = ["".join([OK(1)]), "".join([OK(3)])]
    _, misses, _ = scorer.cache_info()
    assert check_answer_accuracy(completions=again, answer=["1", "3"]) == [5.0, 5.0]
    assert scorer.cache_info()[1] == misses + 1
    # the format-only columns are served even when the answers differ
    hits = scorer.cache_info()[0]
    assert match_format_exactly(completions=again, answer=["x", "y"]) == [3.0, 3.0]
    assert scorer.cache_info()[0] == hits + 1


def _all_four(backend: str, completions: list, answer: list[str]) -> list[list[float]]:
    funcs = make_reward_funcs(backend=backend)[0]
    return [f(prompts=None, completions=completions, answer=answer) for f in funcs]


def test_cache_never_serves_a_changed_message_list() -> None:
    """TRL's shape (lists of message dicts): any change to a content string (in place in its dict,
    a new dict, a new message list, a plain str item) or to an answer is a miss, never a stale hit."""
    scorer = get_scorer()
    scorer.clear_cache()
    n = 300  # many blocks of the fast identity check, several chunks of the first pass
    completions: list = [[{"role": "assistant", "content": OK(i)}] for i in range(n)]
    answer = [str(i) for i in range(n)]
    assert _all_four("rust", completions, answer) == _all_four("python", completions, answer)
    changes = [
        lambda: completions[7][0].__setitem__("content", OK(1000)),  # same dict, new string
        lambda: completions[0][0].__setitem__("content", OK(-1)),  # the very first item
        lambda: completions.__setitem__(150, [{"role": "assistant", "content": OK(999)}]),
        lambda: completions[299].__setitem__(0, {"role": "assistant", "content": OK(5)}),
        lambda: completions[20].insert(0, {"content": "".join([OK(20)])}),  # equal, distinct str
        lambda: completions.__setitem__(33, OK(0)),  # a plain str item among message lists
        lambda: answer.__setitem__(42, "41"),  # same answers list, new string
        lambda: answer.__setitem__(n - 1, "".join(["5"])),
    ]
    for change in changes:
        change()
        hits, misses, _ = scorer.cache_info()
        got = _all_four("rust", completions, answer)
        assert scorer.cache_info()[:2] == (hits + 3, misses + 1)
        assert got == _all_four("python", completions, answer)
    # a dict without "content" now: the error, not a cached score
    completions[5][0].pop("content")
    with pytest.raises(TypeError, match=r"completions\[5\]"):
        check_answer_accuracy(completions=completions, answer=answer)


def test_non_ascii_texts_in_a_parallel_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Latin-1 / UCS-2 / UCS-4 strings (a first call copies them as UCS-4 and encodes them itself)
    score as the reference, serial or parallel."""
    rng = __import__("random").Random(5)
    bits = ["x", "\u00d7", "\u03c0", "\u2248", "\U0001f600", "\u0663", " ", "\u3000", "<SOLUTION>", "7"]
    completions = []
    for i in range(400):
        body = "".join(rng.choice(bits) for _ in range(rng.randint(0, 60)))
        tail = rng.choice([OK(i), OK("\u0661\u0662"), OK(" \u00d7 "), "", "<SOLUTION>\u0664"])
        completions.append([{"role": "assistant", "content": body + tail}])
    answer = [rng.choice([str(i), "\u0661\u0662", "12", " 4 "]) for i in range(400)]
    want = _all_four("python", completions, answer)
    for parallel in ("1", "0"):
        monkeypatch.setenv("PY_REWARDS_PARALLEL", parallel)
        get_scorer().clear_cache()
        assert _all_four("rust", completions, answer) == want
    # a lone surrogate anywhere in the batch: the reference's result, in a message list too
    completions[123] = [{"content": OK(4) + "\ud800"}]
    get_scorer().clear_cache()
    assert _all_four("rust", completions, answer) == _all_four("python", completions, answer)


class _EvilKey(str):
    """A dict key equal to "content" whose comparison runs code: here it empties the batch (and
    drops its strings) in the middle of the walk over the message dicts."""

    victim: list = []

    def __hash__(self) -> int:
        return hash("content")

    def __eq__(self, other: object) -> bool:
        _EvilKey.victim.clear()
        return str.__eq__(self, other)

    __ne__ = str.__ne__


def test_a_key_comparison_that_empties_the_batch_mid_walk() -> None:
    """The walks over the message lists read items borrowed: Python code run by a dict lookup (a
    key's __eq__) that frees the batch must neither crash nor score freed strings."""
    for call in range(2):  # a first call, then a check of the cached batch
        n = 100
        completions: list = [[{"role": "assistant", "content": OK(i)}] for i in range(n)]
        answer = [str(i) for i in range(n)]
        get_scorer().clear_cache()
        if call:
            _all_four("rust", completions, answer)
        completions[40] = [{_EvilKey("content"): OK(40)}]
        _EvilKey.victim = completions
        try:
            got = _all_four("rust", completions, answer)
        except (TypeError, ValueError):
            continue  # the batch changed under the call: an error is fine, a crash is not
        assert all(len(col) in (0, n) for col in got)


def test_score_seed000_batch_api() -> None:
    out = score_seed000([OK(4), "x"], ["4", "4"])
    assert out["check_answer_accuracy"].tolist() == [5.0, -2.0]
    assert score_seed000([OK(4)])["check_answer_accuracy"] is None


# ---- parallelism, fork safety, speed --------------------------------------------------------


def _big_batch(n: int = 4000) -> tuple[list[str], list[str]]:
    texts = [("reasoning " * 30) + OK(i) if i % 3 else "<SOLUTION>" + " " * 200 + str(i) for i in range(n)]
    return texts, [str(i) for i in range(n)]


def test_parallel_and_serial_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    texts, answer = _big_batch()
    scorer = get_scorer()
    scorer.clear_cache()
    par = scorer.seed000(texts, answer)
    monkeypatch.setenv("PY_REWARDS_PARALLEL", "0")
    assert _core.runtime_info()[:2] == (False, 1)
    scorer.clear_cache()
    assert scorer.seed000(texts, answer) == par


@pytest.mark.parametrize(("threads", "want"), [("1", "(False, 1)"), ("3", "(True, 3)")])
def test_num_threads_env(threads: str, want: str) -> None:
    code = "from py_rewards import _core; print(_core.runtime_info()[:2])"
    env = {**os.environ, "PY_REWARDS_NUM_THREADS": threads}
    env.pop("PY_REWARDS_PARALLEL", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, timeout=60, capture_output=True, text=True)
    assert out.stdout.strip() == want, out.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_after_parallel_use_does_not_hang() -> None:
    code = """
import os, sys
from py_rewards import get_scorer, _core
texts = ["x" * 1000 + "<end_working_out><SOLUTION>%d</SOLUTION>" % i for i in range(2000)]
answer = [str(i) for i in range(2000)]
s = get_scorer()
want = s.seed000(texts, answer)
assert _core.runtime_info()[0]
pid = os.fork()
if pid == 0:
    s.clear_cache()
    ok = s.seed000(texts, answer) == want and not _core.runtime_info()[0]
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""
    env = {**os.environ, "PY_REWARDS_PARALLEL": "1", "PY_REWARDS_NUM_THREADS": "2"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, timeout=60, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# Inputs on which the seed regexes backtrack, as functions of a size k. The scores do not depend on k, so
# the engine at k = 10_000 (~2 MB each) must give the reference's scores at k = 1. A linear scan takes
# milliseconds; the regexes' quadratic or cubic work would take hours there, far past the per-test
# timeout, which is what fails a super-linear engine (no clock is read here).
DEGENERATE = {
    "loop": lambda k: "<end_working_out><SOLUTION>" * (8 * k),  # format loop, no closing tag (cubic)
    "spaces": lambda k: "<SOLUTION>" + " " * (200 * k),  # whitespace after the tag (quadratic for NUMERIC)
    "ends": lambda k: "<end_working_out><SOLUTION>x" + "</SOLUTION> " * (15 * k),  # many end tags
    "unicode": lambda k: "<SOLUTION>" + "\u3000" * (100 * k) + "-" * (100 * k),  # Unicode spaces, lone signs
}


@pytest.mark.parametrize("shape", DEGENERATE)
def test_degenerate_inputs_scale_linearly(shape: str) -> None:
    def scores(backend: str, text: str) -> list[float]:
        funcs = make_reward_funcs(backend=backend)[0]
        funcs += make_reward_funcs(None, ["strict_format_reward_func"], backend=backend)[0]
        return [f(completions=[text], answer=["1"])[0] for f in funcs]

    get_scorer().clear_cache()
    small, huge = DEGENERATE[shape](1), DEGENERATE[shape](10_000)
    assert len(huge) > 1_500_000
    assert scores("rust", huge) == scores("rust", small) == scores("python", small)


def test_import_needs_no_heavy_frameworks() -> None:
    code = (
        "import sys, py_rewards\n"
        "bad = {'torch', 'transformers', 'sentence_transformers', 'trl'} & set(sys.modules)\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_public_api() -> None:
    for name in py_rewards.__all__:
        assert hasattr(py_rewards, name), name
    assert strict_format_reward_func.__name__ == "strict_format_reward_func"
    assert int_parsable_reward_func(completions=["<<\\boxed{3}>>"]) == [0.5]
    assert check_numeric_extraction(completions=["<SOLUTION>3"], answer=["3"]) == [3.5]


@pytest.mark.parametrize(
    "module", ["py_rewards", "py_rewards.rewards", "py_rewards.reference", "py_rewards._inputs"]
)
def test_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_threads_sharing_one_scorer_get_their_own_results() -> None:
    from concurrent.futures import ThreadPoolExecutor

    batches = [([OK(i + k) for i in range(300)], [str(i) for i in range(300)]) for k in range(4)]
    want = [[f(completions=c, answer=a) for f in make_reward_funcs(backend="python")[0]] for c, a in batches]
    funcs = make_reward_funcs()[0]

    def work(k: int) -> bool:
        c, a = batches[k]
        return all([f(completions=c, answer=a) for f in funcs] == want[k] for _ in range(20))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(4)))
