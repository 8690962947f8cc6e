"""py_rewards/reference.py, differential: the Rust core == this pure-Python reference (the seeds'
regex code), `==` on every score, on random and adversarial text, for the seed tags, custom tags and
seed 001.

Run: ``pytest tests/test_rewards_parity.py`` (needs the extension built: ``pip install -e .``).
"""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from py_rewards import PRESETS, FormatSpec, _core, get_scorer, make_reward_funcs, reference

SEED000 = [
    "match_format_exactly",
    "match_format_approximately",
    "check_answer_accuracy",
    "check_numeric_extraction",
]
SEED001 = ["strict_format_reward_func", "int_parsable_reward_func"]

SPECS = {
    "seed000": FormatSpec(),
    "seed001": PRESETS["seed001"],
    "think": FormatSpec(
        name="think",
        reasoning_start="<think>",
        reasoning_end="</think>",
        solution_start="<answer>",
        solution_end="</answer>",
    ),
    # regex metacharacters (the reference re.escape()s them) and self-overlapping tags
    "meta": FormatSpec(
        name="meta", reasoning_start="(*", reasoning_end="*)", solution_start="[[", solution_end="]]"
    ),
    "overlap": FormatSpec(
        name="overlap", reasoning_start="ab", reasoning_end="aa", solution_start="a", solution_end="aa"
    ),
    "unicode": FormatSpec(
        name="unicode", reasoning_start="«", reasoning_end="»", solution_start="答:", solution_end="。"
    ),
}

NUMBERS = [
    "4",
    "42",
    "-0.5",
    "0",
    "-0",
    "0.0",
    "1,234",
    "1_000",
    "1__0",
    "_1",
    "3.",
    ".5",
    ".",
    "-",
    "--5",
    "1e5",
    "1E-3",
    "1e",
    "1e400",
    "-1e400",
    "inf",
    "-Infinity",
    "nan",
    "NaN",
    "+7",
    "0x10",
    "1.2.3",
    "١٢٣",
    "７",
    "\U0001d7d9",
    "\U00011f53",
    "²",
    "1 2",
    "1\x1c",
    "\u20072",
]
SPACES = [" ", "\n", "\r\n", "\t", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u1680", "\u2003",
          "\u2028", "\u202f", "\u205f", "\u3000", "\u200b", "\ufeff", "\u180e"]  # fmt: skip


def pieces(spec: FormatSpec) -> list[str]:
    tags = [spec.reasoning_start, spec.reasoning_end, spec.solution_start, spec.solution_end]
    halves = [t[: len(t) // 2] for t in tags if len(t) > 1] + [t[len(t) // 2 :] for t in tags if len(t) > 1]
    return tags * 3 + halves + NUMBERS + SPACES + ["a", "é", "x y", "<", ">", "/", "{", "}", "\\"]


def texts(spec: FormatSpec) -> st.SearchStrategy[str]:
    soup = st.lists(st.sampled_from(pieces(spec)) | st.text(max_size=3), max_size=30).map("".join)
    t = spec
    well_formed = st.builds(
        lambda pre, work, guess, tail: (
            f"{pre}{t.reasoning_start}{work}{t.reasoning_end}{t.solution_start}{guess}{t.solution_end}{tail}"
        ),
        st.sampled_from(["", " ", "x"]),
        st.sampled_from(["", "2+2", "think\n"]),
        st.sampled_from(NUMBERS) | st.text(max_size=4),
        st.sampled_from(["", "\n", " \u3000 ", "x", t.solution_end, "\n" + t.solution_end + "\n"]),
    )
    return soup | well_formed


ANSWERS = st.sampled_from(NUMBERS + ["", " ", " 4 ", "abc"]) | st.text(max_size=5)


def rust_vs_reference(spec: FormatSpec, names: list[str], completions: list, answer: list[str]) -> None:
    rust, _ = make_reward_funcs(spec, names, backend="rust")
    ref, _ = make_reward_funcs(spec, names, backend="python")
    for fr, fp in zip(rust, ref, strict=True):
        got = fr(prompts=None, completions=completions, answer=answer)
        want = fp(prompts=None, completions=completions, answer=answer)
        assert got == want, (fr.__name__, completions, answer)
        assert all(type(x) is float for x in got)


batch = st.integers(1, 6)


@pytest.mark.parametrize("spec_name", list(SPECS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_seed000_parity(spec_name: str, data: st.DataObject) -> None:
    spec = SPECS[spec_name]
    n = data.draw(batch)
    completions = data.draw(st.lists(texts(spec), min_size=n, max_size=n))
    answer = data.draw(st.lists(ANSWERS, min_size=n, max_size=n))
    rust_vs_reference(spec, SEED000, completions, answer)


@pytest.mark.parametrize("spec_name", ["seed001", "seed000", "meta", "overlap"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_seed001_parity(spec_name: str, data: st.DataObject) -> None:
    spec = SPECS[spec_name]
    completions = data.draw(st.lists(texts(spec), min_size=1, max_size=6))
    rust_vs_reference(spec, SEED001, completions, [""] * len(completions))
    assert get_scorer(spec).extract_boxed(completions) == reference.extract_boxed(completions, spec)


@settings(max_examples=400, deadline=None)
@given(text=texts(SPECS["seed000"]) | st.text())
@example("<end_working_out><SOLUTION>4</SOLUTION>\n")
@example("<end_working_out><SOLUTION>4</SOLUTION>\n\n")  # `$` before a final newline, and after it
@example("<end_working_out><SOLUTION></SOLUTION></SOLUTION>")  # empty capture is not allowed
@example("<SOLUTION>\u3000\x1c -.5,1")  # Unicode whitespace before the number
def test_groups_match_python_re(text: str) -> None:
    """The captured groups themselves, not just the scores."""
    fmt, num = reference.format_regex(), reference.numeric_regex()
    scorer = get_scorer()
    m = fmt.search(text)
    assert scorer.format_group(text) == (m.group(1) if m else None)
    m = num.search(text)
    assert scorer.numeric_group(text) == (m.group(1) if m else None)


@settings(max_examples=600, deadline=None)
@given(
    s=st.sampled_from(NUMBERS)
    | st.text(
        alphabet=st.sampled_from(list("0123456789._-+eE, infatyINFATY") + [c for c in SPACES if len(c) == 1]),
        max_size=10,
    )
    | st.from_regex(r"\s*[-+]?(\d[\d_]*)?\.?\d*([eE][-+]?\d+)?\s*", fullmatch=True)
    | st.text(max_size=6)
)
def test_float_parity(s: str) -> None:
    try:
        want: float | None = float(s)
    except ValueError:
        want = None
    got = _core.py_float(s)
    if want is not None and want != want:
        assert got is not None and got != got
    else:
        assert got == want and (want is None or str(got) == str(want)), s
    assert _core.py_strip(s) == s.strip()


def test_unicode_tables_match_this_python() -> None:
    """Every code point: `str.isspace()` (strip, `\\s`) and `str.isdecimal()` (`\\d`, float digits)."""
    assert unicodedata.unidata_version.startswith(_core.runtime_info()[2] + ".")
    chars = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    spaces = [c for c in chars if _core.py_strip(c) == ""]
    assert spaces == [c for c in chars if c.isspace()]
    # float() of a lone digit is its value; of anything else (but spaces) it fails.
    digits = [c for c in chars if _core.py_float(c) is not None]
    assert digits == [c for c in chars if c.isdecimal()]
    assert all(_core.py_float(c) == float(c) for c in digits)


def test_message_lists_and_strings_score_alike() -> None:
    done = "<start_working_out>x<end_working_out><SOLUTION>{}</SOLUTION>".format
    plain = [done(4), done(5), "nothing"]
    msgs = [[{"role": "assistant", "content": c}] for c in plain]
    rust_vs_reference(SPECS["seed000"], SEED000, msgs, ["4", "4", "4"])
    for name in SEED000:
        f = make_reward_funcs(None, [name])[0][0]
        assert f(completions=msgs, answer=["4"] * 3) == f(completions=plain, answer=["4"] * 3)
