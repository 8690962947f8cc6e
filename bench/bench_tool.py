"""Speed of the Python tool's sandbox against the ways a tool is usually built, in one run.

    python bench/bench_tool.py [--rounds 7] [--json bench/results/tool-sandbox/bench_tool.json]

The same snippets go through four runners:

- ``sandbox``: ``cli.tools.PythonSandbox.run`` (pydantic-monty, a warm worker pool, a fresh session and the
  limits per call: what training, eval and chat use);
- ``fresh-subprocess``: ``python -c "exec(stdin)"`` started per call (the usual "safe" tool: a process per
  call, no limits);
- ``long-lived-subprocess``: one ``python`` process that ``exec``s each snippet sent over a pipe (fast, but
  one hostile call poisons every later one);
- ``in-process-exec``: ``exec`` in the caller with stdout redirected (what a plain TRL tool function does; no
  isolation at all): the floor.

Snippets: GSM8K-style calculator calls (what the model writes, e.g. ``print(48 / 2)``) and a few heavier ones
(loops over 10**4-10**5 items). Every runner must print the same text for every snippet, or the run fails.
Per round each runner runs every snippet ``--calls`` times (fresh subprocesses once each: they are slow);
the figures are medians over ``--rounds`` rounds: calls per second on each set, the per-call overhead (the
median time of ``pass``), and the sandbox's ratios to each other runner. Numbers in docs/tools.md "Speed".
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CALCULATOR = [
    "print(48 / 2)",
    "print(48 + 24)",
    "print(5 * 12 + 3 * 8)",
    "print(round(12 * 0.35, 2))",
    "print(200 - 200 * 0.15)",
    "import math\nprint(math.ceil(250 / 12))",
    "total = 12.5 * 4 + 3\nprint(total)",
    "hours = 3 * 45 / 60\nprint(hours)",
    "print((1200 - 350) // 25)",
    "price = 80\ndiscount = 0.25\nprint(price * (1 - discount) * 3)",
]
HEAVY = [
    "print(sum(i * i for i in range(100_000)))",
    "primes = [n for n in range(2, 5000) if all(n % d for d in range(2, int(n**0.5) + 1))]\n"
    "print(len(primes))",
    "import itertools\nprint(sum(1 for p in itertools.permutations(range(7)) if p[0] < p[-1]))",
    "memo = {0: 0, 1: 1}\nfor i in range(2, 2000):\n    memo[i] = memo[i - 1] + memo[i - 2]\n"
    "print(memo[1999] % 1000003)",
    "s = ''.join(str(i) for i in range(20_000))\nprint(len(s), s.count('7'))",
]
EMPTY = "pass"

_SERVER = r"""
import contextlib, io, json, sys
for line in sys.stdin:
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            exec(json.loads(line), {})
    except Exception as e:
        buf.write(f"Error: {type(e).__name__}: {e}")
    sys.stdout.write(json.dumps(buf.getvalue().rstrip("\n")) + "\n")
    sys.stdout.flush()
"""


def fresh_subprocess(code: str) -> str:
    p = subprocess.run(
        [sys.executable, "-c", "import sys; exec(sys.stdin.read(), {})"],
        input=code,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return p.stdout.rstrip("\n")


class LongLived:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def __call__(self, code: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(code) + "\n")
        self.proc.stdin.flush()
        return str(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def in_process(code: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(code, {})
    return buf.getvalue().rstrip("\n")


def timed(run: Callable[[str], str], snippets: list[str], repeat: int) -> float:
    """Seconds per call over ``repeat`` passes of ``snippets``."""
    t0 = time.perf_counter()
    for _ in range(repeat):
        for code in snippets:
            run(code)
    return (time.perf_counter() - t0) / (repeat * len(snippets))


def measure(rounds: int, calls: int) -> dict:
    from cli.tools import PythonSandbox, SandboxLimits

    t0 = time.perf_counter()
    sandbox = PythonSandbox(SandboxLimits(timeout_s=10.0, memory_mb=256))
    sandbox.run(EMPTY)
    start_s = time.perf_counter() - t0
    server = LongLived()
    runners: dict[str, Callable[[str], str]] = {
        "sandbox": lambda c: "" if (out := sandbox.run(c).text).startswith("(no output") else out,
        "fresh-subprocess": fresh_subprocess,
        "long-lived-subprocess": server,
        "in-process-exec": in_process,
    }
    try:
        for code in CALCULATOR + HEAVY:  # same output everywhere, or the comparison means nothing
            outs = {name: run(code) for name, run in runners.items()}
            if len(set(outs.values())) != 1:
                raise SystemExit(f"runners disagree on {code!r}: {outs}")
        samples: dict[str, dict[str, list[float]]] = {
            n: {"calc": [], "heavy": [], "empty": []} for n in runners
        }
        for _ in range(rounds):
            for name, run in runners.items():
                n = 1 if name == "fresh-subprocess" else calls
                samples[name]["calc"].append(timed(run, CALCULATOR, n))
                samples[name]["heavy"].append(timed(run, HEAVY, max(1, n // 5)))
                samples[name]["empty"].append(timed(run, [EMPTY], 5 if n == 1 else 10 * n))
    finally:
        t1 = time.perf_counter()
        sandbox.close()
        close_s = time.perf_counter() - t1
        server.close()
    return summarise(samples, start_s, close_s)


def summarise(samples: dict[str, dict[str, list[float]]], start_s: float, close_s: float) -> dict:
    med = {n: {k: statistics.median(v) for k, v in s.items()} for n, s in samples.items()}
    rows = {
        n: {
            "calc_calls_per_s": 1 / m["calc"],
            "heavy_calls_per_s": 1 / m["heavy"],
            "overhead_ms": 1e3 * m["empty"],
            "calc_ms": 1e3 * m["calc"],
            "heavy_ms": 1e3 * m["heavy"],
        }
        for n, m in med.items()
    }
    sb = med["sandbox"]
    ratios = {
        n: {f"{k}_time_ratio_sandbox_over_this": sb[k] / m[k] for k in ("calc", "heavy", "empty")}
        for n, m in med.items()
        if n != "sandbox"
    }
    return {"runners": rows, "ratios": ratios, "sandbox_start_s": start_s, "sandbox_close_s": close_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20, help="passes over each snippet set per round")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    result = measure(args.rounds, args.calls)
    result["setup"] = {
        "rounds": args.rounds,
        "calls": args.calls,
        "calculator_snippets": len(CALCULATOR),
        "heavy_snippets": len(HEAVY),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "command": "python bench/bench_tool.py " + " ".join(sys.argv[1:]),
    }
    print(f"{'runner':24s} {'calc calls/s':>13s} {'heavy calls/s':>14s} {'overhead ms':>12s}")
    for name, r in result["runners"].items():
        calc, heavy, over = r["calc_calls_per_s"], r["heavy_calls_per_s"], r["overhead_ms"]
        print(f"{name:24s} {calc:13.0f} {heavy:14.1f} {over:12.3f}")
    print("sandbox time / other runner's (median per call; < 1: the sandbox is faster):")
    for name, r in result["ratios"].items():
        print(f"  vs {name:22s} " + "  ".join(f"{k.split('_')[0]} {v:.3g}" for k, v in r.items()))
    start, close = result["sandbox_start_s"] * 1e3, result["sandbox_close_s"] * 1e3
    print(f"sandbox pool start + first call {start:.1f} ms, close {close:.1f} ms")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
