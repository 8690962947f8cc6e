"""How long a command takes to import the training stack, with and without cli/run/lean.py.

    python bench/bench_startup.py [--runs 7]        # prints a table; writes nothing

Each run is a fresh interpreter that does what a `grpo` command does before its first model load:
``lean.hide()`` (skipped under ``GRPO_LEAN=0``), then ``transformers.AutoModelForCausalLM``, ``peft`` and
``trl.GRPOTrainer``. The two variants alternate run by run (lean, full, lean, full, ...), so a drift of the
machine's speed falls on both; the table gives each one's median wall seconds and the median of the
per-pair ratios. Also printed: whether scikit-learn, bitsandbytes and torchao ended up imported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE = """
import json, sys
from cli.run import lean
lean.hide()
from transformers import AutoModelForCausalLM  # noqa: F401
import peft  # noqa: F401
from trl import GRPOTrainer  # noqa: F401
print(json.dumps({m: sys.modules.get(m) is not None for m in ("sklearn", "bitsandbytes", "torchao")}))
"""


def one(lean: bool) -> tuple[float, dict[str, bool]]:
    env = {**os.environ, "GRPO_LEAN": "1" if lean else "0", "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    return time.perf_counter() - start, json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    one(True)  # warm the page cache
    lean_s, full_s, ratios = [], [], []
    loaded: dict[str, dict[str, bool]] = {}
    for _ in range(args.runs):
        a, loaded["lean"] = one(True)
        b, loaded["full"] = one(False)
        lean_s.append(a)
        full_s.append(b)
        ratios.append(a / b)
    print(f"{'variant':<8} {'median s':>9} {'min':>6} {'max':>6}  imported")
    for name, vals in (("lean", lean_s), ("full", full_s)):
        mods = ", ".join(m for m, on in loaded[name].items() if on) or "none of the three"
        print(f"{name:<8} {statistics.median(vals):9.2f} {min(vals):6.2f} {max(vals):6.2f}  {mods}")
    print(f"lean / full, median of {args.runs} pairs: {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
