"""math_equal on answer shapes and adversarial completions (bench/math_kinds.jsonl.gz), beside Math-Verify.

    python bench/bench_math_kinds.py                    # ~3 min; rewrites its section of math_verify.md
    python bench/bench_math_kinds.py --no-write --no-mv  # ours only, seconds
    python bench/bench_math_kinds.py --core OTHER/libreward_core.so --no-mv --no-write  # another build

Every case of the corpus (bench/math_kinds.py builds it) is judged in both orders, as a new user
calls ``math_equal(a, b)``. Agreement with the corpus's verdicts is reported per kind, for ours and for
Math-Verify 0.9 (``verify(parse(gold), parse(pred))`` and the other way round; a side that is a bare
LaTeX answer, not prose, is wrapped in ``$…$``, as docs/design-facts.md calls Math-Verify). The
adversarial kind gets its own table: how many completions of each trick each judge scores (a score
there is a judge fooled). Then
the adversarial 100K-character inputs of bench/bench_math.py are timed, one thread (wall-clock
median and CPU-time minimum).

``--core`` judges with another build of the extension (a ``libreward_core.so``) instead of
py_rewards; ``--before`` adds a column judged by another build (the verifier before these shapes
were read: ``git archive <commit> | tar -x -C DIR`` then ``cargo build --release -p reward_core
--features python`` there).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ["PY_REWARDS_PARALLEL"] = "0"

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import math_kinds as mk  # noqa: E402

REPORT = HERE / "math_verify.md"
BEGIN, END = "<!-- kinds:begin -->", "<!-- kinds:end -->"
PROSE = re.compile(r"[A-Za-z]{2,}[ ,.]+[A-Za-z]{2,}[ ,.]+[A-Za-z]{2,}")


def core_judge(path: Path | None) -> Callable[[str, str], bool]:
    if path is None:
        from py_rewards import math_equal

        return math_equal
    from importlib.machinery import ExtensionFileLoader
    from importlib.util import module_from_spec, spec_from_loader

    loader = ExtensionFileLoader("py_rewards._core", str(path))
    spec = spec_from_loader("py_rewards._core", loader)
    assert spec is not None
    mod = module_from_spec(spec)
    loader.exec_module(mod)
    return mod.math_equal


def mv_judge() -> Callable[[str, str], bool]:
    logging.disable(logging.WARNING)  # Math-Verify logs every timeout
    from math_verify import parse, verify

    def text(x: str) -> str:
        bare = not re.search(r"\$|\\\(|\\\[|\\boxed", x) and not PROSE.search(x)
        return f"${x}$" if bare else x

    def judge(pred: str, gold: str) -> bool:
        try:
            return bool(verify(parse(text(gold)), parse(text(pred))))
        except Exception:  # noqa: BLE001 - a crash is a judgement of "no"
            return False

    return judge


def agreement(cases: list[mk.Case], judge: Callable[[str, str], bool]) -> dict[str, tuple[float, int]]:
    """Per kind (and over all kinds but the adversarial one): the share of right verdicts over
    both orders, and the number of cases."""
    right: dict[str, int] = {}
    count: dict[str, int] = {}
    for c in cases:
        r = (judge(c.pred, c.gold) == c.want) + (judge(c.gold, c.pred) == c.want)
        for k in (c.kind, "all but hack") if c.kind != "hack" else (c.kind,):
            right[k] = right.get(k, 0) + r
            count[k] = count.get(k, 0) + 1
    return {k: (right[k] / (2 * count[k]), count[k]) for k in [*mk.KINDS, "all but hack"]}


def fooled(cases: list[mk.Case], judge: Callable[[str, str], bool]) -> dict[str, tuple[int, int]]:
    """Adversarial completions per trick: (how many score in either order, how many there are)."""
    out: dict[str, tuple[int, int]] = {}
    for c in cases:
        if c.kind != "hack":
            continue
        n, m = out.get(c.why, (0, 0))
        out[c.why] = (n + int(judge(c.pred, c.gold) or judge(c.gold, c.pred)), m + 1)
    return out


def pct(table: dict[str, tuple[float, int]] | None, k: str) -> str:
    return f"{100 * table[k][0]:.1f} %" if table else "–"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--core", type=Path, help="judge with this libreward_core.so instead of py_rewards")
    ap.add_argument("--before", type=Path, help="also judge with this libreward_core.so (a 'before' column)")
    ap.add_argument("--before-name", default="before", help="the column's name in the report")
    ap.add_argument("--no-mv", action="store_true", help="skip Math-Verify")
    ap.add_argument("--no-write", action="store_true", help="print only; do not rewrite the report")
    args = ap.parse_args()

    cases = mk.load()
    ours = core_judge(args.core)
    t = time.perf_counter()
    ours_kinds = agreement(cases, ours)
    ours_s = time.perf_counter() - t
    ours_fooled = fooled(cases, ours)
    print(f"{len(cases)} cases; ours {2 * len(cases) / ours_s:,.0f} judgements/s")
    for k, (share, n) in ours_kinds.items():
        print(f"  {k:14} {100 * share:6.2f} %  ({n} cases)")
    before_kinds = before_fooled = None
    if args.before:
        old = core_judge(args.before)
        before_kinds, before_fooled = agreement(cases, old), fooled(cases, old)
        print(f"{args.before_name}:", ", ".join(f"{k} {100 * v[0]:.1f} %" for k, v in before_kinds.items()))
    mv_kinds = mv_fooled = None
    if not args.no_mv:
        mv = mv_judge()
        t = time.perf_counter()
        mv_kinds = agreement(cases, mv)
        mv_s = time.perf_counter() - t
        mv_fooled = fooled(cases, mv)
        print(f"Math-Verify {2 * len(cases) / mv_s:,.0f} judgements/s")
        for k, (share, _) in mv_kinds.items():
            print(f"  {k:14} {100 * share:6.2f} %")
    from bench_math import time_adversarial

    worst = time_adversarial(ours)
    quiet = max(worst, key=lambda r: float(str(r["cpu_min_ms"])))
    print(
        f"slowest adversarial inputs (ms, wall median / CPU min; load {worst[0]['load']}):",
        ", ".join(f"{r['input']} {r['wall_median_ms']:.2f} / {r['cpu_min_ms']:.2f}" for r in worst[:4]),
    )
    if args.no_write or mv_kinds is None or mv_fooled is None:
        return

    lines = [
        "",
        f"_Last run: {len(cases)} cases, each judged both ways; worst adversarial input "
        f"{worst[0]['wall_median_ms']:.2f} ms wall clock ({worst[0]['input']}), {quiet['cpu_min_ms']:.2f} ms "
        f"CPU time ({quiet['input']}), load average {worst[0]['load']} on {os.cpu_count()} CPUs._",
        "",
        f"| kind | cases | {args.before_name} | `math_equal` | Math-Verify |",
        "|---|---:|---:|---:|---:|",
    ]
    for k, (_, n) in ours_kinds.items():
        lines.append(
            f"| {k} | {n} | {pct(before_kinds, k)} | **{pct(ours_kinds, k)}** | {pct(mv_kinds, k)} |"
        )
    lines += [
        "",
        f"| adversarial completion (all wrong) | cases | scored, {args.before_name} | scored, `math_equal` "
        "| scored, Math-Verify |",
        "|---|---:|---:|---:|---:|",
    ]
    for why, (n, m) in ours_fooled.items():
        b = before_fooled[why][0] if before_fooled else "–"
        lines.append(f"| {why} | {m} | {b} | **{n}** | {mv_fooled[why][0]} |")
    text = REPORT.read_text(encoding="utf-8")
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    REPORT.write_text(head + BEGIN + "\n".join(lines) + "\n" + END + tail, encoding="utf-8")
    print(f"wrote {REPORT}", file=sys.stderr)


if __name__ == "__main__":
    main()
