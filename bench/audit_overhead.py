"""What the verifier audit (grpo.audit_every, cli/train/audit.py) costs a training step.

    python bench/audit_overhead.py [--batch 128] [--sample 16] [--repeats 30]

The audit's work in the training thread is :meth:`Auditor.observe`: score the batch with the Rust core
(the constant-verdict check), and on an audited batch sample it, extract the answers and queue them for the
Math-Verify process. Measured here on GSM8K-shaped rollouts (the bundled test sample's worked solutions in
the seed-000 format, a third of them with a wrong answer) against the reference measured in the same run:
the four seed-000 rewards scoring the same batch (what every step does anyway). Medians of ``--repeats``.
The step times it is compared with are the measured ones quoted in docs/verdict.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rollouts(n: int) -> tuple[list[str], list[str]]:
    from cli.run import SAMPLES

    rows = [json.loads(x) for x in (SAMPLES / "gsm8k_test.jsonl").read_text().splitlines()]
    texts, golds = [], []
    for i in range(n):
        r = rows[i % len(rows)]
        work, gold = r["answer"].split("####")
        said = gold.strip() if i % 3 else str(int(float(gold.strip().replace(",", ""))) + 1)
        texts.append(f"{work.strip()}<end_working_out><SOLUTION>{said}</SOLUTION>")
        golds.append(gold.strip())
    return texts, golds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--sample", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()

    from cli.train import Auditor
    from py_rewards import make_reward_funcs
    from py_rewards.spec import get_spec

    spec = get_spec("seed000")
    texts, golds = rollouts(args.batch)
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    names = ["match_format_exactly", "match_format_approximately", "check_answer", "check_numbers"]
    funcs = make_reward_funcs(spec, names)[0]
    prompts = [[{"role": "user", "content": "q"}]] * len(texts)

    def rewards() -> None:
        for f in funcs:
            f(prompts=prompts, completions=completions, answer=golds)

    cfg = SimpleNamespace(audit_every=1, audit_sample=args.sample, audit_min_agreement=0.0,
                          audit_constant_batches=10**9)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        aud = Auditor(spec, Path(tmp), cfg, warn=lambda _: None).start()
        time.sleep(3)  # Math-Verify's import in the child, before timing
        ref, audited, plain = [], [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            rewards()
            ref.append(time.perf_counter() - t0)
            aud.every = 1
            t0 = time.perf_counter()
            aud.observe(completions, golds)
            audited.append(time.perf_counter() - t0)
            aud.every = 10**9
            t0 = time.perf_counter()
            aud.observe(completions, golds)
            plain.append(time.perf_counter() - t0)
            time.sleep(0.2)  # a step's worth of other work: the child judges meanwhile
        aud.close()
        lines = (Path(tmp) / "audit.jsonl").read_text().splitlines()
        judged = [json.loads(x) for x in lines]
    med = {
        k: statistics.median(v) * 1e3 for k, v in (("rewards", ref), ("audited", audited), ("plain", plain))
    }
    child = statistics.median(r["seconds"] for r in judged) if judged else float("nan")
    print(f"batch {args.batch} completions, sample {args.sample}, {args.repeats} repeats (medians):")
    print(f"  the four seed rewards (reference): {med['rewards']:.2f} ms")
    ratio = med["audited"] / med["rewards"]
    print(f"  observe, audited batch:            {med['audited']:.2f} ms  ({ratio:.2f}x)")
    print(
        f"  observe, batch not audited:        {med['plain']:.2f} ms  ({med['plain'] / med['rewards']:.2f}x)"
    )
    print(f"  Math-Verify process, per batch:    {child * 1e3:.0f} ms ({len(judged)} judged, off the loop)")
    for name, step in (
        ("1.5B on an H200, 3.7 s/step", 3.7),
        ("Gemma-3-270M on 2 CPU cores, 10.8 s/step", 10.8),
    ):
        print(f"  share of a step ({name}): {med['audited'] / 1e3 / step:.4%}")


if __name__ == "__main__":
    main()
