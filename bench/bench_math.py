"""Benchmark and differential check: py_rewards.math_equal (Rust) against Math-Verify.

    python bench/bench_math.py                 # ~3 min on 2 cores; rewrites bench/math_verify.md
    python bench/bench_math.py --golds ../shared/data/math/test.jsonl --repeat 1 --no-write
    python bench/bench_math.py --speed-only 5     # the adversarial inputs alone, five times

On the corpus of bench/math_corpus.py (built from the MATH500 gold answers shipped in
cli/data/samples, ~5K pairs: rewrites, near misses, wrong answers) both judges label every pair in
the same process, one thread: Math-Verify as docs/design-facts.md says ("Math-Verify as the
reference judge"), ``verify(parse("$"+gold+"$"), parse("$"+pred+"$"))``; ours as
``math_equal(pred, gold)`` (one Python call per pair) and as one ``math_equal_batch`` call with
``PY_REWARDS_PARALLEL=0``. Judgements per second are medians of ``--repeat`` runs; the ratio is
taken in this run. Then the adversarial inputs (100K characters each) are timed, 15 calls each:
the wall-clock median (loaded, as the box is) and the CPU-time minimum (quiet), written as a table
between the ``speed`` markers of the report. The report lists every disagreement with its verdict
(who is right) from ``VERDICTS`` below; one no rule covers is marked ``unreviewed``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ["PY_REWARDS_PARALLEL"] = "0"  # single-threaded: the comparison is per core

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import math_corpus as mc  # noqa: E402
from math_corpus import row_key  # noqa: E402

from py_rewards import math_equal, math_equal_batch  # noqa: E402

REPORT = HERE / "math_verify.md"
RESULTS = HERE / "results" / "math_verify.json"
BEGIN, END = "<!-- disagreements:begin -->", "<!-- disagreements:end -->"
SPEED_BEGIN, SPEED_END = "<!-- speed:begin -->", "<!-- speed:end -->"


def mv_judge() -> Callable[[str, str], bool]:
    from math_verify import parse, verify

    def judge(pred: str, gold: str) -> bool:
        return bool(verify(parse("$" + gold + "$"), parse("$" + pred + "$")))

    return judge


# ---- verdicts: who is right on a disagreement (checked by hand, one rule per kind of case) ------
def _bare(s: str) -> str:
    """``s`` without a ``\\boxed{}`` or ``\\displaystyle`` around it."""
    s = re.sub(r"^\\boxed\{(.*)\}$", r"\1", s.strip())
    return re.sub(r"^\\displaystyle\s*", "", s)


def _braced(s: str) -> bool:
    s = _bare(s)
    return s.startswith("{") and s.endswith("}")


VERDICTS: list[tuple[str, Callable[[str, str, bool, bool], bool], str]] = [
    (
        "ours",
        lambda p, g, o, m: o and not m and (_braced(p) or _braced(g)),
        "`{…}` around the whole answer only groups; Math-Verify's parser loses a braced tuple, set or "
        "text (`{(-2,1)}` reads as nothing it can compare)",
    ),
    (
        "ours",
        lambda p, g, o, m: (
            o and not m and re.search(r"^[a-z]\s*=\s*\\?\$?\d{1,3}(,(\\!\s*)?\d{3})+$", _bare(p)) is not None
        ),
        "`x = 2,000` assigns 2000; Math-Verify splits the thousands separator inside an equation",
    ),
    (
        "ours",
        lambda p, g, o, m: (
            o
            and not m
            and re.search(r"^\(|\\left\(", _bare(p)) is not None
            and re.search(r"\\(mbox|text)\{", p) is not None
        ),
        "parentheses around a number with a unit; Math-Verify keeps the unit inside and fails",
    ),
    (
        "ours",
        lambda p, g, o, m: (
            o
            and not m
            and re.search(r"\d\s+[a-z]{2,}\^\d$", _bare(p)) is not None
            and re.search(r"\^2$", g) is not None
            and p.endswith("^2")
        ),
        "a unit in plain letters with its power (`15  cm^2`); Math-Verify reads `cm^2` as variables",
    ),
    (
        "math-verify",
        lambda p, g, o, m: o and not m and re.search(r"\\(mbox|text)\{\s*[a-z]+\}\^\d", p + g) is not None,
        "the unit's power changed (`inches^3` for `inches^2`); ours drops a unit with its power, so only "
        "the number is judged (a model that gets the number right and the unit wrong gets credit)",
    ),
    (
        "ours",
        lambda p, g, o, m: (
            m and not o and re.fullmatch(r"-?\d*\.\d{7,}", re.sub(r"[{} ]", "", _bare(p))) is not None
        ),
        "a decimal written to 7+ places that differs in those places; Math-Verify rounds both sides to "
        "6 places (`0.5468751` = `35/64`), ours compares to the places written",
    ),
    (
        "ours",
        lambda p, g, o, m: (
            m and not o and re.fullmatch(r"\.?0*\.?0{4,}\d+", p.replace("0.", ".")) is not None
        ),
        "small decimals that agree only after rounding to 6 places (`0.0000673` vs `.0000672`)",
    ),
    (
        "ours",
        lambda p, g, o, m: (
            m and not o and re.search(r"_\{?\d", p) is not None and re.search(r"_\{?\d", g) is not None
        ),
        "numbers in different bases (`52_10` vs `52_8`); Math-Verify drops both subscripts",
    ),
    (
        "ours",
        lambda p, g, o, m: (
            m
            and not o
            and re.fullmatch(r"\{?\s*([a-z])\s*=.*", _bare(p)) is not None
            and re.fullmatch(r"([a-z])\s*=.*", _bare(g)) is not None
            and _bare(p).lstrip("{ ")[0] != _bare(g)[0]
        ),
        "assignments to different variables (`q = 5` vs `x = 5`); Math-Verify sees only the braced value",
    ),
    (
        "ours",
        lambda p, g, o, m: m and not o and "=" in p and "=" not in g,
        "an equation is not its right-hand side unless the left is a lone variable; Math-Verify takes "
        "the right side of any predicted equation (`5x-7y+11z+4=0` = `0`)",
    ),
]


def verdict(pred: str, gold: str, ours: bool, mv: bool) -> tuple[str, str]:
    for who, rule, why in VERDICTS:
        if rule(pred, gold, ours, mv):
            return who, why
    return "unreviewed", "no rule covers this case yet: look at it and add one to VERDICTS"


def adversarial(n: int = 100_000) -> dict[str, str]:
    return {
        "nested braces": "{" * (n // 2) + "}" * (n // 2),
        "\\frac chain": "\\frac{1}{" * (n // 9) + "2" + "}" * (n // 9),
        "long digit run": "9" * n,
        "\\sqrt chain, unclosed": "\\sqrt{" * (n // 6),
        "\\left( without \\right": "\\left(" * (n // 6),
        "long sum": "1+" * (n // 2) + "1",
        "power tower": "2^{" * (n // 3) + "2" + "}" * (n // 3),
        "long tuple": "(" + ",".join(["1"] * (n // 2)) + ")",
        "\\boxed soup": "\\boxed{\\frac{" * (n // 13),
        "deep parentheses": "(" * (n // 2) + "1" + ")" * (n // 2),
        "unary plus run": "+" * n + "1",
        "\\sqrt without braces": "\\sqrt" * (n // 5) + "2",
        "\\text{ soup": "\\text{" * (n // 6),
        # the extraction and relation rules (bench/math_kinds.py's shapes)
        "money signs": "$1 " * (n // 3),
        "inline math pairs": "$x$ " * (n // 4),
        "boxes joined by and": "\\boxed{1} and " * (n // 14),
        "empty boxes": "\\boxed{}" * (n // 8),
        "answer phrases": "The answer is " * (n // 14) + "5",
        "`answers` (no phrase)": "answers" * (n // 7),
        "unclosed \\(": "\\(\n" * (n // 3),
        "unclosed \\begin{align*}": "\\begin{align*}" * (n // 14),
        "prose": "the cat sat on the mat " * (n // 23),
        "numbers joined by and": "1 and " * (n // 6),
        "open parentheses then a digit": "(" * (n - 1) + "1",
        "labelled list": ",".join(["x=1"] * (n // 4)),
        "constant chain": "=".join(["1"] * (n // 2)),
        "ratio chain": ":".join(["1"] * (n // 2)),
        "set of repeats": "\\{" + ",".join(["1"] * (n // 2)) + "\\}",
        "sums of sums": "\\sum_{k=1}^{1000}" * (n // 17) + "k",
        "matrix products": ("\\begin{pmatrix}" + "\\\\".join(["&".join(["1"] * 16)] * 16) + "\\end{pmatrix}")
        * (n // 700),
        "glued commands": "\\pia" * (n // 4),
        # the slowest of 7,500 inputs made of 1-6 random LaTeX and prose snippets repeated (2026-12-01)
        "empty display math between digits": "$$$$1" * (n // 5),
        "`answer` before display math": "answer$$\\cup" * (n // 12),
        "`\\text{ and }` between bars": "|\\text{ and } " * (n // 14),
    }


#: Inputs whose answer is read as math right up to ``math_equal``'s limit (an answer past 2 KiB is
#: compared as text): ~98K characters of prose, then a box holding 2,000 characters of one of the
#: shapes above, the most the tokenizer and the parser are ever given.
AT_THE_LIMIT = (
    "matrix products",
    "power tower",
    "long sum",
    "\\frac chain",
    "labelled list",
    "constant chain",
    "set of repeats",
    "sums of sums",
    "glued commands",
    "deep parentheses",
)


def _at_most(name: str, chars: int) -> str:
    """The input ``name`` of :func:`adversarial`, as long as it can be in ``chars`` characters."""
    n = chars
    while len(s := adversarial(n)[name]) > chars:
        n -= max(1, (len(s) - chars) // 2)
    return s


def adversarial_inputs() -> dict[str, str]:
    """:func:`adversarial` at 100K characters, and the :data:`AT_THE_LIMIT` shapes boxed after prose."""
    out = adversarial()
    prose = "We add the ones up one by one, and then we check the sum. " * 1800
    for name in AT_THE_LIMIT:
        box = f"so \\boxed{{{_at_most(name, 2_000)}}}"
        out[f"prose, then {name} boxed (at the limit)"] = prose[: 100_000 - len(box)] + box
    return out


def adversarial_pairs() -> dict[str, tuple[str, str]]:
    """Two long answers against each other, each within the answer limit (2 KiB): collections
    matched without order, pair by pair (the comparison budget bounds them)."""

    def sets(n: int, rev: bool) -> str:
        xs = [str(i) for i in range(1, n + 1)]
        return "\\{" + ",".join(reversed(xs) if rev else xs) + "\\}"

    def nested(rev: bool) -> str:
        inner = ["\\{" + ",".join(map(str, range(k, k + 25)[:: -1 if rev else 1])) + "\\}" for k in range(25)]
        return "\\{" + ",".join(reversed(inner) if rev else inner) + "\\}"

    labelled = [f"x_{{{i}}}={i}" for i in range(1, 160)]
    intervals = [f"[{i},{i + 1}]" for i in range(0, 300, 2)]
    return {
        "a set of 500 against it reversed": (sets(500, False), sets(500, True)),
        "160 labelled values against them reversed": (",".join(labelled), ",".join(reversed(labelled))),
        "a set of 25 sets of 25 against it reversed": (nested(False), nested(True)),
        "a union of 150 intervals against it reversed": (
            "\\cup".join(intervals),
            "\\cup".join(reversed(intervals)),
        ),
    }


def time_adversarial(judge: Callable[[str, str], bool], reps: int = 15) -> list[dict[str, object]]:
    """Each adversarial input judged ``reps`` times against ``"1"`` (a pair: one side against the
    other), one thread: the wall-clock median (what a call costs on this box, loaded as it is) and
    the minimum of the thread's CPU time (what it costs with a core to itself), in ms, slowest
    first; with the highest 1-minute load average seen."""
    load = os.getloadavg()[0]
    out: list[dict[str, object]] = []
    cases = {name: (s, "1") for name, s in adversarial_inputs().items()} | adversarial_pairs()
    for name, (s, other) in cases.items():
        wall, cpu = [], []
        for _ in range(reps):
            t, c = time.perf_counter(), time.thread_time()
            judge(s, other)
            cpu.append(time.thread_time() - c)
            wall.append(time.perf_counter() - t)
        out.append(
            {
                "input": name,
                "chars": len(s) + (len(other) if other != "1" else 0),
                "wall_median_ms": round(statistics.median(wall) * 1e3, 3),
                "cpu_min_ms": round(min(cpu) * 1e3, 3),
            }
        )
    load = max(load, os.getloadavg()[0])
    for row in out:
        row.update(reps=reps, load=round(load, 2))
    return sorted(out, key=lambda r: -float(str(r["wall_median_ms"])))


def speed_table(rows: list[dict[str, object]]) -> str:
    """The markdown table of :func:`time_adversarial`'s rows."""
    cpu = max(rows, key=lambda r: float(str(r["cpu_min_ms"])))
    lines = [
        f"_Last run: {len(rows)} inputs, each judged {rows[0]['reps']} times in one thread (against `1`, "
        f"or a pair against each other), at a load average of {rows[0]['load']} on {os.cpu_count()} "
        "CPUs. Worst wall clock (median) "
        f"**{rows[0]['wall_median_ms']:.2f} ms** ({rows[0]['input']}), worst CPU time (minimum) "
        f"**{cpu['cpu_min_ms']:.2f} ms** ({cpu['input']})._",
        "",
        "| input | characters | wall clock, ms | CPU time, ms |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        name = str(r["input"]).replace("|", "\\|")
        lines.append(f"| {name} | {r['chars']:,} | {r['wall_median_ms']:.2f} | {r['cpu_min_ms']:.2f} |")
    return "\n".join(lines)


def speed_runs(runs: int) -> None:
    """:func:`time_adversarial` ``runs`` times in this process (no Math-Verify loaded): the worst
    input of each run, and the medians of the worst wall clock and the worst CPU time."""
    walls, cpus = [], []
    for r in range(runs):
        rows = time_adversarial(math_equal)
        cpu = max(rows, key=lambda x: float(str(x["cpu_min_ms"])))
        walls.append(float(str(rows[0]["wall_median_ms"])))
        cpus.append(float(str(cpu["cpu_min_ms"])))
        print(
            f"run {r + 1}: load {rows[0]['load']}, worst wall clock {walls[-1]:.2f} ms ({rows[0]['input']}), "
            f"worst CPU time {cpus[-1]:.2f} ms ({cpu['input']})"
        )
    print(
        f"medians of {runs} runs: worst wall clock {statistics.median(walls):.2f} ms, "
        f"worst CPU time {statistics.median(cpus):.2f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--golds", type=Path, default=mc.SAMPLE)
    ap.add_argument("--repeat", type=int, default=3, help="timing repetitions (medians)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not rewrite the report")
    ap.add_argument(
        "--speed-only", type=int, metavar="RUNS", help="only time the adversarial inputs, RUNS times"
    )
    args = ap.parse_args()
    if args.speed_only:
        speed_runs(args.speed_only)
        return

    pairs = mc.build(mc.load_golds(args.golds))
    preds = [p.pred for p in pairs]
    golds = [p.gold for p in pairs]
    judge = mv_judge()
    print(f"{len(pairs)} pairs from {args.golds.name}", file=sys.stderr)

    mv_times, ours_times, batch_times = [], [], []
    mv_labels = ours = None
    for r in range(args.repeat):
        t = time.perf_counter()
        mv_labels = [judge(p, g) for p, g in zip(preds, golds, strict=True)]
        mv_times.append(time.perf_counter() - t)
        for _ in range(5):  # ours is fast: more runs for a stable median
            t = time.perf_counter()
            ours = [math_equal(p, g) for p, g in zip(preds, golds, strict=True)]
            ours_times.append(time.perf_counter() - t)
            t = time.perf_counter()
            batch = math_equal_batch(preds, golds)
            batch_times.append(time.perf_counter() - t)
            assert batch == ours
        print(
            f"  run {r + 1}: math-verify {mv_times[-1]:.1f}s, ours {ours_times[-1] * 1e3:.1f}ms",
            file=sys.stderr,
        )
    assert mv_labels is not None and ours is not None
    n = len(pairs)
    mv_rate = n / statistics.median(mv_times)
    ours_rate = n / statistics.median(ours_times)
    batch_rate = n / statistics.median(batch_times)

    dis = []
    for p, o, m in zip(pairs, ours, mv_labels, strict=True):
        if o != m:
            who, why = verdict(p.pred, p.gold, o, m)
            dis.append(
                {
                    "pred": p.pred,
                    "gold": p.gold,
                    "kind": p.kind,
                    "how": p.how,
                    "ours": o,
                    "math_verify": m,
                    "right": who,
                    "why": why,
                }
            )
    agree = 1 - len(dis) / n
    for d in dis:
        if d["right"] == "unreviewed":
            print(f"  unreviewed: ours={d['ours']} pred={d['pred']!r} gold={d['gold']!r}", file=sys.stderr)

    speed = time_adversarial(math_equal)
    worst = speed[0]
    worst_cpu = max(speed, key=lambda r: float(str(r["cpu_min_ms"])))

    import math_verify

    summary = {
        "pairs": n,
        "golds": args.golds.name,
        "kinds": {k: sum(1 for p in pairs if p.kind == k) for k in ("rewrite", "near_miss", "wrong")},
        "agreement": agree,
        "disagreements": len(dis),
        "by_verdict": {w: sum(1 for d in dis if d["right"] == w) for w in {d["right"] for d in dis}},
        "math_verify_per_s": mv_rate,
        "ours_per_s": ours_rate,
        "ours_batch_per_s": batch_rate,
        "ratio": ours_rate / mv_rate,
        "ratio_batch": batch_rate / mv_rate,
        "adversarial": speed,
        "adversarial_worst_wall_ms": worst["wall_median_ms"],
        "adversarial_worst_wall_input": worst["input"],
        "adversarial_worst_cpu_ms": worst_cpu["cpu_min_ms"],
        "adversarial_worst_cpu_input": worst_cpu["input"],
        "load_average": speed[0]["load"],
        "math_verify_version": math_verify.__version__ if hasattr(math_verify, "__version__") else "0.9.0",
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "repeat": args.repeat,
    }
    print(json.dumps(summary, indent=2))
    if args.no_write:
        return
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({**summary, "disagreement_rows": dis}, indent=1, ensure_ascii=False) + "\n")
    table = [
        "| prediction | gold | ours | Math-Verify | right | why |",
        "|---|---|---|---|---|---|",
    ]
    for d in dis:
        table.append(
            f"{row_key(d['pred'], d['gold'])} {d['ours']} | {d['math_verify']} | {d['right']} | {d['why']} |"
        )
    text = REPORT.read_text() if REPORT.exists() else f"# math_equal vs Math-Verify\n\n{BEGIN}\n{END}\n"
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    stats = (
        f"\n_Last run: {n} pairs ({summary['kinds']}), agreement **{100 * agree:.2f} %** "
        f"({len(dis)} disagreements: {summary['by_verdict']}); Math-Verify {mv_rate:,.0f} judgements/s, "
        f"ours {ours_rate:,.0f}/s per Python call (**{ours_rate / mv_rate:,.0f}×**), "
        f"{batch_rate:,.0f}/s in one batch call ({batch_rate / mv_rate:,.0f}×), single thread, medians of "
        f"{args.repeat} runs; worst adversarial input {worst['wall_median_ms']:.2f} ms wall clock "
        f"({worst['input']}), {worst_cpu['cpu_min_ms']:.2f} ms CPU time ({worst_cpu['input']}), load "
        f"average {worst['load']}._\n\n"
    )
    text = head + BEGIN + stats + "\n".join(table) + "\n" + END + tail
    if SPEED_BEGIN not in text:
        text += f"\n{SPEED_BEGIN}\n{SPEED_END}\n"
    head, _, rest = text.partition(SPEED_BEGIN)
    _, _, tail = rest.partition(SPEED_END)
    REPORT.write_text(head + SPEED_BEGIN + "\n" + speed_table(speed) + "\n" + SPEED_END + tail)
    print(f"wrote {REPORT} and {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
