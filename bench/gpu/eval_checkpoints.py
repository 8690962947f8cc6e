"""Two GRPO runs compared at the same step, and SFT vs GRPO on MATH500, through `grpo eval`'s own code.

`grpo eval` scores a run's base, SFT and GRPO adapters. For a before/after comparison of two GRPO runs
(same data, same seed, one setting changed) the fair point is the same step: this script finds the
highest checkpoint step both runs saved, and scores run A's and run B's adapters of that step on the
same prompts in one vLLM engine (cli/eval/evaluation.py's EvalJob, greedy, the product's scoring), with
the paired difference of accuracy and reward. It also scores run A's SFT and final GRPO adapters on
MATH500 (accuracy by the seed rule and by math_equal).

    python3 bench/gpu/eval_checkpoints.py --a RUN_A --b RUN_B --gsm8k test.jsonl --math math500.jsonl \
        --out X.json
    python3 bench/gpu/eval_checkpoints.py --a RUN_A --gsm8k test.jsonl --math math500.jsonl \
        --out X.json  # A only
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def common_step(a: Path, b: Path) -> int | None:
    def steps(run: Path) -> set[int]:
        found = set()
        for c in (run / "grpo" / "checkpoints").glob("attempt-*/checkpoint-*"):
            m = re.fullmatch(r"checkpoint-(\d+)", c.name)
            if m and (c / "adapter_model.safetensors").exists():
                found.add(int(m.group(1)))
        return found

    both = steps(a) & steps(b)
    return max(both) if both else None


def checkpoint(run: Path, step: int) -> Path:
    return next((run / "grpo" / "checkpoints").glob(f"attempt-*/checkpoint-{step}"))


def score(
    run: Path, rows: list[dict[str, str]], first: Path, second: Path, max_new: int, engine: str
) -> dict:
    """``first`` and ``second`` adapters on ``rows`` in one engine; per checkpoint results and the pair."""
    from cli.eval import EvalJob, evaluation, paired_bootstrap
    from cli.run import RunDir, run_config

    rd = RunDir(run)
    cfg = run_config(rd)
    job = EvalJob(
        rd=rd, cfg=cfg, spec=cfg.format_spec(), rows=rows, checkpoints=["sft", "grpo"],
        adapters={"sft": first, "grpo": second}, max_new_tokens=max_new, batch_size=8, engine=engine,
    )  # fmt: skip
    scored = evaluation.run(job)
    correct = {s: [x["correct"] for x in scored.samples if x["checkpoint"] == s] for s in ("sft", "grpo")}
    maths = {s: [x["correct_math"] for x in scored.samples if x["checkpoint"] == s] for s in ("sft", "grpo")}
    out: dict[str, Any] = {"first": str(first), "second": str(second), "n": len(rows)}
    for key, per in (("accuracy", correct), ("accuracy_math", maths), ("reward", scored.per_prompt)):
        diff, lo, hi = paired_bootstrap([float(x) for x in per["sft"]], [float(x) for x in per["grpo"]])
        out[f"{key}_second_minus_first"] = [round(diff, 4), round(lo, 4), round(hi, 4)]
    only = [sum(1 for a, b in zip(correct["sft"], correct["grpo"], strict=True) if b and not a),
            sum(1 for a, b in zip(correct["sft"], correct["grpo"], strict=True) if a and not b)]  # fmt: skip
    out["solved_only_by_second_first"] = only
    out["results"] = [{k: v for k, v in r.items() if k != "label"} for r in scored.results]
    out["samples"] = scored.samples  # the completions, to score again offline (written apart, gzipped)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, required=True, help="run A (the new defaults)")
    ap.add_argument("--b", type=Path, help="run B (the same run before the fix); without it: MATH500 only")
    ap.add_argument("--gsm8k", type=Path, required=True)
    ap.add_argument("--math", type=Path, help="MATH500 jsonl (problem, answer)")
    ap.add_argument("--max-new-tokens", type=int, default=384)
    ap.add_argument("--engine", default="vllm", help="vllm (the GPU) or hf (a CPU smoke run)")
    ap.add_argument("--limit", type=int, help="the first N prompts only (smoke runs)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from cli.eval import load_rows
    from cli.run import RunDir

    report: dict[str, Any] = {}
    step = common_step(args.a, args.b) if args.b is not None else None
    if step is not None:
        rows, _ = load_rows(RunDir(args.a), None, args.gsm8k, args.limit)
        before, after = checkpoint(args.b, step), checkpoint(args.a, step)
        report["same_step"] = {
            "step": step,
            **score(args.a, rows, before, after, args.max_new_tokens, args.engine),
        }
        print(json.dumps({k: v for k, v in report["same_step"].items() if k not in ("results", "samples")}))
    if args.math is not None:
        rows, _ = load_rows(RunDir(args.a), None, args.math, args.limit)
        sft, grpo = args.a / "sft" / "adapter", args.a / "grpo" / "adapter"
        report["math500"] = score(args.a, rows, sft, grpo, 512, args.engine)
        print(json.dumps({k: v for k, v in report["math500"].items() if k not in ("results", "samples")}))
    import gzip

    with gzip.open(args.out.with_suffix(".samples.jsonl.gz"), "wt") as fh:
        for part, result in report.items():
            for sample in result.pop("samples", []):
                fh.write(json.dumps({"part": part, **sample}) + "\n")
    args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
