"""The one reader of a run's ``data/`` (written by `grpo prep`), for training, eval and export.

``data/train.parquet`` and ``data/eval.parquet`` hold ``question``, ``answer``, ``solution`` and
``prompt_tokens``; ``data/sft.parquet`` the stage-1 warm-up set; ``data/stats.json`` what prep did
(``max_prompt_length``: the prompt cut). ``data/grpo_prompts.parquet`` and ``data/passrate.json`` are
`grpo filter`'s: the train prompts worth a GRPO group, which `grpo grpo` trains on while they are fresh.
The rules prep applies and training must apply the same way
live here too: the ``<think>`` strip of worked solutions and the SFT length cap (seed 000).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli.common import GrpoError, first_line
from cli.run.rundir import RunDir

# The bundled samples (MIT GSM8K / MATH500, Apache-2.0 DAPO): the offline default and the tests' data.
SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"


def strip_think(solution: str) -> str:
    """A worked solution without ``<think>`` tags (seed 000 ``format_row``; OpenMathReasoning rows)."""
    return solution.replace("<think>", "").replace("</think>", "").strip()


def read_table(run: RunDir, name: str, required: tuple[str, ...] = ()) -> Any:
    import pandas as pd

    path = run.require(run.data_dir / name, "data", f"prepped data ({name})")
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a bad file
        raise GrpoError(f"cannot read {path}: {exc}; re-run `grpo prep`") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise GrpoError(f"{path} lacks column(s) {', '.join(missing)}: re-run `grpo prep`")
    if len(df) == 0:
        raise GrpoError(f"{path} has no rows: re-run `grpo prep` with more data")
    return df


def read_stats(run: RunDir) -> dict[str, Any]:
    path = run.data_dir / "stats.json"
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        raise GrpoError(f"{path} is corrupt: re-run `grpo prep`") from None


FILTERED = "grpo_prompts.parquet"  # `grpo filter`'s kept rows of train.parquet (+ solved)
PASSRATE = "passrate.json"  # what `grpo filter` did, with the sha256 of the train.parquet it filtered


def train_sha256(run: RunDir) -> str:
    """The sha256 of ``data/train.parquet``: prep's record in stats.json, else the file's own hash."""
    from cli.run.atomic import file_sha256

    recorded = ((read_stats(run).get("files") or {}).get("train") or {}).get("sha256")
    return str(recorded) if recorded else file_sha256(run.data_dir / "train.parquet")


def filtered_prompts(run: RunDir) -> tuple[dict[str, Any] | None, str | None]:
    """``(passrate, note)``: `grpo filter`'s passrate.json when `grpo grpo` should train on ``data/FILTERED``;
    else None and, when a filtered file is there but not used (stale, unreadable), why, in words."""
    if not (run.data_dir / FILTERED).exists():
        return None, None
    redo = f"re-run `grpo filter --run {run.path}` (or `grpo filter --clear`)"
    try:
        info = json.loads((run.data_dir / PASSRATE).read_text())
        recorded = str(info["train_sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, f"ignoring data/{FILTERED}: its data/{PASSRATE} is missing or unreadable; {redo}"
    if recorded != train_sha256(run):
        return None, (
            f"ignoring data/{FILTERED}: it was filtered from another data/train.parquet (stale since "
            f"the last `grpo prep`); training on all prompts: {redo}"
        )
    return info, None


def eval_rows(run: RunDir, limit: int | None = None) -> list[dict[str, str]]:
    """``question``/``answer`` rows of ``<run>/data/eval.parquet`` (written by `grpo prep`)."""
    path = run.data_dir / "eval.parquet"
    if not path.exists():
        return []
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(path, columns=["question", "answer"])
    except Exception as exc:  # noqa: BLE001
        raise GrpoError(f"cannot read {path}: {first_line(exc)}") from None
    rows = [
        {"question": str(q), "answer": str(a)}
        for q, a in zip(table["question"].to_pylist(), table["answer"].to_pylist(), strict=False)
    ]
    return rows[:limit] if limit is not None else rows


def fallback_rows(limit: int) -> list[dict[str, str]]:
    """Bundled GSM8K test sample, used for verification when the run has no eval split."""
    rows = []
    with open(SAMPLES / "gsm8k_test.jsonl", encoding="utf-8") as fh:
        for raw in fh:
            row = json.loads(raw)
            rows.append({"question": row["question"], "answer": row["answer"].split("####")[-1].strip()})
            if len(rows) >= limit:
                break
    return rows
