"""Stored `grpo eval` completions scored again under the current math_equal (no decoding).

    python bench/rescore_math.py bench/results/learning-qwen-coder/round5_eval_samples.jsonl.gz --part math500
    python bench/rescore_math.py SAMPLES --before target/main_core.so --before-name "main 9bcbd65"

A `grpo eval` writes every completion it scored (samples.jsonl: checkpoint, question, gold answer,
completion, and its verdicts). The math_equal column can be measured again from those alone: each
completion is judged by ``cli.eval.scoring.math_verdicts``, the eval's own reading (solution tags,
else the boxes, else an answer phrase; py_rewards.math_equal against the gold), and, with
``--before``, by the same reading in another build of the extension (a ``libreward_core.so``).
Printed per checkpoint: the accuracy stored in the file, the accuracy now (with its Wilson
interval), how many verdicts changed each way; and for each pair of checkpoints scored on the same
prompts, the paired difference with its bootstrap interval (``cli.eval.stats``, as `grpo eval`
reports it). ``--json`` writes the figures to a file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

Judge = Callable[[Sequence[str], Sequence[str]], list[bool]]


def load(path: Path, part: str | None) -> dict[str, list[dict[str, object]]]:
    """The samples of ``path`` by checkpoint, in file order (only ``part`` when the file has parts)."""
    opener = gzip.open if path.suffix == ".gz" else open
    out: dict[str, list[dict[str, object]]] = {}
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if part is not None and row.get("part") != part:
                continue
            out.setdefault(str(row["checkpoint"]), []).append(row)
    return out


def current_judge() -> Judge:
    import py_rewards
    from cli.eval import math_verdicts

    spec = py_rewards.get_spec("seed000")
    return lambda completions, answers: math_verdicts(spec, completions, answers)


def core_judge(path: Path) -> Judge:
    """``math_verdicts``'s reading with another build's ``extract_math_answer`` / ``math_equal``."""
    from importlib.machinery import ExtensionFileLoader
    from importlib.util import module_from_spec, spec_from_loader

    import py_rewards

    loader = ExtensionFileLoader("py_rewards._core", str(path))
    spec = spec_from_loader("py_rewards._core", loader)
    assert spec is not None
    mod = module_from_spec(spec)
    loader.exec_module(mod)
    fmt = py_rewards.get_spec("seed000")

    def judge(completions: Sequence[str], answers: Sequence[str]) -> list[bool]:
        out = []
        for c, a in zip(completions, answers, strict=True):
            e = mod.extract_math_answer(c, fmt.solution_start, fmt.solution_end)
            out.append(e is not None and bool(mod.math_equal(e, str(a))))
        return out

    return judge


def main() -> None:
    from cli.eval import paired_bootstrap, wilson

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("samples", type=Path, help="a samples.jsonl(.gz) written by grpo eval")
    ap.add_argument("--part", help="only the rows of this part (files that merge several evals)")
    ap.add_argument("--before", type=Path, help="also judge with this libreward_core.so")
    ap.add_argument("--before-name", default="before")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()

    by_ckpt = load(args.samples, args.part)
    judges: dict[str, Judge] = {"now": current_judge()}
    if args.before:
        judges[args.before_name] = core_judge(args.before)
    report: dict[str, object] = {"samples": str(args.samples), "part": args.part, "checkpoints": {}}
    verdicts: dict[str, dict[str, list[bool]]] = {}
    for ckpt, rows in by_ckpt.items():
        completions = [str(r["completion"]) for r in rows]
        answers = [str(r["answer"]) for r in rows]
        stored = [bool(r["correct_math"]) for r in rows]
        n = len(rows)
        entry: dict[str, object] = {"n": n, "stored": sum(stored) / n}
        print(f"{ckpt}: {n} completions; stored accuracy (math_equal) {100 * sum(stored) / n:.1f} %")
        for name, judge in judges.items():
            v = judge(completions, answers)
            verdicts.setdefault(name, {})[ckpt] = v
            lo, hi = wilson(sum(v), n)
            gained = sum(1 for a, b in zip(stored, v, strict=True) if b and not a)
            lost = sum(1 for a, b in zip(stored, v, strict=True) if a and not b)
            entry[name] = {"accuracy": sum(v) / n, "ci95": [lo, hi], "gained": gained, "lost": lost}
            print(
                f"  {name:>12}: {100 * sum(v) / n:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]  "
                f"({gained} judged correct that were not, {lost} the other way)"
            )
        report["checkpoints"][ckpt] = entry  # type: ignore[index]
    names = list(by_ckpt)
    diffs = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            qa = [r["question"] for r in by_ckpt[a]]
            qb = [r["question"] for r in by_ckpt[b]]
            if qa != qb:
                continue  # not the same prompts in the same order: no paired difference
            for name in judges:
                va = [float(x) for x in verdicts[name][a]]
                vb = [float(x) for x in verdicts[name][b]]
                d, lo, hi = paired_bootstrap(va, vb)
                diffs[f"{b} - {a}, {name}"] = [d, lo, hi]
                print(f"{b} − {a} ({name}): {100 * d:+.1f} points [{100 * lo:+.1f}, {100 * hi:+.1f}]")
    report["paired"] = diffs
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
