"""How long Unsloth's GRPO log-prob scorer takes to compile, by the number of chunks it is asked for.

Unsloth 2026.10 scores the rollouts' log-probs with ``chunked_hidden_states_selective_log_softmax``
(``unsloth_zoo.rl_replacements``), a ``torch.compile(dynamic=True, fullgraph=True)`` function whose Python
loop over ``chunks`` pieces of the batch is unrolled into one graph. Its fused path skips the loop, but
kept-set scoring (min_p / top_k / top_p rollouts, which our IS correction needs) takes the loop. Unsloth
asks for ``chunks = rows × 4`` where ``rows`` is one mini-batch: with no ``unsloth_grpo_mini_batch`` and a
GPU with room, one mini-batch holds the whole step (128 rows on the 1.5B run: 512 chunks), whose compile
never finished on the H200 (≥ 6.6 min, 2026-12-04; stacks in Dynamo's tracing of this loop).

This script compiles the same function (Unsloth's own, imported) on random tensors for each chunk count
and times the first call (trace + compile + run) against the eager call: the compile's cost grows with the
chunk count, whatever the device. CPU is enough: it is the tracing and Inductor's graph work that grow.

    python bench/gpu/unsloth_scoring_compile.py --chunks 8 32 128 [--min-p 0.1] [--rows 128]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import time


def one(chunks: int, rows: int, min_p: float) -> dict[str, float]:
    """Compile and time the scorer once for ``chunks``, in this process."""
    import torch
    import unsloth  # noqa: F401  (unsloth_zoo refuses to import without it)
    from unsloth_zoo.rl_replacements import chunked_hidden_states_selective_log_softmax as compiled

    raw = inspect.unwrap(compiled)  # Unsloth leaves it eager on a CPU: compile it as it does on a GPU
    fn = torch.compile(raw, dynamic=True, fullgraph=True)
    torch.manual_seed(0)
    seq, hidden, vocab = 96, 64, 1024
    h = torch.randn(rows, seq, hidden)
    head = torch.randn(vocab, hidden)
    idx = torch.randint(0, vocab, (rows, seq))
    kw: dict[str, object] = {"chunks": chunks, "fused_linear": False}
    if min_p:
        kw["support_min_p"] = min_p
    with torch.no_grad():
        t = time.perf_counter()
        eager = raw(h, head, idx, **kw)
        eager_s = time.perf_counter() - t
        t = time.perf_counter()
        out = fn(h, head, idx, **kw)
        first_s = time.perf_counter() - t
        h2, idx2 = torch.randn(rows, seq + 17, hidden), torch.randint(0, vocab, (rows, seq + 17))
        t = time.perf_counter()
        fn(h2, head, idx2, **kw)  # another length: dynamic shapes, no new compile
        second_s = time.perf_counter() - t
    return {
        "chunks": chunks,
        "rows": rows,
        "eager_s": round(eager_s, 3),
        "first_call_s": round(first_s, 2),
        "second_length_s": round(second_s, 3),
        "max_abs_diff": float((out - eager).abs().max()),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, nargs="+", default=[8, 32, 128])
    ap.add_argument("--rows", type=int, default=128)
    ap.add_argument("--min-p", type=float, default=0.0, help="kept-set scoring (support_min_p)")
    ap.add_argument("--repeats", type=int, default=1, help="fresh processes per chunk count (median)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.rows, args.min_p)))
        return 0
    results = []
    for chunks in args.chunks:
        runs = []
        for _ in range(args.repeats):  # a fresh process each time: no compile cache carried over
            env = {**os.environ, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
            cmd = [
                sys.executable,
                __file__,
                "--one",
                str(chunks),
                "--rows",
                str(args.rows),
                "--min-p",
                str(args.min_p),
            ]
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        row = dict(
            runs[0], first_call_s=statistics.median(r["first_call_s"] for r in runs), repeats=len(runs)
        )
        results.append(row)
        print(json.dumps(row), flush=True)
    base = results[0]["first_call_s"]
    for r in results:
        ratio = r["first_call_s"] / base
        print(
            f"chunks {r['chunks']:>4}: first call {r['first_call_s']:7.1f} s ({ratio:.1f}x "
            f"chunks {results[0]['chunks']}), eager {r['eager_s']:.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
