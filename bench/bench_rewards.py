"""Benchmark: py_rewards (Rust core) vs the pure-Python reference (the seeds' regex code).

    python bench/bench_rewards.py            # ~2-3 min on 2 cores; writes bench/rewards.md
    python bench/bench_rewards.py --n 8192 --repeat 3 --no-write   # quick look

The four seed-000 rewards are called one by one, as TRL's GRPOTrainer calls them, on 65,536
generated rollouts (chat-message completions, ~3.5K chars median): a realistic mix (well-formed,
near misses, wrong answers, missing and duplicated tags, odd number formats, ~5 % loops of 5-20K
chars, a few of them regex-pathological but small enough for the reference to finish) and a clean
mix (well-formed only). Each repetition scores a fresh copy of the strings (no warm UTF-8 caches, no
batch cache carried over). Degenerate inputs are timed per 100K chars for py_rewards; the reference
runs only on much smaller ones, to show its blow-up. Medians of the repetitions; ratios in one run.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from py_rewards import _core, get_scorer, make_reward_funcs  # noqa: E402

RS, RE, SS, SE = "<start_working_out>", "<end_working_out>", "<SOLUTION>", "</SOLUTION>"

WORDS = (
    "so the total is we need to find let x be then substitute into equation gives us check again "
    "multiply both sides by divide factor the sum of terms where each term is therefore and hence "
    "note that since the area of triangle with base height radius circle probability of choosing"
).split()
SYMBOLS = ["×", "≈", "π", "√", "≤", "²", "→", "·"]
ODD_NUMBERS = ["1,234", "1_000", "-0.5", "3.", ".5", "inf", "nan", "1e3", "١٢", "12 ", " 7", "0", "-0", "4/5"]


def paragraph(rng: random.Random, unicode: bool = False) -> str:
    n = rng.randint(25, 80)
    words = []
    for _ in range(n):
        r = rng.random()
        if r < 0.12:
            words.append(str(rng.randint(0, 10_000)))
        elif r < 0.14 and unicode:
            words.append(rng.choice(SYMBOLS))
        elif r < 0.16:
            words.append(f"$\\frac{{{rng.randint(1, 99)}}}{{{rng.randint(1, 99)}}}$")
        else:
            words.append(rng.choice(WORDS))
    return " ".join(words) + (".\n" if rng.random() < 0.5 else ". ")


def make_rollouts(n: int, clean: bool, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    pool = [paragraph(rng) for _ in range(3000)]
    # Most math rollouts write LaTeX (ASCII); ~10 % carry a non-ASCII symbol (×, π, ≈, ...).
    unicode_pool = [paragraph(rng, unicode=True) for _ in range(300)]

    def reasoning() -> str:
        target = int(rng.lognormvariate(8.15, 0.35))  # median ~3.5K chars
        parts, size = ([rng.choice(unicode_pool)], 0) if rng.random() < 0.1 else ([], 0)
        while size < target:
            p = rng.choice(pool)
            parts.append(p)
            size += len(p)
        return "".join(parts)

    texts, answers = [], []
    for _ in range(n):
        gold = str(rng.randint(0, 5000))
        work = reasoning()
        good = f"{RS}{work}{RE}{SS}{gold}{SE}"
        kind = (
            "good"
            if clean
            else rng.choices(
                ["good", "near", "wrong", "missing", "dup", "odd", "loop"], [52, 13, 12, 8, 5, 5, 5]
            )[0]
        )
        if kind == "good":
            t = good + rng.choice(["", "\n", " \n"])
        elif kind == "near":
            t = rng.choice(
                [
                    f"{RS}{work}{SS}{gold}{SE}",  # reasoning end missing
                    f"{RS}{work}{RE}{SS}{gold}",  # truncated before the end tag
                    f"{RS}{work}{RE}{SS} {gold} {SE} Hope this helps!",  # text after the end tag
                    f"{RS}{work}{RE}\n{SS}\nThe answer is {gold}.\n{SE}\n",  # words in the answer
                    f"{RS}{work}{RE}{SS}{int(gold) * 1.05:.2f}{SE}",  # within 10 %
                ]
            )
        elif kind == "wrong":
            t = f"{RS}{work}{RE}{SS}{rng.randint(0, 5000)}{SE}"
        elif kind == "missing":
            t = work + f"\nThe answer is {gold}."
        elif kind == "dup":
            t = f"{RS}{work}{RE}{SS}{gold}{SE}{RE}{SS}{gold}{SE}"
        elif kind == "odd":
            t = f"{RS}{work}{RE}{SS}{rng.choice(ODD_NUMBERS)}{SE}"
            gold = rng.choice([gold, *ODD_NUMBERS])
        else:  # degenerate loops, 5-20K chars; a few regex-pathological ones kept small
            size = rng.randint(5_000, 20_000)
            phrase = rng.choice(["Wait, let me recompute 12 * 7. ", "So the answer is\n\n", "</SOLUTION> x"])
            r = rng.random()
            if r < 0.4:
                t = work[:2000] + phrase * (size // len(phrase))
            elif r < 0.95:
                t = f"{RS}{work[:2000]}{RE}{SS}" + phrase * (size // len(phrase))
            elif r < 0.975:
                t = (RE + SS) * rng.randint(20, 50)  # cubic for FORMAT_REGEX
            else:
                t = SS + " " * rng.randint(500, 1500)  # quadratic for NUMERIC_REGEX
        texts.append(t)
        answers.append(gold)
    return texts, answers


def as_messages(texts: list[str]) -> list[list[dict[str, str]]]:
    # Fresh str objects each time: no UTF-8 cache or batch cache survives between repetitions.
    return [[{"role": "assistant", "content": t.encode().decode()}] for t in texts]


def time_trl_calls(funcs: list[Callable], completions: list, answers: list[str]) -> tuple[list[float], list]:
    """Seconds per call and the scores, calling each reward as TRL does (same lists every call).

    As ``timeit`` does, the garbage collector is off while timing: building 65K fresh message lists
    leaves a full collection pending, which would otherwise land inside whichever call runs first.
    """
    get_scorer().clear_cache()
    prompts = [None] * len(completions)
    times, out = [], []
    gc.collect()
    gc.disable()
    try:
        for f in funcs:
            t0 = time.perf_counter()
            out.append(f(prompts=prompts, completions=completions, answer=answers))
            times.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return times, out


def median_time(run: Callable[[], float], repeat: int) -> float:
    return statistics.median(run() for _ in range(repeat))


def bench_mix(name: str, texts: list[str], answers: list[str], repeat: int, ref_repeat: int) -> dict:
    rust = make_reward_funcs(backend="rust")[0]
    ref = make_reward_funcs(backend="python")[0]
    results: dict = {"mix": name, "n": len(texts), "mchars": sum(map(len, texts)) / 1e6}
    outputs: dict[str, list] = {"rust": [], "rust_1t": [], "ref": []}
    per_call: list[list[float]] = []
    totals: dict[str, list[float]] = {"rust": [], "rust_1t": [], "ref": []}

    def run(funcs: list[Callable], parallel: bool, key: str, sub: slice = slice(None)) -> None:
        os.environ["PY_REWARDS_PARALLEL"] = "1" if parallel else "0"
        completions = as_messages(texts[sub])
        times, out = time_trl_calls(funcs, completions, answers[sub])
        if sub == slice(None):
            outputs[key].append(out)
            totals[key].append(sum(times))
            if key == "rust":
                per_call.append(times)

    # Warm-up (untimed): code paged in, the scoring pool started, the reference's regexes compiled.
    warm = slice(0, 2048)
    run(rust, True, "rust", warm)
    run(rust, False, "rust_1t", warm)
    run(ref, False, "ref", warm)
    # Interleaved, so that a change in the machine's load hits every column alike.
    for r in range(repeat):
        run(rust, True, "rust")
        run(rust, False, "rust_1t")
        if r < ref_repeat:
            run(ref, False, "ref")
    os.environ.pop("PY_REWARDS_PARALLEL", None)
    want = outputs["ref"][0]
    for key, outs in outputs.items():
        for k, out in enumerate(outs):
            assert out == want, f"{name}: {key} run {k}: scores differ from the reference"
    for key, ts in totals.items():
        results[key] = statistics.median(ts)
    results["first_ms"] = 1000 * statistics.median(t[0] for t in per_call)
    results["cached_ms"] = 1000 * statistics.median(x for t in per_call for x in t[1:])
    return results


def bench_degenerate(repeat: int) -> list[dict]:
    rust = make_reward_funcs(backend="rust")[0]
    ref = make_reward_funcs(backend="python")[0]
    rows = []
    for label, build, ref_chars in [
        (
            "format loop `<end_working_out><SOLUTION>`×N, no closing tag",
            lambda n: (RE + SS) * (n // 27),
            2_000,
        ),
        ("`<SOLUTION>` + N spaces", lambda n: SS + " " * n, 4_000),
    ]:
        text = build(100_000)

        def once(funcs: list[Callable], t: str) -> float:
            get_scorer().clear_cache()
            c = [[{"role": "assistant", "content": t}]]
            t0 = time.perf_counter()
            funcs[0](completions=c, answer=["1"])  # the first call does the scan
            first = time.perf_counter() - t0
            for f in funcs[1:]:
                f(completions=c, answer=["1"])
            return first

        def all4(funcs: list[Callable], t: str) -> float:
            get_scorer().clear_cache()
            c = [[{"role": "assistant", "content": t}]]
            t0 = time.perf_counter()
            for f in funcs:
                f(completions=c, answer=["1"])
            return time.perf_counter() - t0

        small = build(ref_chars)
        rows.append(
            {
                "input": label,
                "rust_first_ms": 1000 * median_time(lambda text=text: once(rust, text), repeat * 5),
                "rust_all4_ms": 1000 * median_time(lambda text=text: all4(rust, text), repeat * 5),
                "ref_chars": len(small),
                "ref_all4_ms": 1000 * median_time(lambda small=small: all4(ref, small), 1),
            }
        )
    return rows


def render(mixes: list[dict], degenerate: list[dict], args: argparse.Namespace) -> str:
    threads = _core.runtime_info()[1]
    py = f"{platform.python_implementation()} {platform.python_version()}"
    cmd = f"python bench/bench_rewards.py --n {args.n} --repeat {args.repeat} --ref-repeat {args.ref_repeat}"
    lines = [
        "# Reward benchmark: py_rewards (Rust core) vs the pure-Python reference",
        "",
        f"`{cmd}` — {py}, {os.cpu_count()} CPUs ({threads} scoring threads), {platform.machine()}.",
        f"Medians of {args.repeat} runs (reference: {args.ref_repeat}), after an untimed warm-up; the runs of"
        " py_rewards (all threads, 1 thread) and the reference are interleaved.",
        "The four seed-000 rewards are called",
        "one by one as TRL calls them (chat-message completions, fresh str objects every run, GC paused",
        "while timing as in `timeit`); py_rewards",
        "scores all four in the first call and serves the other three from its batch cache. Every run's",
        "scores were checked equal to the reference's.",
        f"Load average (1/5/15 min) {'/'.join(f'{x:.1f}' for x in args.load[0])} at the start, "
        f"{'/'.join(f'{x:.1f}' for x in args.load[1])} at the end (other work shares the machine).",
        "",
        "| mix | rollouts | M chars | reference (s) | py_rewards, 1 thread (s) | py_rewards (s) "
        "| ratio, 1 thread | ratio | py_rewards first call / each cached call (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in mixes:
        lines.append(
            f"| {m['mix']} | {m['n']:,} | {m['mchars']:.0f} | {m['ref']:.2f} | {m['rust_1t']:.3f} "
            f"| {m['rust']:.3f} | {m['ref'] / m['rust_1t']:.0f}× | **{m['ref'] / m['rust']:.0f}×** "
            f"| {m['first_ms']:.0f} / {m['cached_ms']:.0f} |"
        )
    lines += [
        "",
        "Degenerate inputs: py_rewards on 100K chars; the reference only on a small input (it blows up).",
        "",
        "| input | py_rewards, first call (ms / 100K chars) | py_rewards, all four calls (ms) "
        "| reference, all four calls |",
        "|---|---:|---:|---:|",
    ]
    for d in degenerate:
        lines.append(
            f"| {d['input']} | {d['rust_first_ms']:.2f} | {d['rust_all4_ms']:.2f} "
            f"| {d['ref_all4_ms']:.0f} ms on {d['ref_chars']:,} chars |"
        )
    lines += [
        "",
        "Targets: realistic ≥ 100×, clean ≥ 10×, degenerate ≤ 10 ms per 100K chars per call.",
        "The machine is shared and noisy; each table comes from one run of the script.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=65_536, help="rollouts per mix")
    parser.add_argument("--repeat", type=int, default=7, help="repetitions for py_rewards (median)")
    parser.add_argument("--ref-repeat", type=int, default=3, help="repetitions for the reference (median)")
    parser.add_argument("--no-write", action="store_true", help="print only, do not write bench/rewards.md")
    args = parser.parse_args()

    load_before = os.getloadavg()
    mixes = []
    for name, clean in [("realistic", False), ("clean (well-formed only)", True)]:
        texts, answers = make_rollouts(args.n, clean=clean)
        mixes.append(bench_mix(name, texts, answers, args.repeat, args.ref_repeat))
        del texts, answers
        print(f"done: {name}", file=sys.stderr)
    degenerate = bench_degenerate(args.repeat)
    args.load = (load_before, os.getloadavg())
    report = render(mixes, degenerate, args)
    print(report)
    if not args.no_write:
        Path(__file__).with_name("rewards.md").write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
