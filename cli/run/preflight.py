"""What a command checks in the run directory before it loads anything (the readers: :mod:`cli.run.validate`).

Every command calls :func:`check_run` once, first thing, with the data files and adapters it will read: a
damaged one is one line naming it and the command that makes it again, in a second, where it used to be a
library's traceback after minutes of loading (a truncated SFT adapter: 253 s, then "SafetensorError: Error
while deserializing header: invalid header length"). config.yaml is checked where it is read
(:func:`cli.run.rundir.resolve_config` names it); checkpoints where one is picked
(:func:`cli.train.checkpoints.latest_checkpoint` skips a bad one and names it).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cli.run import validate
from cli.run.rundir import PRODUCER, RunDir

# The columns every reader of these data files needs (cli/run/data.py, cli/train/data.py).
DATA_COLUMNS = {
    "train.parquet": ("question", "answer"),
    "eval.parquet": ("question", "answer"),
    "grpo_prompts.parquet": ("question", "answer"),
}


def redo(rd: RunDir, stage: str) -> str:
    """What re-creates an output of ``stage`` (the end of a damaged file's message)."""
    return f"re-create it with `{PRODUCER.get(stage, 'grpo ' + stage)} --run {rd.path}`"


def check_run(rd: RunDir, *, data: Iterable[str] = (), adapters: Iterable[Path] = ()) -> None:
    """The run path, manifest.json, the base model folders the run built (``base/``), the files under
    data/ named in ``data`` (those present, with stats.json) and the adapter folders ``adapters``."""
    validate.run_path(rd.path)
    if not rd.path.is_dir():
        return
    rd.manifest()
    base = rd.path / "base"
    for folder in sorted(base.iterdir()) if base.is_dir() else []:
        if folder.is_dir():
            validate.model_folder(folder, f"delete {folder} (the next command builds it again)")
    names = list(data)
    for name in names:
        path = rd.data_dir / name
        if path.exists():
            stage = "filter" if name == "grpo_prompts.parquet" else "data"
            validate.parquet(path, redo(rd, stage), DATA_COLUMNS.get(name, ()))
    if names and (rd.data_dir / "stats.json").exists():
        validate.json_file(rd.data_dir / "stats.json", redo(rd, "data"))
    for folder in adapters:
        validate.adapter(folder, redo(rd, folder.parent.name if folder.name == "adapter" else "sft"))
