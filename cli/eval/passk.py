"""`grpo eval --samples N`: pass@1, pass@k and maj@N from N sampled completions per prompt.

Greedy accuracy says what a checkpoint answers; sampled at GRPO's own settings (the run's temperature,
top_p, min_p, top_k, seeded by the run's seed) it says what it *can* answer:

- pass@1: the share of correct samples (mean over the N samples, then over prompts);
- pass@k: the chance that at least one of k samples is correct, with the unbiased estimator of Chen et al.
  2021 (HumanEval): per prompt with c correct of n, ``1 − C(n−c, k) / C(n, k)``, for k = 1, 2, 4, … and N;
- maj@N: the answer given most often among the N samples (the marked answer, as math_equal reads it, numbers
  compared as numbers; ties go to the one given first) is correct when a sample giving it is correct.

Correct is the seed rule (the eval table's main accuracy, the training verifier). Each figure carries a
95 % interval from a bootstrap over prompts, and two checkpoints are compared paired (same prompts,
:func:`cli.eval.stats.paired_bootstrap`). When pass@1 rises from SFT to GRPO while pass@N falls (the
diversity collapse reported for RLVR), :func:`collapse_line` says so in one line.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cli.eval import scoring
from cli.infer import generation

if TYPE_CHECKING:
    from cli.config.schema import Config
    from py_rewards.spec import FormatSpec

SAMPLED = "#sampled"  # a checkpoint's sampled completions among the pregenerated ones (vllm_engine.SAMPLED)
# Later checkpoint minus earlier, on the same prompts: what each stage added, and GRPO beyond its placebo.
PAIRS = (("base", "sft"), ("sft", "grpo"), ("control", "grpo"))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one prompt with ``c`` correct among ``n`` samples: ``1 − C(n−c, k) / C(n, k)``
    (Chen et al. 2021), as their numerically stable product ``1 − Π_{i=n−c+1..n} (1 − k/i)``."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def ks_for(n: int) -> list[int]:
    """The k reported for ``n`` samples: the powers of two below ``n``, and ``n``."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return [*ks, n]


def vote_key(spec: FormatSpec, text: str) -> str | None:
    """What a sample votes for: its marked answer (math_equal's extraction), a number as a number."""
    from py_rewards import extract_math_answer

    answer = extract_math_answer(text, spec.solution_start, spec.solution_end)
    if answer is None or not answer.strip():
        return None
    value = scoring._number(answer)
    return repr(value) if value is not None else " ".join(answer.split())


def majority_correct(keys: Sequence[str | None], correct: Sequence[bool]) -> bool:
    """maj@n of one prompt: the answer voted most often (ties: the first given) is correct when one of the
    samples that gave it is; samples without an answer do not vote."""
    counts: dict[str, int] = {}
    for key in keys:
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return False
    best = max(counts, key=lambda k: counts[k])  # max keeps the first of equal counts: the first given
    return any(ok for key, ok in zip(keys, correct, strict=True) if key == best)


@dataclass
class SampledStage:
    """One checkpoint's N samples per prompt, scored: solved counts, majority verdicts, format, length."""

    checkpoint: str
    n: int
    solved: list[int]  # correct samples per prompt (seed rule)
    majority: list[bool]  # maj@n per prompt
    format_rate: float
    mean_tokens: float
    seconds: float = 0.0

    def pass_values(self, k: int) -> list[float]:
        return [pass_at_k(self.n, c, k) for c in self.solved]

    def maj_values(self) -> list[float]:
        return [float(m) for m in self.majority]

    def values(self, metric: str) -> list[float]:
        """Per-prompt values of ``pass@K`` or ``maj@N``."""
        name, _, k = metric.partition("@")
        return self.maj_values() if name == "maj" else self.pass_values(int(k))

    def metrics(self) -> list[str]:
        return [f"pass@{k}" for k in ks_for(self.n)] + [f"maj@{self.n}"]

    def summary(self) -> dict[str, Any]:
        from cli.eval.stats import bootstrap_ci

        out: dict[str, Any] = {"checkpoint": self.checkpoint, "samples": self.n, "prompts": len(self.solved)}
        for metric in self.metrics():
            mean, lo, hi = bootstrap_ci(self.values(metric))
            out[metric] = {"value": round(mean, 4), "ci95": [round(lo, 4), round(hi, 4)]}
        out["format_compliance"] = round(self.format_rate, 4)
        out["mean_completion_tokens"] = round(self.mean_tokens, 1)
        out["seconds"] = round(self.seconds, 2)
        return out


def sampling_of(cfg: Config, n: int) -> generation.Sampling:
    """GRPO's rollout sampling (``grpo.temperature``, top_p, min_p, top_k), seeded by the run's seed."""
    g = cfg.grpo
    return generation.Sampling(
        n=n, temperature=g.temperature, top_p=g.top_p, min_p=g.min_p, top_k=g.top_k or 0, seed=cfg.seed
    )


def score_groups(
    spec: FormatSpec, stage: str, rows: Sequence[dict[str, str]], groups: Sequence[Sequence[Any]]
) -> SampledStage:
    """Score ``groups`` (N completions per row, in row order) by the eval's rules."""
    n = len(groups[0]) if groups else 0
    if any(len(g) != n for g in groups):
        raise ValueError("every prompt needs the same number of samples")
    texts = [g.text for group in groups for g in group]
    golds = [r["answer"] for r, group in zip(rows, groups, strict=True) for _ in group]
    msgs = [spec.messages(r["question"]) for r, group in zip(rows, groups, strict=True) for _ in group]
    sc = scoring.score(spec, texts, golds, prompts=msgs)
    keys = [vote_key(spec, t) for t in texts]
    solved, majority = [], []
    for i in range(len(groups)):
        part = slice(i * n, (i + 1) * n)
        solved.append(sum(sc.correct[part]))
        majority.append(majority_correct(keys[part], sc.correct[part]))
    tokens = [len(g.tokens) for group in groups for g in group]
    return SampledStage(
        checkpoint=stage,
        n=n,
        solved=solved,
        majority=majority,
        format_rate=sum(sc.format_ok) / max(1, len(texts)),
        mean_tokens=sum(tokens) / max(1, len(tokens)),
    )


def hf_samples(
    decoder: Any, stage: str, sampling: generation.Sampling, progress: Callable[[int], None] | None = None
) -> list[list[generation.Generation]]:
    """N samples per prompt through the eval's HF decoder, right after its greedy pass of ``stage``: the
    stage's adapter is the active one then (the base checkpoint: with the adapter switched off)."""
    job = decoder.job
    model, ctx = decoder.base, contextlib.nullcontext()
    if stage == "base":
        if decoder.peft_model is not None:
            ctx = decoder.peft_model.disable_adapter()
    else:
        model = decoder.peft_model
    with ctx:
        return generation.hf_sample(
            model,
            decoder.tokenizer,
            job.prompts,
            sampling,
            max_new_tokens=job.max_new_tokens,
            batch_size=max(1, job.batch_size // sampling.n),  # prompts x N sequences in flight
            progress=progress,
        )


def sample_stage(
    job: Any, stage: str, pregenerated: dict[str, list[Any]], decoder: Any, progress: Any, scored: Any
) -> None:
    """``--samples N`` for one checkpoint, right after its greedy pass: N completions per prompt at GRPO's
    sampling settings (vLLM's, pregenerated; else through the HF decoder), scored into ``scored.sampled``.
    ``job``, ``scored``: :mod:`cli.eval.evaluation`'s EvalJob and Scored (which imports this module)."""
    assert job.sampling is not None
    from cli.run import heartbeat

    n, total = job.sampling.n, len(job.prompts)
    task = progress.add_task(f"{stage:>4} ×{n}", total=total, tokens=0)
    done = [0]
    heartbeat.doing(lambda: f"eval {stage}: sampling {n} per prompt, {done[0]}/{total} prompts done")
    start = time.time()
    if stage + SAMPLED in pregenerated:
        groups = pregenerated[stage + SAMPLED]
        progress.advance(task, len(groups))
    else:

        def advance(k: int) -> None:
            done[0] += k
            progress.advance(task, k)

        groups = hf_samples(decoder, stage, job.sampling, advance)
    result = score_groups(job.spec, stage, job.rows, groups)
    result.seconds = time.time() - start
    scored.sampled[stage] = result


def paired(stages: dict[str, SampledStage]) -> list[dict[str, Any]]:
    """Later minus earlier checkpoint (:data:`PAIRS`), paired over prompts, for pass@1, pass@N and maj@N."""
    from cli.eval.stats import paired_bootstrap

    out = []
    for a, b in PAIRS:
        if a not in stages or b not in stages or stages[a].n != stages[b].n:
            continue
        n = stages[a].n
        for metric in dict.fromkeys(["pass@1", f"pass@{n}", f"maj@{n}"]):
            diff, lo, hi = paired_bootstrap(stages[a].values(metric), stages[b].values(metric))
            out.append({"a": a, "b": b, "metric": metric, "diff": round(diff, 4),
                        "ci95": [round(lo, 4), round(hi, 4)]})  # fmt: skip
    return out


def collapse_line(stages: dict[str, SampledStage]) -> str | None:
    """One line when pass@1 rises from SFT to GRPO while pass@N falls (the diversity-collapse pattern)."""
    sft, grpo = stages.get("sft"), stages.get("grpo")
    if sft is None or grpo is None or sft.n != grpo.n or sft.n < 2:
        return None
    n = sft.n

    def mean(s: SampledStage, metric: str) -> float:
        values = s.values(metric)
        return sum(values) / max(1, len(values))

    p1 = (mean(sft, "pass@1"), mean(grpo, "pass@1"))
    pn = (mean(sft, f"pass@{n}"), mean(grpo, f"pass@{n}"))
    if not (p1[1] > p1[0] and pn[1] < pn[0]):
        return None
    return (
        f"diversity collapse: pass@1 rose from SFT to GRPO ({100 * p1[0]:.1f}% → {100 * p1[1]:.1f}%) while "
        f"pass@{n} fell ({100 * pn[0]:.1f}% → {100 * pn[1]:.1f}%): GRPO sharpened answers the model already "
        "found and finds fewer new ones"
    )


def section(stages: dict[str, SampledStage]) -> dict[str, Any]:
    """report.json's ``sampled``: each checkpoint's figures, the paired differences, the collapse line."""
    if not stages:
        return {}
    first = next(iter(stages.values()))
    return {
        "samples": first.n,
        "correct_by": "seed rule",
        "results": [s.summary() for s in stages.values()],
        "paired": paired(stages),
        "collapse": collapse_line(stages),
    }
