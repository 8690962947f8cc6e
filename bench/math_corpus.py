"""A fixed-seed corpus of (prediction, gold) answer pairs built from MATH500 gold answers.

For each gold answer it writes equivalent rewrites (other LaTeX spellings of the same value),
near misses (one small change that makes it wrong) and wrong answers (another problem's gold), so
that a judge can be checked against Math-Verify on all three. Used by tests/test_math_verify.py
and bench/bench_math.py; nothing here calls a judge.

    python bench/math_corpus.py                  # summary of the corpus from the shipped sample
    python bench/math_corpus.py --golds ../shared/data/math/test.jsonl --show 30
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "cli" / "data" / "samples" / "math500.jsonl"
SHARED = ROOT.parent / "shared" / "data" / "math" / "test.jsonl"


@dataclass(frozen=True)
class Pair:
    pred: str
    gold: str
    kind: str  # "rewrite" | "near_miss" | "wrong" (what the generator meant; the judges decide)
    how: str  # which transformation made it


def load_golds(path: Path = SAMPLE) -> list[str]:
    """The ``answer`` field of a MATH500-style jsonl, in file order (duplicates kept once)."""
    seen: dict[str, None] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                seen.setdefault(json.loads(line)["answer"], None)
    return list(seen)


# ---- rewrites: same value, other spelling --------------------------------------------------------
_INT = re.compile(r"^-?\d+$")
_DEC = re.compile(r"^-?\d*\.\d+$")
_FRAC = re.compile(r"^(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}$")
_FRAC_SHORT = re.compile(r"\\frac\s*(\d)(\d)")
_THOUSANDS = re.compile(r"^(\\\$)?-?\d{1,3}(,(\\!)?\s?\d{3})+$")


def _value(gold: str) -> Fraction | None:
    g = gold.strip()
    if "," in g:
        if not _THOUSANDS.match(g):
            return None  # a list, not a number
        g = g.replace("\\!", "").replace(",", "").replace(" ", "")
    g = g.replace("\\$", "")
    if _INT.match(g) or _DEC.match(g):
        return Fraction(g)
    m = _FRAC.match(g.replace(" ", ""))
    if m:
        v = Fraction(int(m.group(2)), int(m.group(3)))
        return -v if m.group(1) else v
    return None


def _dec(v: Fraction) -> str | None:
    """A terminating decimal for ``v`` with at most 8 places, else None."""
    for places in range(0, 9):
        scaled = v * 10**places
        if scaled.denominator == 1:
            s = f"{abs(scaled.numerator):0{places + 1}d}"
            body = s if places == 0 else s[:-places] + "." + s[-places:]
            return ("-" if v < 0 else "") + body
    return None


def _frac(v: Fraction, cmd: str = "\\frac") -> str:
    sign = "-" if v < 0 else ""
    return f"{sign}{cmd}{{{abs(v.numerator)}}}{{{v.denominator}}}"


def rewrites(gold: str, rng: random.Random) -> Iterator[tuple[str, str]]:
    """(pred, how) spellings of the same answer."""
    # `13,535` anywhere: its comma is no list separator
    thousands = re.search(r"\d,(\\!)?\s?\d{3}(?!\d)", gold) is not None
    yield gold, "identity"
    # no spaces, except where one ends a command name (`\\cot x` must not become `\\cotx`)
    yield re.sub(r"(?<![a-zA-Z]) | (?![a-zA-Z])", "", re.sub(r"\s+", " ", gold)), "no_spaces"
    if not thousands:
        yield re.sub(r"([+=,<>])", r" \1 ", gold), "spaces"
    yield f"\\boxed{{{gold}}}", "boxed"
    yield f"\\displaystyle {gold}", "displaystyle"
    yield f"{{{gold}}}", "braced"
    if "," not in gold and "=" not in gold:
        yield f"\\left({gold}\\right)", "parenthesised"
    if "\\frac" in gold:
        yield gold.replace("\\frac", "\\dfrac"), "dfrac"
        yield gold.replace("\\frac", "\\tfrac"), "tfrac"
    if "\\dfrac" in gold:
        yield gold.replace("\\dfrac", "\\frac"), "frac"
    m = _FRAC_SHORT.search(gold)
    if m:
        yield _FRAC_SHORT.sub(r"\\frac{\1}{\2}", gold), "frac_braces"
    if re.search(r"\\frac\{(\d)\}\{(\d)\}", gold):
        yield re.sub(r"\\frac\{(\d)\}\{(\d)\}", r"\\frac\1\2", gold), "frac_short"
    if (
        re.search(r"\\frac\{([^{}]+)\}\{([^{}]+)\}", gold)
        and "\\frac{\\" not in gold
        and not re.search(r"\d\s*\\frac", gold)
    ):
        yield re.sub(r"\\frac\{(\d+)\}\{(\d+)\}", r"\1/\2", gold), "slash"
    if "\\sqrt{" in gold:
        yield re.sub(r"\\sqrt\{(\d)\}", r"\\sqrt\1", gold), "sqrt_short"
        # after a coefficient the radicand needs parentheses: 3\\sqrt{13} = 3(13)^{1/2}
        yield (
            re.sub(
                r"(\d?)\s*\\sqrt\{(\d+)\}",
                lambda m: f"{m[1]}({m[2]})^{{1/2}}" if m[1] else f"{m[2]}^{{1/2}}",
                gold,
            ),
            "sqrt_power",
        )
        m2 = re.fullmatch(r"(\d+)\s*\\sqrt\{(\d+)\}", gold)
        if m2:
            a, b = int(m2.group(1)), int(m2.group(2))
            yield f"\\sqrt{{{a * a * b}}}", "sqrt_absorb"
    if "(" in gold and "\\left" not in gold:
        yield gold.replace("(", "\\left(").replace(")", "\\right)"), "left_right"
    if "\\left" in gold:
        yield gold.replace("\\left", "").replace("\\right", ""), "no_left_right"
    if "^\\circ" in gold:
        yield gold.replace("^\\circ", ""), "no_degrees"
        yield gold.replace("^\\circ", "^{\\circ}"), "degrees_braced"
    if "\\%" in gold:
        yield gold.replace("\\%", ""), "no_percent"
    if "\\$" in gold:
        yield gold.replace("\\$", ""), "no_dollar"
    if "\\!" in gold:
        yield gold.replace(",\\!", "").replace("\\!", "").replace(" ", ""), "no_thousands"
    for cmd in ("\\text", "\\mbox", "\\textbf", "\\mathrm"):
        if cmd + "{" in gold:
            inner = re.sub(r"\\(?:text|mbox|textbf|mathrm)\{([^{}]*)\}", r" \1", gold)
            yield inner.strip(), "untext"
            unit = re.sub(r"\\(?:text|mbox)\{\s*[a-z ]+\}(\^\d)?", "", gold).strip()
            if unit and unit != gold and re.search(r"\d", unit):
                yield unit, "no_units"
            break
    m3 = re.fullmatch(r"\\text\{\(([A-E])\)\}", gold)
    if m3:
        yield m3.group(1), "choice_letter"
        yield f"({m3.group(1)})", "choice_paren"
        yield m3.group(1).lower(), "choice_lower"
    if re.fullmatch(r"\\text\{[A-Za-z]+\}", gold):
        word = gold[6:-1]
        yield word, "bare_word"
        yield f"\\textbf{{{word}}}", "textbf"
    v = _value(gold)
    if v is not None:
        d = _dec(v)
        if d is not None:
            yield d, "as_decimal"
            if "." in d:
                yield d + "0", "trailing_zero"
            if v.denominator == 1:
                yield d + ".0", "point_zero"
                n = abs(v.numerator)
                if n >= 1000:
                    yield ("-" if v < 0 else "") + f"{n:,}", "thousands"
                    yield ("-" if v < 0 else "") + f"{n:,}".replace(",", ",\\!"), "thousands_bang"
        if v.denominator != 1:
            yield _frac(v), "as_fraction"
            yield _frac(v, "\\dfrac"), "as_dfrac"
            if abs(v) > 1:
                whole = abs(v.numerator) // v.denominator
                rest = Fraction(abs(v.numerator) % v.denominator, v.denominator)
                yield (
                    f"{'-' if v < 0 else ''}{whole}\\frac{{{rest.numerator}}}{{{rest.denominator}}}",
                    "mixed",
                )
            if d is None:
                yield f"{float(v):.6f}", "six_places"
        k = rng.choice([2, 3, 4])
        yield (
            _frac(v * k if v.denominator == 1 else v, "\\frac").replace(
                f"{{{(v * k).denominator if v.denominator == 1 else v.denominator}}}",
                f"{{{v.denominator}}}",
            )
            if v.denominator != 1
            else f"\\frac{{{v.numerator * k}}}{{{k}}}",
            "unreduced",
        )
        if v.denominator == 1 and v >= 0:
            yield f"x = {gold}", "assignment"
    if re.fullmatch(r"[a-z] ?= ?.+", gold):
        yield gold.split("=", 1)[1].strip(), "rhs_only"
    # reorder an unordered list / set
    body = gold
    braces = ""
    if gold.startswith("\\{") and gold.endswith("\\}"):
        body, braces = gold[2:-2], "set"
    if "," in body and not thousands and not re.search(r"[(\[{}]|\\!|\\frac|\\displaystyle", body):
        parts = [p.strip() for p in body.split(",")]
        if len(parts) > 1:
            rng.shuffle(parts)
            joined = ", ".join(parts)
            yield (f"\\{{{joined}\\}}" if braces else joined), "reorder"
            if not braces:
                yield f"\\{{{joined}\\}}", "as_set"
    # commute a top-level sum a + b
    if gold.count("+") == 1 and not re.search(r"[(){}\[\]=,]", gold):
        a, b = gold.split("+")
        if a.strip() and b.strip():
            yield f"{b.strip()} + {a.strip()}", "commute"
    if "\\cup" in gold:
        parts = [p.strip() for p in gold.split("\\cup")]
        yield " \\cup ".join(reversed(parts)), "union_reorder"
    if "\\pm" in gold and "\\{" not in gold:
        m4 = re.fullmatch(r"(.+?)\s*\\pm\s*(.+)", gold)
        if m4:
            yield f"{m4.group(1)} + {m4.group(2)}, {m4.group(1)} - {m4.group(2)}", "pm_expand"


# ---- near misses: one change that makes it wrong ---------------------------------------------------
def _bump_number(gold: str, rng: random.Random) -> str | None:
    # not a base subscript (`2516_8`): the same digits in another base is no answer a model writes
    nums = [m for m in re.finditer(r"\d+", gold) if not re.search(r"_\{?$", gold[: m.start()])]
    if not nums:
        return None
    m = rng.choice(nums)
    n = int(m.group())
    new = n + rng.choice([1, 2, 9, 10]) if n < 10**15 else n + 1
    return gold[: m.start()] + str(new) + gold[m.end() :]


def near_misses(gold: str, rng: random.Random) -> Iterator[tuple[str, str]]:
    b = _bump_number(gold, rng)
    if b:
        yield b, "bump_number"
    b2 = _bump_number(gold, random.Random(rng.random()))
    if b2:
        yield b2, "bump_number_2"
    if gold.startswith("-"):
        yield gold[1:], "drop_sign"
    elif not re.search(r"[,=]|\\in|\\text|\\box|\\display", gold):
        yield "-" + gold, "add_sign"
    v = _value(gold)
    if v is not None:
        if v != 0:
            yield _frac(1 / v) if v.denominator != 1 or abs(v) != 1 else str(-v), "reciprocal"
        yield str(v * 10) if (v * 10).denominator == 1 else _frac(v * 10), "times_ten"
        if v.denominator != 1 and _dec(v) is None:
            yield f"{float(v):.2f}", "rounded_2"
            yield f"{float(v):.4f}", "rounded_4"
        d = _dec(v)
        if d and "." in d:
            yield d[:-1] + str((int(d[-1]) + 1) % 10), "last_digit"
    if "\\sqrt" in gold:
        yield gold.replace("\\sqrt", "", 1), "drop_sqrt"
    if "^2" in gold:
        yield gold.replace("^2", "^3", 1), "power"
    if "(" in gold and ")" in gold and "," in gold and "\\left" not in gold:
        yield gold.replace("(", "[", 1), "bracket"
        inner = gold[gold.index("(") + 1 : gold.rindex(")")]
        parts = inner.split(",")
        if len(parts) == 2 and not re.search(r"[()\[\]]", inner):
            yield gold.replace(inner, f"{parts[1].strip()}, {parts[0].strip()}"), "swap_pair"
    if re.search(r"[a-z]", re.sub(r"\\[a-zA-Z]+", "", gold)):
        letters = sorted(set(re.findall(r"(?<![\\a-zA-Z])([a-z])(?![a-zA-Z])", gold)) - {"e", "i"})
        if letters:
            x = letters[0]
            y = "q" if x != "q" else "w"
            yield re.sub(rf"(?<![\\a-zA-Z]){x}(?![a-zA-Z])", y, gold), "rename_var"
    if "+" in gold:
        yield gold.replace("+", "-", 1), "flip_op"
    if "," not in gold and "=" not in gold and "\\in" not in gold:
        yield f"{gold} + 1", "plus_one"
        yield f"2({gold})", "doubled"
    if "\\pi" in gold:
        yield gold.replace("\\pi", "", 1).strip() or "1", "drop_pi"
        yield "3.14" if gold == "\\pi" else gold.replace("\\pi", "3.14"), "pi_approx"
    if "," in gold and "(" not in gold:
        yield ",".join(gold.split(",")[:-1]), "drop_item"


# Rewrites that wrap the whole answer (applicable to any gold, so they would otherwise dominate chains).
_WRAPPERS = {"boxed", "displaystyle", "braced", "parenthesised", "left_right"}


def build(golds: list[str], seed: int = 13, per_gold: int = 64) -> list[Pair]:
    """Rewrites, near misses and wrong answers for each gold (deduplicated, in a fixed order)."""
    rng = random.Random(seed)
    out: list[Pair] = []
    seen: set[tuple[str, str]] = set()

    def add(pred: str | None, gold: str, kind: str, how: str) -> None:
        if pred is None or (pred, gold) in seen:
            return
        seen.add((pred, gold))
        out.append(Pair(pred, gold, kind, how))

    makers: list[tuple[str, Callable[[str, random.Random], Iterator[tuple[str, str]]]]] = [
        ("rewrite", rewrites),
        ("near_miss", near_misses),
    ]
    for gold in golds:
        start = len(out)
        for kind, make in makers:
            for pred, how in make(gold, rng):
                add(pred, gold, kind, how)
        # rewrites of rewrites and near misses of rewrites, until the quota is met
        tries = 0
        while len(out) - start < per_gold - 6 and tries < 400:
            tries += 1
            # (a 6-place decimal is equal only as written: no value rewrites of it)
            base = [
                p
                for p in out[start:]
                if p.kind == "rewrite" and "boxed" not in p.how and "six_places" not in p.how
            ]
            if not base:
                break
            p = rng.choice(base)
            kind, make = rng.choice(makers)
            for pred, how in make(p.pred, rng):
                if how == "rename_var" and "assignment" in p.how:
                    continue  # `q = 9` for `9` is still right
                # one use of each rewrite per chain: `{{{x}}}` or `\\displaystyle\\displaystyle` is no
                # answer a model writes
                if how in p.how.split("+"):
                    continue
                # at most one wrapper around the whole answer per chain, for the same reason
                if how in _WRAPPERS and _WRAPPERS & set(p.how.split("+")):
                    continue
                if rng.random() < 0.5:
                    add(pred, gold, kind, f"{p.how}+{how}")
        for other in rng.sample(golds, min(8, len(golds))):
            if other != gold:
                add(other, gold, "wrong", "other_gold")
    return out


def md_code(s: str) -> str:
    """A markdown table cell holding ``s`` as code (pipes escaped)."""
    s = s.replace("|", "\\|")
    return f"`` {s} ``" if "`" in s else f"`{s}`"


def row_key(pred: str, gold: str) -> str:
    """How a disagreement's row starts in bench/math_verify.md (tests/test_math_verify.py looks for it)."""
    return f"| {md_code(pred)} | {md_code(gold)} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--golds", type=Path, default=SAMPLE, help="MATH500-style jsonl with an 'answer' field")
    ap.add_argument("--show", type=int, default=0, help="print the first N pairs")
    args = ap.parse_args()
    pairs = build(load_golds(args.golds))
    kinds: dict[str, int] = {}
    for p in pairs:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    print(f"{len(pairs)} pairs from {args.golds}: {kinds}")
    for p in pairs[: args.show]:
        print(f"{p.kind:9} {p.how:24} pred={p.pred!r:40} gold={p.gold!r}")


if __name__ == "__main__":
    main()
