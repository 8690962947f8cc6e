"""`grpo filter`'s work: sample each training prompt n times, count the solved samples, keep the prompts
whose GRPO groups can teach.

GRPO learns nothing from a group whose completions all score the same: every advantage is zero. For a
small model most GSM8K prompts are such groups (never solved), so the adapter that GRPO starts from (the
SFT one) samples ``n`` completions per prompt at GRPO's sampling settings, the run's own scoring
(:func:`cli.eval.scoring.score`, as `grpo eval`) counts the solved ones ``k``, and the prompts with
``0 < k < n`` (``--keep mixed``) or ``k > 0`` (``--keep solved``) are kept: the offline form of DAPO's
dynamic sampling (open-r1 has a pass-rate filtering script). Measured on an H200
(bench/learning-gpu.md@ea4c471, round 3): 893 of 6,681 GSM8K prompts kept, then GRPO +2.2 accuracy points
over its SFT start.

Writes ``data/grpo_prompts.parquet`` (the kept rows of train.parquet plus ``solved``) and
``data/passrate.json``; train.parquet is not modified (SFT reads its worked solutions).
"""

from __future__ import annotations

import io
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError, console, err_console
from cli.config.schema import Config
from cli.eval import scoring
from cli.infer import generation, prompting
from cli.models import loading
from cli.run.budget import RolloutBudget
from cli.run.data import FILTERED, PASSRATE, read_stats, read_table, train_sha256
from cli.run.rundir import RunDir

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec


@dataclass
class FilterJob:
    """What one `grpo filter` samples, and how."""

    rd: RunDir
    cfg: Config
    adapter: str  # sft | grpo
    adapter_path: Path
    samples: int
    keep: str  # mixed | solved
    limit: int | None
    max_new_tokens: int | None
    engine: str  # hf | vllm
    batch_size: int


def clear(rd: RunDir) -> list[str]:
    """Remove the filter (the prompts first: GRPO stops using them at once); the names removed."""
    removed = []
    for name in (FILTERED, PASSRATE):
        path = rd.data_dir / name
        if path.exists():
            path.unlink()
            removed.append(f"data/{name}")
    return removed


def drop_stale(rd: RunDir) -> None:
    """`grpo prep` wrote a new train.parquet: the filter chose among the old prompts, remove it (say so)."""
    removed = clear(rd)
    if removed:
        console.print(f"[dim]removed {' and '.join(removed)}: `grpo filter` chose among the old train "
                      "prompts (run it again after `grpo sft`)[/]")  # fmt: skip


def sampling_of(cfg: Config, n: int) -> generation.Sampling:
    """GRPO's rollout sampling (cfg.grpo: temperature, top_p, min_p, top_k), seeded by the run's seed."""
    g = cfg.grpo
    return generation.Sampling(
        n=n, temperature=g.temperature, top_p=g.top_p, min_p=g.min_p, top_k=g.top_k or 0, seed=cfg.seed
    )


def completion_budget(cfg: Config, rd: RunDir, requested: int | None) -> int:
    """``--max-new-tokens``, else GRPO's (:class:`cli.run.budget.RolloutBudget`): it samples as GRPO will."""
    return RolloutBudget.of(cfg, read_stats(rd), completion=requested, flag="--max-new-tokens").completion


def count_solved(
    spec: FormatSpec,
    groups: Sequence[Sequence[generation.Generation]],
    questions: list[str],
    answers: list[str],
) -> tuple[list[int], scoring.Scores]:
    """Solved samples per prompt (``.correct`` of :func:`cli.eval.scoring.score`), and the scores of all."""
    n = len(groups[0]) if groups else 0
    texts = [g.text for group in groups for g in group]
    golds = [a for a, group in zip(answers, groups, strict=True) for _ in group]
    prompts = [spec.messages(q) for q, group in zip(questions, groups, strict=True) for _ in group]
    sc = scoring.score(spec, texts, golds, prompts=prompts)
    return [sum(sc.correct[i * n : (i + 1) * n]) for i in range(len(groups))], sc


def select(solved: Sequence[int], n: int, keep: str) -> list[int]:
    """Indices of the prompts to keep: ``0 < k < n`` (mixed) or ``k > 0`` (solved)."""
    return [i for i, k in enumerate(solved) if k > 0 and (keep == "solved" or k < n)]


def run(job: FilterJob) -> dict[str, Any]:
    """Sample, count, keep, write; the summary (passrate.json) is returned and printed."""
    from cli.models.resolve import resolve_model

    rd, cfg, spec = job.rd, job.cfg, job.cfg.format_spec()
    full = read_table(rd, "train.parquet", ("question", "answer"))
    frame = full.iloc[: job.limit].reset_index(drop=True) if job.limit else full
    questions = [str(q) for q in frame["question"]]
    answers = [str(a).strip() for a in frame["answer"]]
    sampling = sampling_of(cfg, job.samples)
    budget = completion_budget(cfg, rd, job.max_new_tokens)
    base_path = resolve_model(cfg, rd)
    with rd.stage("filter", cfg, adapter=job.adapter, engine=job.engine) as info:  # recorded when it succeeds
        tokenizer = loading.load_tokenizer(base_path, spec, cfg.pad_token)
        prompts = [prompting.prompt_text(tokenizer, spec, q) for q in questions]
        groups, engine_info = _sample(job, str(base_path), tokenizer, prompts, sampling, budget)
        solved, sc = count_solved(spec, groups, questions, answers)
        kept = select(solved, job.samples, job.keep)
        summary = summarize(job, solved, kept, sc, groups, budget, len(full), engine_info)
        if not kept:
            raise GrpoError(nothing_kept(summary), code=1)  # nothing written: a previous filter stays
        summary["train_sha256"] = train_sha256(rd)
        summary["file"] = _write(rd, frame, kept, solved, summary)
        info.update(summary)
    print_summary(rd, summary)
    return summary


def _sample(
    job: FilterJob, base_path: str, tokenizer: Any, prompts: list[str], sampling: generation.Sampling,
    budget: int,
) -> tuple[list[list[generation.Generation]], dict[str, Any]]:  # fmt: skip
    """``sampling.n`` completions per prompt from base + the adapter: vLLM at once, or HF in batches."""
    if job.engine == "vllm":
        from cli.infer.vllm_engine import sample_all

        err_console.print(f"filter: {len(prompts)} prompts × {sampling.n} samples through vLLM…")
        return sample_all(
            base_path, tokenizer, prompts, (job.adapter, job.adapter_path), sampling, max_new_tokens=budget
        )
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    model = loading.attach_adapter(loading.load_hf(base_path), job.adapter_path)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    t0 = time.perf_counter()
    with Progress(*columns, console=err_console, transient=False) as progress:
        task = progress.add_task(f"{job.adapter} × {sampling.n}", total=len(prompts))
        groups = generation.hf_sample(
            model, tokenizer, prompts, sampling, max_new_tokens=budget, batch_size=job.batch_size,
            progress=lambda k: progress.advance(task, k),
        )  # fmt: skip
    seconds = round(time.perf_counter() - t0, 2)
    return groups, {"engine": "hf", "batch_size": job.batch_size, "generation_seconds": seconds}


def summarize(
    job: FilterJob,
    solved: list[int],
    kept: list[int],
    sc: scoring.Scores,
    groups: list[list[generation.Generation]],
    budget: int,
    in_train: int,
    engine_info: dict[str, Any],
) -> dict[str, Any]:
    """What passrate.json and the manifest's ``filter`` stage record."""
    n, s = job.samples, sampling_of(job.cfg, job.samples)
    lengths = [len(g.tokens) for group in groups for g in group]
    histogram = {str(k): solved.count(k) for k in range(n + 1)}
    return {
        "prompts": len(solved),
        "prompts_in_train": in_train,
        "limit": job.limit,
        "not_sampled": in_train - len(solved),
        "samples": n,
        "kept": len(kept),
        "keep": job.keep,
        "rule": f"0 < solved < {n}" if job.keep == "mixed" else "solved > 0",
        "adapter": job.adapter,
        "adapter_path": str(job.adapter_path),
        "engine": job.engine,
        "solved_histogram": histogram,
        "never_solved": histogram["0"],
        "always_solved": histogram[str(n)],
        "sample_accuracy": round(sum(sc.correct) / len(sc.correct), 4),
        "format_rate": round(sum(sc.format_ok) / len(sc.format_ok), 4),
        "generation_seconds": engine_info.get("generation_seconds"),
        "mean_completion_tokens": round(sum(lengths) / len(lengths), 1),
        "hit_max_new_tokens": round(sum(1 for x in lengths if x >= budget) / len(lengths), 4),
        "sampling": {
            "temperature": s.temperature,
            "top_p": s.top_p,
            "min_p": s.min_p,
            "top_k": s.top_k,
            "max_new_tokens": budget,
            "seed": s.seed,
        },  # fmt: skip
        "engine_info": engine_info,
    }


def nothing_kept(summary: dict[str, Any]) -> str:
    """The one line of a filter that kept no prompt: how many were never / always solved, what to try."""
    p, n = summary["prompts"], summary["samples"]
    if summary["keep"] == "solved":
        return (
            f"nothing to keep: none of the {p} prompts was solved by any of {n} samples of the "
            f"{summary['adapter']} adapter; nothing written: try more --samples (or train the adapter longer)"
        )
    return (
        f"nothing to keep: of the {p} prompts, {summary['never_solved']} were never solved and "
        f"{summary['always_solved']} always solved in {n} samples (--keep mixed keeps {summary['rule']}); "
        "nothing written: try --keep solved or more --samples"
    )


def _write(
    rd: RunDir, frame: Any, kept: list[int], solved: list[int], summary: dict[str, Any]
) -> dict[str, Any]:
    """grpo_prompts.parquet, then passrate.json (each atomic); the file entry of passrate.json."""
    from cli.run.atomic import atomic_write_bytes, atomic_write_json, file_sha256

    table = frame.iloc[kept].reset_index(drop=True)
    table["solved"] = [int(solved[i]) for i in kept]
    table["solved"] = table["solved"].astype("int64")
    buf = io.BytesIO()
    table.to_parquet(buf, index=False)
    path = rd.data_dir / FILTERED
    atomic_write_bytes(path, buf.getvalue())
    entry = {"path": f"data/{FILTERED}", "rows": len(table), "sha256": file_sha256(path)}
    atomic_write_json(rd.data_dir / PASSRATE, {**summary, "file": entry})
    return entry


def print_summary(rd: RunDir, summary: dict[str, Any]) -> None:
    """The table (as prep's and eval's), then the next step."""
    from rich.table import Table

    n, s = summary["samples"], summary["sampling"]
    t = Table(title=f"grpo filter → {rd.data_dir / FILTERED}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    t.add_row("sampled by", f"the {summary['adapter']} adapter ({summary['engine']})")
    sampled = f"{summary['prompts']} of train.parquet's {summary['prompts_in_train']}"
    if summary["not_sampled"]:
        sampled += f" (--limit {summary['limit']}: the other {summary['not_sampled']} are not kept)"
    t.add_row("prompts", sampled)
    t.add_row("samples", f"{n} per prompt, temperature {s['temperature']:g}, top_p {s['top_p']:g}, min_p "
              f"{s['min_p']:g}" + (f", top_k {s['top_k']}" if s["top_k"] else "") +
              f", ≤ {s['max_new_tokens']} tokens, seed {s['seed']}")  # fmt: skip
    hist = " · ".join(f"{k}: {v}" for k, v in summary["solved_histogram"].items())
    t.add_row(f"solved of {n}", hist)
    t.add_row("kept", f"{summary['kept']} (--keep {summary['keep']}: {summary['rule']})")
    t.add_row("sample accuracy", f"{100 * summary['sample_accuracy']:.1f}%")
    t.add_row("format", f"{100 * summary['format_rate']:.1f}%")
    t.add_row("completion tokens", f"{summary['mean_completion_tokens']:.0f} mean, "
              f"{100 * summary['hit_max_new_tokens']:.0f}% hit the budget")  # fmt: skip
    t.add_row("generation", f"{summary['generation_seconds']:.1f} s")
    t.add_row("written", f"data/{FILTERED} ({summary['kept']} rows), data/{PASSRATE}")
    console.print(t)
    console.print(
        f"next: `grpo grpo --run {rd.path}` now trains on the {summary['kept']} kept prompts "
        f"(undo: `grpo filter --clear --run {rd.path}`)",
        soft_wrap=True,
    )
