"""The python tool's share of a CPU GRPO step (issue 39 item 6: at most 2 %), from metrics.jsonl.

    python bench/tool_share.py --build /tmp/tool-share --steps 8 --repeat 3 \
        --json bench/results/tool-sandbox/tool_share.json
    python bench/tool_share.py --run RUN_DIR    # read an existing tool run instead

``--build DIR`` makes a tiny CPU tool run the way the test suite does: `grpo prep gsm8k --tools python` on the
bundled GSM8K sample (tiny model), the tiny model taught in place to answer with one python call (the test
suite's tool model, tests/tool_runs.py), then `grpo grpo --backend hf` for ``--steps`` steps (TRL's tool loop,
the real sandbox). Either way it reads the run's ``logs/metrics.jsonl``: per logged GRPO step the tool calls,
the seconds spent in the sandbox (``tools/seconds``) and their share of the step's wall time (``tools/share``,
cli/train/tool_use.py), and reports the median and the largest share, and the tool's seconds over all the
steps' seconds. ``--repeat N`` runs GRPO N times from the same taught model and pools the steps.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def grpo(*args: object) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "cli", *map(str, args)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd[2:])} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")


def build(root: Path, steps: int, gens: int) -> Path:
    from tool_runs import FORMAT, QUESTIONS, teach_tool

    from cli.config import resolve
    from cli.models import resolve_model
    from cli.run import RunDir

    run = root / "run"
    taught = root / "taught"  # prep and the teaching are done: a second --build only redoes GRPO
    if not taught.exists():
        root.mkdir(parents=True, exist_ok=True)
        config = root / "tool-share.yaml"  # the short contract of the test suite's tool model (JSON is YAML)
        config.write_text(json.dumps({"model": "tiny", "tools": ["python"], "format": FORMAT}))
        source = ROOT / "cli" / "data" / "samples" / "gsm8k_train.jsonl"
        grpo("prep", "gsm8k", "--run", run, "--config", config, "--source", source, "--limit", 60,
             "--eval-size", 4)  # fmt: skip
        rd = RunDir(run)
        cfg = resolve(saved=rd.saved_config())
        questions = [json.loads(line)["question"] for line in source.read_text().splitlines()[:60]]
        teach_tool(resolve_model(cfg, rd), cfg.format_spec(), (*QUESTIONS, *questions[:12]))
        taught.touch()
    shutil.rmtree(run / "grpo", ignore_errors=True)
    shutil.rmtree(run / "logs", ignore_errors=True)
    grpo("grpo", "--run", run, "--backend", "hf", "--max-steps", steps, "--gens", gens,
         "--max-completion-length", 48, "--save-steps", 0)  # fmt: skip
    return run


def read(run: Path) -> list[dict]:
    """The GRPO rows of the run's metrics.jsonl that carry the tool columns."""
    lines = (run / "logs" / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    steps = [r for r in rows if r.get("stage", "grpo") == "grpo" and r.get("tools/share") is not None]
    if not steps:
        raise SystemExit(f"{run}: no GRPO row with tools/share in logs/metrics.jsonl (not a tool run?)")
    keys = ("step", "step_time", "tools/calls", "tools/seconds", "tools/share")
    return [{k: r.get(k) for k in keys} for r in steps]


def summary(steps: list[dict]) -> dict:
    shares = [float(r["tools/share"]) for r in steps]
    tool_s = sum(float(r["tools/seconds"] or 0) for r in steps)
    step_s = sum(float(r["step_time"] or 0) for r in steps)
    return {
        "logged_steps": len(steps),
        "tool_calls": sum(float(r["tools/calls"] or 0) for r in steps),
        "share_median": statistics.median(shares),
        "share_max": max(shares),
        "share_of_all_steps": tool_s / step_s if step_s else None,  # tool seconds / the steps' seconds
        "steps": steps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--run", type=Path, help="an existing GRPO tool run")
    where.add_argument("--build", type=Path, help="make a tiny CPU tool run under this folder first")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--gens", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1, help="GRPO runs (--build): their steps pooled")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.run:
        steps = read(args.run)
    else:  # each repeat: GRPO again from the same taught model, a fresh sandbox
        steps = [row for _ in range(args.repeat) for row in read(build(args.build, args.steps, args.gens))]
    result = {"command": "python bench/tool_share.py " + " ".join(sys.argv[1:]), **summary(steps)}
    print(f"{result['logged_steps']} GRPO steps, {result['tool_calls']:.0f} tool calls")
    print("tool seconds per step:", [r["tools/seconds"] for r in steps])
    print(f"sandbox share of a step: median {result['share_median']:.2%}, max {result['share_max']:.2%}")
    if result["share_of_all_steps"] is not None:
        print(f"sandbox share of all the steps' time: {result['share_of_all_steps']:.2%}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
