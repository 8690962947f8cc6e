"""Two `grpo eval` runs of the same prompts, paired: accuracy of each and the difference with its interval.

    python bench/paired_runs.py A.jsonl[.gz]:CHECKPOINT B.jsonl[.gz]:CHECKPOINT [--rule correct]

Each side is an eval's ``samples.jsonl`` (``<run>/eval/samples.jsonl``, or a stored copy under
bench/results/) and the checkpoint whose rows to take (``sft``, ``grpo``, ...). The prompts are matched by
question text, so two runs made at different times (a tool run against the stored tool-free run of
docs/results.md row 1, say) pair up prompt by prompt; a prompt missing on either side is left out and
counted. Prints each side's accuracy, B − A in points with a 95 % paired bootstrap interval, and the
discordant counts (solved only by A, only by B). Row 1 again:

    python bench/paired_runs.py bench/results/learning-qwen-coder/gsm8k_samples.jsonl.gz:sft \
        bench/results/learning-qwen-coder/gsm8k_samples.jsonl.gz:grpo
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _truthy(value: object) -> bool:
    return str(value).strip().lower() in ("true", "1", "1.0")


def load(spec: str, rule: str) -> dict[str, bool]:
    """{question: correct} of one checkpoint of one samples file (``PATH:CHECKPOINT``)."""
    path, _, checkpoint = spec.rpartition(":")
    if not path:
        raise SystemExit(f"{spec}: give PATH:CHECKPOINT")
    opener = gzip.open if path.endswith(".gz") else open
    out: dict[str, bool] = {}
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row.get("checkpoint") == checkpoint:
                out[row["question"]] = _truthy(row.get(rule))
    if not out:
        raise SystemExit(f"{path}: no rows of checkpoint {checkpoint!r}")
    return out


def compare(a: dict[str, bool], b: dict[str, bool]) -> dict[str, float | int]:
    sys.path.insert(0, str(REPO))
    from cli.eval import paired_bootstrap

    common = [q for q in a if q in b]
    xs = [float(a[q]) for q in common]
    ys = [float(b[q]) for q in common]
    diff, lo, hi = paired_bootstrap(xs, ys, iters=5000)
    return {
        "n": len(common),
        "only_in_a": len(a) - len(common),
        "only_in_b": len(b) - len(common),
        "acc_a": 100 * sum(xs) / len(xs),
        "acc_b": 100 * sum(ys) / len(ys),
        "diff": 100 * diff,
        "lo": 100 * lo,
        "hi": 100 * hi,
        "a_only": sum(1 for x, y in zip(xs, ys, strict=True) if x and not y),
        "b_only": sum(1 for x, y in zip(xs, ys, strict=True) if y and not x),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", help="PATH:CHECKPOINT of the reference side")
    p.add_argument("b", help="PATH:CHECKPOINT of the side compared with it")
    p.add_argument("--rule", default="correct", help="correct (seed rule), correct_math or correct_lenient")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    r = compare(load(args.a, args.rule), load(args.b, args.rule))
    print(
        f"{r['n']} prompts paired ({r['only_in_a']} only in A, {r['only_in_b']} only in B), "
        f"rule {args.rule}: "
        f"A {r['acc_a']:.1f} %, B {r['acc_b']:.1f} %, B - A {r['diff']:+.1f} points "
        f"[{r['lo']:+.1f}, {r['hi']:+.1f}]; solved only by A {r['a_only']}, only by B {r['b_only']}"
    )
    if args.json:
        args.json.write_text(json.dumps({"rule": args.rule, **r}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
