"""False positives of math_equal and Math-Verify on pairs that must never be equal.

    python bench/bench_math_fp.py              # ~4 min on 2 cores; 4,000 pairs, rewrites a table
    python bench/bench_math_fp.py --pairs 1000 --no-write

The pairs come from the property test ``reward_core/math/tests/never_equal.rs`` (the same generators
``cargo test`` runs 100,000 of): one value and a different value in the same shape (clock times,
mixed numbers, intervals with one end moved, sets with one element changed, equations with one
coefficient changed, the gold inside a longer wrong expression, integers past any machine number).
The test's ``dump`` writes a sample; both judges label it here, Math-Verify as docs/design-facts.md
says (``verify(parse("$"+gold+"$"), parse("$"+pred+"$"))``), ours as ``math_equal(pred, gold)``,
each pair both ways. A pair counts as a false positive when either way says equal. The table goes
between the ``fp`` markers of bench/math_verify.md, with a few of Math-Verify's false positives.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from py_rewards import math_equal  # noqa: E402

REPORT = HERE / "math_verify.md"
BEGIN, END = "<!-- fp:begin -->", "<!-- fp:end -->"


def dump(n: int) -> list[tuple[str, str, str]]:
    """``n`` pairs from the property test's generators (gold, prediction, shape)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "pairs.tsv"
        env = dict(os.environ, FP_DUMP=str(path), FP_DUMP_N=str(n))
        cmd = ["cargo", "test", "-q", "-p", "math_equal", "--test", "never_equal", "--", "--ignored", "dump"]
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
        rows = [line.split("\t") for line in path.read_text().splitlines()]
    return [(g, p, s) for g, p, s in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=4000)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    from math_verify import parse, verify

    def mv(pred: str, gold: str) -> bool:
        return bool(verify(parse("$" + gold + "$"), parse("$" + pred + "$")))

    pairs = dump(args.pairs)
    total: collections.Counter[str] = collections.Counter()
    ours: collections.Counter[str] = collections.Counter()
    theirs: collections.Counter[str] = collections.Counter()
    examples: dict[str, tuple[str, str]] = {}
    for gold, pred, shape in pairs:
        total[shape] += 1
        ours[shape] += math_equal(pred, gold) or math_equal(gold, pred)
        if mv(pred, gold) or mv(gold, pred):
            theirs[shape] += 1
            examples.setdefault(shape, (pred, gold))
    n = sum(total.values())
    lines = [
        f"_Last run: {n:,} pairs sampled from the property test's generators "
        f"(`python bench/bench_math_fp.py --pairs {args.pairs}`), each judged both ways; "
        "`cargo test` runs 100,000 of them and allows none._",
        "",
        "| shape | pairs | false positives, `math_equal` | false positives, Math-Verify "
        "| one of Math-Verify's |",
        "|---|---:|---:|---:|---|",
    ]
    for shape in sorted(total):
        ex = examples.get(shape)
        cell = f"`{ex[0]}` = `{ex[1]}`" if ex else ""
        t = total[shape]
        lines.append(
            f"| {shape} | {t:,} | {ours[shape]} ({100 * ours[shape] / t:.1f} %) | "
            f"{theirs[shape]} ({100 * theirs[shape] / t:.1f} %) | {cell.replace('|', chr(92) + '|')} |"
        )
    o, m = sum(ours.values()), sum(theirs.values())
    lines.append(f"| **all** | {n:,} | **{o} ({100 * o / n:.2f} %)** | {m} ({100 * m / n:.2f} %) | |")
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        text = REPORT.read_text()
        head, rest = text.split(BEGIN)
        _, tail = rest.split(END)
        REPORT.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")


if __name__ == "__main__":
    main()
