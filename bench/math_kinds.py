"""A corpus of answer shapes beyond bench/math_corpus.py's rewrites: (prediction, gold, verdict) cases.

bench/math_corpus.py rewrites bare MATH500 gold answers. The shapes here are those a judge meets in
real solutions and completions, one kind each (bench/math_verify.md, "Answer shapes"):

- ``several``: several answers, one box each (``\\boxed{1} and \\boxed{2}``, ``$\\boxed{1}\\boxed{2}$``),
  against a gold list, and MATH reference solutions that box several answers, used as the gold;
- ``prose``: answers in prose with no box: MATH500 solutions with the box taken off, the "final
  answer" phrasings (minerva's ``Final Answer: The final answer is $x$. I hope it is correct.``,
  ``Answer: x``, ``**Answer:** \\[ x \\]``), GSM8K reference solutions (money, ``<<calc>>`` notes),
  and Gemma-3-270M's GSM8K completions (bench/results/learning-gemma/round*_eval_samples.jsonl.gz);
- ``labelled``: answers with a label that is not one variable: DAPO problems' "find $m+n$"
  (``$m+n = 113$``), MATH problems' ordered pairs (``$(p,q) = (3,2)$``, ``p = 3, q = 2``) and segments
  (``$AB = 4$``, ``$|AB| = 4$``), lists of labelled solutions (``p=5,q=2;p=7,q=2``);
- ``relations``: MATH interval answers as inequalities, memberships and intervals (each pair, both
  ways), ASCII ``<=`` ``>=`` ``!=``, sets with repeats, ``\\approx`` and ``=`` chains of constants;
- ``and_or``: MATH list answers joined by a bare ``and`` / ``or``;
- ``matrix_sum``: MATH matrix answers written as sums and multiples of matrices, sums ``\\sum``;
- ``hack``: completions that must not score (an empty box, several candidates, the gold inside a
  longer wrong answer, the gold only in a ``\\text{}`` aside or in prose next to another boxed
  answer, an unclosed box): every one is False.

Verdicts are by construction, each with its reason (``why``); every near miss changes one number or
one item of a correct case. Math-Verify is a second opinion (bench/bench_math.py reports where it
differs). The golds come from the MATH train/test files and the DAPO / GSM8K copies under
``../shared/data`` (see its SOURCES.md); nothing is taken from another verifier's tests.

    python bench/math_kinds.py            # rewrites bench/math_kinds.jsonl.gz (fixed seed)
    python bench/math_kinds.py --show 20  # and prints some cases
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the shared data copies (../shared/data from a checkout; a worktree may sit one level deeper)
SHARED = next((p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()), ROOT.parent)
OUT = ROOT / "bench" / "math_kinds.jsonl.gz"
KINDS = ("several", "prose", "labelled", "relations", "and_or", "matrix_sum", "hack")


@dataclass(frozen=True)
class Case:
    kind: str
    pred: str
    gold: str
    want: bool
    why: str
    source: str


# ---- reading the sources ----------------------------------------------------------------------------
def boxes(text: str) -> list[tuple[int, int, str]]:
    """Every ``\\boxed{…}`` of ``text`` (braces matched): (start, end, content), in order."""
    out = []
    i = 0
    while (i := text.find("\\boxed{", i)) >= 0:
        depth, j = 0, i + 6
        while j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                out.append((i, j + 1, text[i + 7 : j]))
                break
            j += 1
        i += 7
    return out


def math_rows() -> list[dict[str, str]]:
    """MATH problems with their reference solution and its last boxed answer (train, test)."""
    import pandas as pd

    rows, seen = [], set()
    for split in ("train", "test"):
        df = pd.read_parquet(SHARED / "math" / "hendrycks_full" / f"{split}.parquet")
        for k, rm in enumerate(df.reward_model):
            gt = rm["ground_truth"]
            b = boxes(gt["solution"])
            if not b or gt["question"] in seen:
                continue
            seen.add(gt["question"])
            rows.append(
                {
                    "problem": gt["question"],
                    "solution": gt["solution"],
                    "answer": b[-1][2].strip(),
                    "id": f"MATH {split} #{k}",
                }
            )
    return rows


def math500() -> list[dict[str, str]]:
    with open(SHARED / "math" / "test.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def split_top(s: str, seps: str = ",") -> list[str]:
    """``s`` split at top-level separators (not inside brackets or braces)."""
    parts, depth, cur = [], 0, ""
    i = 0
    while i < len(s):
        c = s[i]
        if s.startswith("\\{", i) or s.startswith("\\left", i):
            depth += 1 if s.startswith("\\{", i) else 0
        if s.startswith("\\}", i):
            depth -= 1
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c in seps and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    parts.append(cur.strip())
    return parts


_NUM = re.compile(r"-?\d+")
_PLAIN = re.compile(r"-?\d+(\.\d+)?|-?\\frac\{\d+\}\{\d+\}|\\sqrt\{\d+\}|\d*\\pi")


def bump(s: str, rng: random.Random) -> str | None:
    """``s`` with one number changed (not one in a subscript): a near miss."""
    nums = [m for m in _NUM.finditer(s) if not re.search(r"[_^]\{?$", s[: m.start()])]
    if not nums:
        return None
    m = rng.choice(nums)
    return s[: m.start()] + str(int(m.group()) + rng.choice([1, 2, 3])) + s[m.end() :]


def is_list(answer: str) -> list[str] | None:
    """The items of a MATH list answer (``1, -2``; ``(1,2), (3,4)``; ``\\{a, b\\}``), else None."""
    a = answer.strip()
    if a.startswith("\\{") and a.endswith("\\}"):
        a = a[2:-2]
    if "," not in a or re.search(r"\\!|\{,\}|\\text|\\in|=|\\cup|\\pm|\\mp|\\ldots|\\dots", a):
        return None
    if re.search(r"\d,\d{3}(?!\d)|\\\$", a):
        return None  # a thousands separator, money
    items = split_top(a)
    if len(items) < 2 or any(not x or len(x) > 40 for x in items) or len(set(items)) < len(items):
        return None
    if a[0] in "([" and len(items) == 1:
        return None
    # a lone tuple or interval is one answer, not a list
    if len(split_top(a)) >= 2 and a[0] in "([" and a[-1] in ")]" and len(split_top(a[1:-1])) == len(items):
        if split_top(a[1:-1]) == [x.strip("()[] ") for x in items]:
            return None
    return items


# ---- several answers ---------------------------------------------------------------------------------
JOINERS = [
    ("\\boxed{{{a}}}, \\boxed{{{b}}}", "comma between boxes"),
    ("$\\boxed{{{a}}}$ and $\\boxed{{{b}}}$", "`and` between inline boxes"),
    ("$\\boxed{{{a}}} \\quad\\text{{and}}\\quad \\boxed{{{b}}}$", "`\\quad\\text{and}\\quad` between boxes"),
    ("$\\boxed{{{a}}}\\boxed{{{b}}}$", "adjacent boxes"),
    ("The solutions are $\\boxed{{{a}}}$ or $\\boxed{{{b}}}$.", "`or` between boxes in a sentence"),
    ("so $x = \\boxed{{{a}}}$ or $x = \\boxed{{{b}}}$.", "labelled boxes"),
]


def several(rows: list[dict[str, str]], rng: random.Random) -> Iterator[Case]:
    lists = [(r, items) for r in rows if (items := is_list(r["answer"])) and len(items) <= 4]
    rng.shuffle(lists)
    for r, items in lists[:60]:
        gold = r["answer"]
        form, how = JOINERS[rng.randrange(len(JOINERS))]
        if "x =" in form and any("(" in x for x in items):
            form, how = JOINERS[0]
        joined = form.format(a=", ".join(items[:-1]) if len(items) > 2 else items[0], b=items[-1])
        if len(items) > 2:  # one box per item
            joined = ", ".join(f"\\boxed{{{x}}}" for x in items)
            how = "one box per item"
        yield Case(
            "several", joined, gold, True, f"each answer in its own box ({how}); the set is the gold", r["id"]
        )
        shuffled = items[:]
        rng.shuffle(shuffled)
        yield Case(
            "several",
            " and ".join(f"$\\boxed{{{x}}}$" for x in shuffled) + ".",
            gold,
            True,
            "boxes in another order: a list of answers is a set",
            r["id"],
        )
        yield Case(
            "several",
            " and ".join(f"$\\boxed{{{x}}}$" for x in items[:-1]),
            gold,
            False,
            "one answer left out",
            r["id"],
        )
        yield Case(
            "several",
            ", ".join(f"\\boxed{{{x}}}" for x in items + [items[0]]),
            gold,
            True,
            "an answer boxed twice: a set has no repeats",
            r["id"],
        )
        b = bump(items[-1], rng)
        if b:
            yield Case(
                "several",
                ", ".join(f"\\boxed{{{x}}}" for x in items[:-1] + [b]),
                gold,
                False,
                "one answer changed",
                r["id"],
            )
        yield Case(
            "several",
            gold,
            "$" + "".join(f"\\boxed{{{x}}}" for x in items) + "$",
            True,
            "the gold written as adjacent boxes",
            r["id"],
        )
    # reference solutions that box several different answers joined by a connector (the gold is the
    # solution; the dataset's last-box target alone is incomplete)
    for r in rows:
        b = boxes(r["solution"])
        if len(b) < 2:
            continue
        (_, e1, x1), (s2, _, x2) = b[-2], b[-1]
        gap = r["solution"][e1:s2]
        if not re.fullmatch(r"\$?\s*(,|\\text\{\s*and\s*\}|and|or)?\s*\$?\s*", gap) or gap.strip("$ ") == "":
            continue
        if not (_PLAIN.fullmatch(x1.strip()) and _PLAIN.fullmatch(x2.strip())):
            continue
        if x1.strip() == x2.strip():
            continue
        sol = r["solution"]
        yield Case(
            "several", f"{x1}, {x2}", sol, True, "the solution boxes two answers: both, as a list", r["id"]
        )
        yield Case("several", f"{x2}, {x1}", sol, True, "both answers, in the other order", r["id"])
        yield Case("several", x2, sol, False, "only the last of the two boxed answers", r["id"])


# ---- prose -----------------------------------------------------------------------------------------
PHRASES = [
    ("Final Answer: The final answer is ${x}$. I hope it is correct.", "minerva's final-answer line"),
    ("The final answer is ${x}$.", "`The final answer is $x$.`"),
    ("**Answer:** \\[ {x} \\]", "`**Answer:**` and display math"),
    ("Answer: ${x}$", "`Answer:` and inline math"),
    ("Therefore, the answer is $ {x} $.", "`the answer is` with spaced inline math"),
    ("So the answer is \\({x}\\). This completes the solution.", "`\\( … \\)` and a sentence after it"),
]


def prose(m500: list[dict[str, str]], rng: random.Random, n: int = 150) -> Iterator[Case]:
    for r in m500[:n]:
        sol, gold = r["solution"], r["answer"]
        b = boxes(sol)
        if len(b) != 1 or b[-1][2].strip() != gold.strip():
            continue
        s, e, x = b[-1]
        tail = sol[e:]
        # the box's segment is the last math of the text: unboxing leaves it as the last segment
        if re.search(r"\$[^$]*\$|\\\[|\d", tail) or len(tail) > 40:
            continue
        unboxed = sol[:s] + x + tail
        yield Case(
            "prose",
            unboxed,
            gold,
            True,
            "the solution without its box: the last math segment",
            r["unique_id"],
        )
        near = bump(gold, rng)
        if near:
            yield Case(
                "prose",
                unboxed,
                near,
                False,
                "the solution without its box, against another number",
                r["unique_id"],
            )
        phrase, how = PHRASES[rng.randrange(len(PHRASES))]
        body = sol[:s] + x + tail
        yield Case("prose", body + "\n\n" + phrase.format(x=gold), gold, True, how, r["unique_id"])
        if near:
            yield Case(
                "prose",
                body + "\n\n" + phrase.format(x=near),
                gold,
                False,
                how + ", a wrong number",
                r["unique_id"],
            )


def gsm8k(rng: random.Random, n: int = 120) -> Iterator[Case]:
    with open(SHARED / "gsm8k" / "test.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    rng.shuffle(rows)
    money = [r for r in rows if "$" in r["answer"]][: n // 2]
    plain = [r for r in rows if "$" not in r["answer"]][: n // 2]
    for r in money + plain:
        sol, gold = r["answer"].split("####")
        sol, gold = sol.strip(), gold.strip().replace(",", "")
        last = sol.strip().splitlines()[-1]
        if not re.search(re.escape(gold) + r"\D*$", last.replace(",", "")):
            continue  # the last sentence does not end with the answer
        src = "GSM8K test" + (" (money)" if "$" in sol else "")
        yield Case("prose", sol, gold, True, "a GSM8K solution without its `####` line: its last number", src)
        yield Case("prose", sol + "\n#### " + gold, gold, True, "a GSM8K solution with its `####` line", src)
        yield Case("prose", sol, str(int(gold) + 1), False, "a GSM8K solution against another number", src)


def gemma(rng: random.Random, n: int = 200) -> Iterator[Case]:
    """Gemma-3-270M completions: the reasoning (before the tags) states its answer last."""
    rows = []
    for path in sorted((ROOT / "bench" / "results").glob("learning-gemma/round*_eval_samples.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            rows += [json.loads(line) for line in fh]
    pat = re.compile(r"^(?P<work>.*?)<end_working_out>\s*<SOLUTION>(?P<ans>-?\d+)</SOLUTION>\s*$", re.S)
    seen = set()
    picked = []
    for r in rows:
        m = pat.match(r["completion"].replace("<start_working_out>", ""))
        if not m or r["completion"] in seen:
            continue
        work, ans = m.group("work").strip(), m.group("ans")
        last = work.splitlines()[-1] if work else ""
        nums = re.findall(r"\d+(?:\.\d+)?", last.replace(",", ""))
        if not nums or nums[-1] != ans or len(work) > 1500:
            continue
        seen.add(r["completion"])
        picked.append((work, ans, r))
    rng.shuffle(picked)
    for work, ans, r in picked[:n]:
        src = "Gemma-3-270M GSM8K completion"
        yield Case(
            "prose", work, ans, True, "a model's reasoning: the number its last sentence ends with", src
        )
        yield Case("prose", work, str(int(ans) + 1), False, "a model's reasoning against another number", src)
        want = Fraction(ans) == Fraction(r["answer"])
        yield Case(
            "prose",
            r["completion"],
            r["answer"],
            want,
            "a whole completion (reasoning and tags) against the GSM8K gold: "
            + ("its answer is right" if want else "its answer is wrong"),
            src,
        )


# ---- labelled answers ------------------------------------------------------------------------------
_ASK = re.compile(
    r"(?:[Ff]ind|[Cc]ompute|[Ww]hat is|[Dd]etermine|value of)\s+(?:the value of\s+)?\$([^$]{1,30})\$[.?]?\s*$"
)
_LABEL = re.compile(r"[A-Za-z](?:[A-Za-z]|\s*[-+]\s*[A-Za-z]|\^\d)*|\|[a-z]\s*-\s*[a-z]\|")


def labelled(rows: list[dict[str, str]], rng: random.Random) -> Iterator[Case]:
    import pandas as pd

    df = pd.read_parquet(ROOT / "cli" / "data" / "samples" / "dapo_math.parquet")
    for k, (p, rm) in enumerate(zip(df.prompt, df.reward_model, strict=True)):
        m = _ASK.search(p[0]["content"].strip())
        gold = rm["ground_truth"]
        if not m or not _LABEL.fullmatch(m.group(1).strip()) or len(m.group(1).strip()) < 2:
            continue
        label = m.group(1).strip()
        src = f"DAPO sample #{k}"
        yield Case(
            "labelled",
            f"Therefore, ${label} = {gold}$.",
            gold,
            True,
            f"the asked `{label}` = the answer",
            src,
        )
        yield Case("labelled", f"\\boxed{{{label} = {gold}}}", gold, True, "a labelled box", src)
        yield Case(
            "labelled",
            f"\\boxed{{{label} = {int(gold) + 1}}}",
            gold,
            False,
            "a labelled box, a wrong number",
            src,
        )
    # MATH ordered pairs asked as "(p,q)" / segments asked as "$AB$"
    pair = re.compile(r"ordered (?:pair|triple)\s*\$\\?\(?\s*\(?([a-z](?:\s*,\s*[a-z]){1,2})\s*\)?\$")
    seg = re.compile(
        r"(?:[Ff]ind|[Ww]hat is|[Cc]ompute)\s+(?:the length of\s+)?\$(\\overline\{)?([A-Z]{2})\}?\$[.?]"
    )
    n_pairs = n_segs = 0
    for r in rows:
        gold = r["answer"]
        m = pair.search(r["problem"])
        if m and n_pairs < 50 and gold.startswith("(") and gold.endswith(")"):
            names = [x.strip() for x in m.group(1).split(",")]
            vals = split_top(gold[1:-1])
            if len(names) == len(vals) and all(_PLAIN.fullmatch(v) for v in vals):
                n_pairs += 1
                lab = ", ".join(names)
                yield Case(
                    "labelled", f"$({lab}) = {gold}$", gold, True, "the pair's labels = the pair", r["id"]
                )
                yield Case(
                    "labelled",
                    ", ".join(f"{a} = {v}" for a, v in zip(names, vals, strict=True)),
                    gold,
                    True,
                    "each label = its value, in the asked order",
                    r["id"],
                )
                if len(set(vals)) == len(vals):
                    yield Case(
                        "labelled",
                        f"$({lab}) = ({', '.join(reversed(vals))})$",
                        gold,
                        False,
                        "the values swapped",
                        r["id"],
                    )
                # two solutions, each a labelled group: `p=5,q=2;p=7,q=2`
                b = bump(gold, rng)
                if b and b != gold:
                    other = split_top(b[1:-1])
                    groups = ";".join(
                        ",".join(f"{a}={v}" for a, v in zip(names, vs, strict=True)) for vs in (vals, other)
                    )
                    yield Case(
                        "labelled",
                        groups,
                        f"{gold}, {b}",
                        True,
                        "two labelled solutions against two pairs",
                        r["id"],
                    )
                    yield Case(
                        "labelled", groups, gold, False, "two labelled solutions against one pair", r["id"]
                    )
        m = seg.search(r["problem"])
        if m and n_segs < 60 and re.fullmatch(r"\d+|\d*\\sqrt\{\d+\}|\\frac\{\d+\}\{\d+\}", gold):
            n_segs += 1
            s = m.group(2)
            form = rng.choice(
                [f"${s} = {gold}$", f"$|{s}| = {gold}$", f"$\\overline{{{s}}} = {gold}$", f"{s}={gold}"]
            )
            yield Case("labelled", form, gold, True, f"the asked segment `{s}` = the answer", r["id"])
            b = bump(gold, rng)
            if b:
                yield Case(
                    "labelled", f"${s} = {b}$", gold, False, "a labelled segment, a wrong number", r["id"]
                )
    # two labels at once and a ratio, from MATH list answers
    for r in rows[:4000]:
        items = is_list(r["answer"])
        if items and len(items) == 2 and all(re.fullmatch(r"-?\d+", x) for x in items):
            a, b = items
            yield Case(
                "labelled",
                f"$AB = {a}, CD = {b}$",
                f"{a}, {b}",
                True,
                "two labelled values against a list",
                r["id"],
            )
            yield Case(
                "labelled",
                f"AB={a}, CD={int(b) + 1}",
                f"{a}, {b}",
                False,
                "two labelled values, one wrong",
                r["id"],
            )
            if int(b) != 0:
                yield Case("labelled", f"$S:T = {a}:{b}$", f"{a}:{b}", True, "a labelled ratio", r["id"])


# ---- relations -------------------------------------------------------------------------------------
_END = r"(-?\d+|-?\\frac\{\d+\}\{\d+\}|-?\\infty)"
_INTERVAL = re.compile(rf"^([\[(])\s*{_END}\s*,\s*{_END}\s*([\])])$")


def _end(e: str) -> float:
    """The value of an interval end written as an integer, a fraction or ±∞."""
    if "infty" in e:
        return float("-inf") if e.startswith("-") else float("inf")
    return float(Fraction(*map(int, re.findall(r"\d+", e))) * (-1 if e.startswith("-") else 1))


def _pmatrix(rows: list[list[int]] | list[list[Fraction]]) -> str:
    return (
        "\\begin{pmatrix} "
        + " \\\\ ".join(" & ".join(str(c) for c in row) for row in rows)
        + " \\end{pmatrix}"
    )


def relations(rows: list[dict[str, str]], rng: random.Random) -> Iterator[Case]:
    forms_seen = 0
    for r in rows:
        m = _INTERVAL.match(r["answer"].replace("\\left", "").replace("\\right", "").strip())
        if not m or forms_seen >= 70 or "interval notation" not in r["problem"]:
            continue
        lo_b, lo, hi, hi_b = m.groups()
        if "infty" in lo and "infty" in hi:
            continue
        if not _end(lo) < _end(hi) or lo.startswith("\\infty") or hi.startswith("-\\infty"):
            continue
        forms_seen += 1
        interval = r["answer"]
        op_lo = "\\le" if lo_b == "[" else "<"
        op_hi = "\\le" if hi_b == "]" else "<"
        ascii_lo = "<=" if lo_b == "[" else "<"
        ascii_hi = "<=" if hi_b == "]" else "<"
        if "infty" in lo:
            ineq, ascii_ineq = f"x {op_hi} {hi}", f"x {ascii_hi} {hi}"
        elif "infty" in hi:
            ge, ascii_ge = ("\\ge", ">=") if lo_b == "[" else (">", ">")
            ineq, ascii_ineq = f"x {ge} {lo}", f"x {ascii_ge} {lo}"
        else:
            ineq, ascii_ineq = f"{lo} {op_lo} x {op_hi} {hi}", f"{lo} {ascii_lo} x {ascii_hi} {hi}"
        member = f"x \\in {interval}"
        forms = [
            (interval, "the interval"),
            (ineq, "the inequality"),
            (member, "the membership"),
            (ascii_ineq, "ASCII relations"),
        ]
        for i, (a, ha) in enumerate(forms):
            for b_, hb in forms[i + 1 :]:
                yield Case("relations", a, b_, True, f"{ha} = {hb} (one set of solutions)", r["id"])
        # a near miss: one end's closedness flipped
        if "infty" not in lo:
            flipped = ("(" if lo_b == "[" else "[") + interval.strip()[1:]
            yield Case("relations", ineq, flipped, False, "one end open instead of closed (or back)", r["id"])
    sets = 0
    for r in rows:
        items = is_list(r["answer"])
        if not items or sets >= 40 or any("(" in x for x in items):
            continue
        sets += 1
        rep = items + [items[0]]
        rng.shuffle(rep)
        yield Case(
            "relations",
            "\\{" + ", ".join(rep) + "\\}",
            "\\{" + ", ".join(items) + "\\}",
            True,
            "a set with a repeat",
            r["id"],
        )
        yield Case(
            "relations",
            "\\{" + ", ".join(items[1:] * 2) + "\\}",
            "\\{" + ", ".join(items) + "\\}",
            False,
            "a set with a repeat but one element missing",
            r["id"],
        )
    # chains of constants: an approximation after the exact value, a computation that ends in it
    chains = 0
    for r in rows:
        gold = r["answer"]
        if chains >= 60:
            break
        m = re.fullmatch(r"(\d*)\\sqrt\{(\d+)\}", gold)
        if m:
            v = (int(m.group(1) or 1)) * int(m.group(2)) ** 0.5
            chains += 1
            yield Case(
                "relations",
                f"{gold} \\approx {v:.2f}",
                gold,
                True,
                "exact value, then its approximation",
                r["id"],
            )
            yield Case(
                "relations",
                f"x = {gold} \\approx {v:.3f}",
                gold,
                True,
                "a labelled chain ending in an approximation",
                r["id"],
            )
            yield Case(
                "relations",
                f"{gold} \\approx {v + 1:.2f}",
                gold,
                False,
                "a chain ending in a wrong approximation",
                r["id"],
            )
        elif re.fullmatch(r"\d+", gold) and 10 < int(gold) < 10**6:
            chains += 1
            n = int(gold)
            k = rng.randint(1, n - 1)
            yield Case(
                "relations",
                f"{n - k} + {k} = {n}",
                gold,
                True,
                "a computation that ends in the answer",
                r["id"],
            )
            yield Case(
                "relations",
                f"\\frac{{{2 * n}}}{{2}} = {n}",
                gold,
                True,
                "two constants that are equal",
                r["id"],
            )
            yield Case(
                "relations",
                f"{n - k} + {k} = {n + 1}",
                gold,
                False,
                "a computation that ends in another number",
                r["id"],
            )
            yield Case("relations", f"x != {n}", f"x \\ne {n}", True, "ASCII `!=`", r["id"])
            yield Case("relations", f"x >= {n}", f"x \\geq {n}", True, "ASCII `>=`", r["id"])
            yield Case("relations", f"x <= {n}", f"x \\ge {n}", False, "`<=` is not `\\ge`", r["id"])


def and_or(rows: list[dict[str, str]], rng: random.Random) -> Iterator[Case]:
    n = 0
    for r in rows:
        items = is_list(r["answer"])
        if not items or n >= 70:
            continue
        n += 1
        gold = r["answer"]
        if len(items) > 2:
            pred = ", ".join(items[:-1]) + ", and " + items[-1]
        else:
            pred = f"{items[0]} {rng.choice(['and', 'or'])} {items[1]}"
        yield Case("and_or", pred, gold, True, "a list joined by a bare `and` / `or`", r["id"])
        if all(x.startswith("(") for x in items):
            yield Case(
                "and_or", "or".join(items), gold, True, "tuples joined by `or` with no spaces", r["id"]
            )
        b = bump(items[-1], rng)
        if b:
            yield Case(
                "and_or",
                ", ".join(items[:-1]) + " and " + b,
                gold,
                False,
                "a list joined by `and`, one item wrong",
                r["id"],
            )


def matrix_sum(rows: list[dict[str, str]], rng: random.Random) -> Iterator[Case]:
    pm = re.compile(r"\\begin\{pmatrix\}(.*?)\\end\{pmatrix\}", re.S)
    n = 0
    for r in rows:
        m = pm.fullmatch(r["answer"].strip())
        if not m or n >= 50:
            continue
        cells = [[c.strip() for c in row.split("&")] for row in m.group(1).split("\\\\") if row.strip()]
        if not all(re.fullmatch(r"-?\d+", c) for row in cells for c in row):
            continue
        n += 1
        gold = r["answer"]
        shift = [[rng.randint(-5, 5) for _ in row] for row in cells]
        mat = _pmatrix
        a = [
            [int(c) - s for c, s in zip(row, srow, strict=True)]
            for row, srow in zip(cells, shift, strict=True)
        ]
        yield Case("matrix_sum", f"{mat(a)} + {mat(shift)}", gold, True, "a sum of two matrices", r["id"])
        halves = [[Fraction(int(c), 2) for c in row] for row in cells]
        yield Case("matrix_sum", "2" + mat(halves), gold, True, "a multiple of a matrix", r["id"])
        off = [row[:] for row in shift]
        off[0][0] += 1
        yield Case(
            "matrix_sum",
            f"{mat(a)} + {mat(off)}",
            gold,
            False,
            "a sum of two matrices, one cell off",
            r["id"],
        )
        yield Case(
            "matrix_sum",
            f"{mat(a)} - {mat([[-s for s in row] for row in shift])}",
            gold,
            True,
            "a difference of two matrices",
            r["id"],
        )
    for k in range(2, 12):
        total = k * (k + 1) // 2
        yield Case(
            "matrix_sum",
            f"\\sum_{{i=1}}^{{{k}}} i",
            str(total),
            True,
            "a finite sum evaluated",
            f"sum 1..{k}",
        )
        yield Case(
            "matrix_sum",
            f"\\sum_{{i=1}}^{{{k}}} i",
            str(total + 1),
            False,
            "a finite sum against another number",
            f"sum 1..{k}",
        )
        yield Case(
            "matrix_sum",
            f"\\sum_{{k=1}}^{{n}} {k}k^2",
            f"\\sum_{{j=1}}^{{n}} j^2 \\cdot {k}",
            True,
            "a sum with commuted factors and another index",
            f"sum {k}k^2",
        )
        yield Case(
            "matrix_sum",
            f"\\sum_{{k=1}}^{{n}} {k}k^2",
            f"\\sum_{{j=1}}^{{n}} j^2 \\cdot {k + 1}",
            False,
            "a sum with another factor",
            f"sum {k}k^2",
        )


# ---- hack resistance --------------------------------------------------------------------------------
def hack(m500: list[dict[str, str]], rng: random.Random) -> Iterator[Case]:
    golds = [r["answer"] for r in m500 if re.fullmatch(r"-?\d+|\\frac\{\d+\}\{\d+\}", r["answer"])]
    for g in golds[:60]:
        w = bump(g, rng) or g + "1"
        w2 = bump(w, rng) or w + "1"
        for pred, why in [
            (f"The answer is $\\boxed{{}}$. It is {g}.", "an empty box; the gold only in the prose after it"),
            (f"\\boxed{{{w}}}, \\boxed{{{g}}}, \\boxed{{{w2}}}", "several candidates, one box each"),
            (f"$\\boxed{{{w}}}$ or $\\boxed{{{g}}}$", "two candidates joined by `or`"),
            (f"\\boxed{{{w}, {g}, {w2}}}", "several candidates in one box"),
            (f"\\boxed{{{g} + 1}}", "the gold inside a longer wrong expression"),
            (f"\\boxed{{{w}}} \\text{{ (or maybe {g})}}", "the gold only in a `\\text{}` aside"),
            (
                f"I first got {g}, but the answer is \\boxed{{{w}}}.",
                "the gold in the prose, another answer boxed",
            ),
            (f"\\boxed{{{g}", "an unclosed box (a truncated completion)"),
            (f"\\boxed{{{w} \\text{{ or }} {g}}}", "two candidates joined by `\\text{ or }`"),
            (f"Answer: {w} (not {g})", "the gold mentioned after the stated answer"),
        ]:
            yield Case("hack", pred, g, False, why, "MATH500 answer")
        if re.fullmatch(r"-?\d+", g):
            yield Case(
                "hack",
                f"\\boxed{{{g}1}}",
                g,
                False,
                "the gold's digits inside a longer number",
                "MATH500 answer",
            )


def build(seed: int = 21) -> list[Case]:
    rng = random.Random(seed)
    rows = math_rows()
    m500 = math500()
    cases: list[Case] = []
    for gen in (
        several(rows, rng),
        prose(m500, rng),
        gsm8k(rng),
        gemma(rng),
        labelled(rows, rng),
        relations(rows, rng),
        and_or(rows, rng),
        matrix_sum(rows, rng),
        hack(m500, rng),
    ):
        cases.extend(gen)
    seen: set[tuple[str, str]] = set()
    out = []
    for c in cases:
        if (c.pred, c.gold) not in seen:
            seen.add((c.pred, c.gold))
            out.append(c)
    return out


def load(path: Path = OUT) -> list[Case]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [Case(**json.loads(line)) for line in fh if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show", type=int, default=0, help="print N cases of each kind")
    args = ap.parse_args()
    cases = build()
    # gzip with no timestamp: the same corpus is the same bytes
    with open(OUT, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        for c in cases:
            gz.write((json.dumps(asdict(c), ensure_ascii=False) + "\n").encode("utf-8"))
    counts = {k: sum(1 for c in cases if c.kind == k) for k in KINDS}
    print(f"{len(cases)} cases -> {OUT.relative_to(ROOT)}: {counts}")
    for k in KINDS:
        for c in [c for c in cases if c.kind == k][: args.show]:
            print(f"{k:10} {c.want!s:5} {c.pred[-70:]!r:75} | {c.gold[-40:]!r} ({c.why})")


if __name__ == "__main__":
    main()
