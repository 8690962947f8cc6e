"""`grpo prep`'s steps: load a source, apply seed 000's filters, write the parquet parts and stats, print the
summary. cli/commands/prep.py composes them (and decides the warm-up set); cli/prep/load.py holds the plain
functions over rows that these call.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError, console, err_console
from cli.config.schema import Config, PrepConfig
from cli.run.rundir import RunDir

if TYPE_CHECKING:
    from py_rewards.spec import FormatSpec


@dataclass
class Built:
    """One prepared dataset before it is written: the kept rows and what the filters did."""

    loaded: Any
    schema: str
    frame: Any  # question, answer, solution, prompt_tokens
    counts: dict[str, int]
    bad: Any
    max_len: int
    lengths: list[int]
    sft_cap: int | None


_said_offline: list[str] = []  # the datasets this command replaced by their bundled samples


def reset_notes() -> None:
    """A new command (tests run several in one process) says the hub's absence again."""
    _said_offline.clear()


def load(
    ds: Any, source: str | None, split: str | None, limit: int | None, *, dataset: str, what: str = ""
) -> tuple[Any, str, Any]:
    from cli.prep import load as dp

    if source:
        loaded = dp.read_file(Path(source), limit)
    else:
        try:
            loaded = dp.load_hub(ds, split, limit)
        except dp.HubUnavailable as exc:
            if ds.sample is None:
                raise GrpoError(f"{exc}; pass --source FILE with a local copy of {dataset}") from None
            loaded = dp.load_bundled(ds, limit)
            label = f" for the {what}" if what else ""
            sample = loaded.source.split(":", 1)[1]
            if _said_offline:  # the hub's absence is said once; a second set only names its sample
                err_console.print(
                    f"note: using the bundled sample {sample}{label} too ({loaded.rows_read} rows)"
                )
            else:
                err_console.print(
                    f"note: {exc}; using the bundled sample {sample}{label} ({loaded.rows_read} rows)"
                    + ("" if what else " — pass --source FILE for the full set"),
                    soft_wrap=True,
                )
            _said_offline.append(ds.name)
    schema = dp.detect_schema(loaded.records, loaded.source)
    return loaded, schema, dp.parse_records(loaded.records, schema)


def build(
    ds: Any,
    pc: PrepConfig,
    cfg: Config,
    tokenizer: Any,
    spec: FormatSpec,
    read: tuple[Any, str, Any],
    *,
    keep_non_numeric: bool,
) -> Built:
    """Seed 000's filters: numeric answers, the prompt-length quantile, (SFT) chats ≤ half the context.
    ``read``: what :func:`load` returned (the loaded rows, their schema, the parsed fields)."""
    loaded, schema, parsed = read
    import numpy as np
    import pandas as pd

    from cli.prep import load as dp
    from cli.run.budget import sft_length_cap

    bad = loaded.bad + parsed.bad
    questions, answers, solutions = parsed.questions, parsed.answers, parsed.solutions
    if keep_non_numeric:
        non_numeric = 0
    else:
        mask = dp.numeric_mask(answers)
        non_numeric = int((~mask).sum())
        idx = np.flatnonzero(mask)
        questions = [questions[i] for i in idx]
        answers = [answers[i] for i in idx]
        solutions = [solutions[i] for i in idx]
    counts = _counts(loaded, bad, parsed.filtered_ability, non_numeric)
    if ds.purpose == "sft":
        # Stage 1 trains on worked solutions: a row without one teaches nothing (say so, not "too long").
        has = [i for i, s in enumerate(solutions) if s]
        counts["no_worked_solution"] = len(questions) - len(has)
        questions = [questions[i] for i in has]
        answers = [answers[i] for i in has]
        solutions = [solutions[i] for i in has]
    if not questions:
        raise GrpoError(_empty_message(loaded.source, counts, keep_non_numeric))
    lengths = dp.prompt_lengths(tokenizer, spec, questions)
    fits = _fits(lengths, cfg, loaded.source, counts)
    max_len, keep = dp.quantile_cut([n for n, f in zip(lengths, fits, strict=True) if f], pc.prompt_quantile)
    keep = fits & (np.asarray(lengths) <= max_len)
    counts["cut_by_length"] = int((fits & ~keep).sum())
    sft_cap = None
    if ds.purpose == "sft":
        # Seed 000 Stage 1: whole conversations up to max_seq_length // 2 tokens.
        sft_cap = sft_length_cap(cfg.max_seq_length)
        conv = np.asarray(dp.conversation_lengths(tokenizer, spec, questions, answers, solutions))
        too_long = keep & (conv > sft_cap)
        counts["cut_too_long_for_sft"] = int(too_long.sum())
        keep = keep & ~too_long
    kept = np.flatnonzero(keep)
    if kept.size == 0:
        raise GrpoError(_empty_message(loaded.source, counts, keep_non_numeric))
    frame = pd.DataFrame(
        {
            "question": [questions[i] for i in kept],
            "answer": [answers[i] for i in kept],
            "solution": pd.Series([solutions[i] for i in kept], dtype=object),
            "prompt_tokens": np.asarray([lengths[i] for i in kept], dtype=np.int64),
        }
    )
    return Built(loaded, schema, frame, counts, bad, max_len, lengths, sft_cap)


def _fits(lengths: list[int], cfg: Config, source: str, counts: dict[str, int]) -> Any:
    """Which prompts leave room for a completion in max_seq_length; the rest are dropped with a note."""
    import numpy as np

    from cli.run.budget import completion_room

    budget = completion_room(cfg.max_seq_length, cfg.grpo.max_completion_length)
    room = cfg.max_seq_length - budget
    fits = np.asarray(lengths) <= room
    counts["cut_no_room_for_completion"] = dropped = int((~fits).sum())
    why = (
        f"longer than {room} tokens: max_seq_length {cfg.max_seq_length} less {budget} for the completion "
        "(grpo.max_completion_length, else a quarter of max_seq_length)"
    )
    if not fits.any():
        raise GrpoError(f"every prompt of {source} is {why}; nothing written: raise max_seq_length")
    if dropped:
        err_console.print(f"[yellow]note:[/] {dropped} prompt(s) dropped, {why}", soft_wrap=True)
    return fits


def write(
    rundir: RunDir, pc: PrepConfig, ds: Any, tokenizer: Any, cfg: Config, spec: FormatSpec, b: Built
) -> tuple[dict[str, Any], Path]:
    from cli.prep import load as dp
    from cli.run.atomic import atomic_write_bytes, atomic_write_json, file_sha256

    data_dir = rundir.data_dir
    counts = dict(b.counts)
    if ds.purpose == "sft":
        counts["kept_sft"] = len(b.frame)
        parts = {"sft": b.frame}
        stats_path = data_dir / "sft_stats.json"
    else:
        train_idx, eval_idx = dp.eval_split(len(b.frame), pc.eval_size, pc.seed)
        parts = {
            "eval": b.frame.iloc[eval_idx].reset_index(drop=True),
            "train": b.frame.iloc[train_idx].reset_index(drop=True),
        }
        counts["kept_train"] = len(parts["train"])
        counts["kept_eval"] = len(parts["eval"])
        counts["worked_solutions"] = int(b.frame["solution"].notna().sum())
        stats_path = data_dir / "stats.json"
    outputs: dict[str, Any] = {}
    for part, df in parts.items():
        path = data_dir / f"{part}.parquet"
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        atomic_write_bytes(path, buf.getvalue())
        outputs[part] = {
            "path": str(path.relative_to(rundir.path)),
            "rows": len(df),
            "sha256": file_sha256(path),
        }
    stats = {
        "dataset": ds.name,
        "purpose": ds.purpose,
        "schema": b.schema,
        "source": b.loaded.source,
        "source_sha256": b.loaded.sha256,
        "source_fingerprint": b.loaded.fingerprint,
        **counts,
        "bad_reasons": dict(b.bad.most_common()),
        "max_prompt_length": b.max_len,
        "prompt_quantile": pc.prompt_quantile,
        "sft_max_tokens": b.sft_cap,
        "keep_non_numeric": pc.keep_non_numeric if ds.name == pc.dataset else False,
        "limit": pc.limit if ds.name == pc.dataset else None,
        "eval_size": pc.eval_size,
        "seed": pc.seed,
        "prompt_tokens_all": dp.percentiles(b.lengths),
        "prompt_tokens_kept": dp.percentiles(b.frame["prompt_tokens"].tolist()),
        "tokenizer": getattr(tokenizer, "name_or_path", None),
        "model": cfg.model,
        "format_contract_sha256": spec.contract_hash(),
        "files": outputs,
    }
    atomic_write_json(stats_path, stats)
    return stats, stats_path


def _counts(loaded: Any, bad: Any, filtered_ability: int, non_numeric: int) -> dict[str, int]:
    return {
        "rows_read": loaded.rows_read,
        "bad_rows": int(sum(bad.values())),
        "filtered_ability": filtered_ability,
        "filtered_non_numeric": non_numeric,
    }


def _empty_message(source: str, counts: dict[str, int], keep_non_numeric: bool) -> str:
    detail = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items() if v)
    hint = (
        ""
        if keep_non_numeric or not counts.get("filtered_non_numeric")
        else "; MATH-style answers need --keep-non-numeric"
    )
    return f"no rows left from {source} after filters ({detail}); nothing written{hint}"


def summary(
    stats: dict[str, Any], rundir: RunDir, stats_path: Path, model: str | None, title: str | None = None
) -> None:
    from rich.table import Table

    t = Table(
        title=title or f"grpo prep {stats['dataset']} → {rundir.data_dir}",
        show_header=False,
        title_justify="left",
    )
    t.add_column(style="bold")
    t.add_column()
    if model:
        t.add_row("model", model)
    t.add_row("source", f"{stats['source']} ({stats['schema']})")
    t.add_row("rows read", str(stats["rows_read"]) + (f" (limit {stats['limit']})" if stats["limit"] else ""))
    reasons = ", ".join(f"{k}: {v}" for k, v in stats["bad_reasons"].items())
    t.add_row("bad rows", f"{stats['bad_rows']}" + (f"  ({reasons})" if reasons else ""))
    if stats["filtered_ability"]:
        t.add_row("not math (ability)", str(stats["filtered_ability"]))
    t.add_row(
        "non-numeric answers",
        "kept (--keep-non-numeric)"
        if stats["keep_non_numeric"]
        else f"{stats['filtered_non_numeric']} dropped",
    )
    pct = stats["prompt_tokens_all"]
    t.add_row(
        "prompt tokens",
        f"p50 {pct['p50']:.0f} · p90 {pct['p90']:.0f} · p99 {pct['p99']:.0f} · max {pct['max']}",
    )
    t.add_row(
        "max_prompt_length",
        f"{stats['max_prompt_length']} (q={stats['prompt_quantile']}); "
        f"{stats['cut_by_length']} longer prompts cut",
    )
    if stats.get("cut_no_room_for_completion"):
        t.add_row(
            "no room to answer",
            f"{stats['cut_no_room_for_completion']} prompts dropped (longer than "
            "max_seq_length less the completion budget)",
        )
    if stats.get("no_worked_solution"):
        t.add_row("no worked solution", f"{stats['no_worked_solution']} dropped")
    if stats.get("sft_max_tokens"):
        t.add_row(
            "SFT length cap", f"{stats['sft_max_tokens']} tokens; {stats.get('cut_too_long_for_sft', 0)} cut"
        )
    for part, info in stats["files"].items():
        t.add_row(f"{part}", f"{info['rows']} rows → {info['path']}")
    t.add_row("stats", str(stats_path.relative_to(rundir.path)))
    console.print(t)
