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
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError
from cli.run import validate
from cli.run.rundir import PRODUCER, RunDir

if TYPE_CHECKING:
    from cli.config.schema import Config

# The columns every reader of these data files needs (cli/run/data.py, cli/train/data.py).
DATA_COLUMNS = {
    "train.parquet": ("question", "answer"),
    "eval.parquet": ("question", "answer"),
    "grpo_prompts.parquet": ("question", "answer"),
}


def redo(rd: RunDir, stage: str) -> str:
    """What re-creates an output of ``stage`` (the end of a damaged file's message)."""
    return f"re-create it with `{PRODUCER.get(stage, 'grpo ' + stage)} --run {rd.path}`"


def check_run(
    rd: RunDir,
    *,
    data: Iterable[str] = (),
    adapters: Iterable[Path] = (),
    cfg: Config | None = None,
    consumes: Iterable[str] = (),
) -> None:
    """The run path, manifest.json, the base model folders the run built (``base/``), the files under
    data/ named in ``data`` (those present, with stats.json, and the sha256 prep recorded for each), the
    adapter folders ``adapters``, and with ``cfg`` the model and format contract the stages ``consumes``
    were made with (:func:`check_made_with`)."""
    _check_run_files(rd, list(data), adapters)
    if rd.path.is_dir():
        check_data_hashes(rd, data)
        if cfg is not None:
            check_made_with(rd, cfg, consumes)


def _check_run_files(rd: RunDir, names: list[str], adapters: Iterable[Path]) -> None:
    validate.run_path(rd.path)
    if not rd.path.is_dir():
        return
    rd.manifest()
    base = rd.path / "base"
    for folder in sorted(base.iterdir()) if base.is_dir() else []:
        if folder.is_dir():
            validate.model_folder(folder, f"delete {folder} (the next command builds it again)")
    for name in names:
        path = rd.data_dir / name
        if path.exists():
            stage = "filter" if name == "grpo_prompts.parquet" else "data"
            validate.parquet(path, redo(rd, stage), DATA_COLUMNS.get(name, ()))
    if names and (rd.data_dir / "stats.json").exists():
        validate.json_file(rd.data_dir / "stats.json", redo(rd, "data"))
    for folder in adapters:
        validate.adapter(folder, redo(rd, folder.parent.name if folder.name == "adapter" else "sft"))


def recorded_files(rd: RunDir) -> dict[str, str]:
    """``{path under the run: sha256}`` of the data files the prep stages recorded in manifest.json."""
    stages = rd.manifest().get("stages", {})
    out: dict[str, str] = {}
    for name in ("prep", "prep-sft"):
        st = stages.get(name)
        if not isinstance(st, dict):
            continue
        for files in (st.get("files"), (st.get("warmup") or {}).get("files")):
            for info in (files or {}).values() if isinstance(files, dict) else ():
                if isinstance(info, dict) and info.get("path") and info.get("sha256"):
                    out[str(info["path"])] = str(info["sha256"])
    return out


def check_data_hashes(rd: RunDir, names: Iterable[str]) -> None:
    """Each data file a command reads is the one `grpo prep` wrote: its sha256 against the manifest's. A file
    replaced by hand, or left by a prep killed half-way, was trained and evaluated on with no word."""
    from cli.run.atomic import file_sha256

    recorded = recorded_files(rd)
    for name in names:
        rel = f"data/{name}"
        path = rd.path / rel
        want = recorded.get(rel)
        if want is None or not path.is_file():
            continue
        got = file_sha256(path)
        if got != want:
            raise GrpoError(
                f"{path} is not the file `grpo prep` recorded (sha256 {got[:12]}…, manifest.json has "
                f"{want[:12]}…): it was replaced, or a prep was cut short; make it again with "
                f"`grpo prep NAME --run {rd.path}`"
            )


def check_made_with(rd: RunDir, cfg: Config, consumes: Iterable[str]) -> None:
    """The stages this command builds on (``consumes``: prep's data, the SFT adapter, …) were made with the
    model and the format contract the config gives now, as `grpo doctor` checks: config.yaml edited to
    another model failed deep in peft ("Error(s) in loading state_dict"), and a ``format:`` edited after
    SFT, or a contract hash edited in manifest.json, trained on with the wrong tags and no word."""
    stages: dict[str, Any] = rd.manifest().get("stages", {})
    made = {name: st for name in consumes if isinstance(st := stages.get(name), dict)}
    # The adapters' stages: an adapter fits only the model it was trained on (prep's data does not depend
    # on the model this way, and `--model` on a run without adapters is allowed).
    models = {
        name: str(st["model"])
        for name, st in made.items()
        if name in ("sft", "grpo", "filter") and st.get("model") not in (None, cfg.model)
    }
    if models:
        name, model = next(iter(models.items()))
        raise GrpoError(
            f"the run's {name} adapter was trained on model {model!r}, but its config now says model: "
            f"{cfg.model!r}: put `model: {model}` back in {rd.config_path}, or start a new run for "
            f"{cfg.model} (`grpo prep NAME --model {cfg.model} --run NEW`)"
        )
    spec = cfg.format_spec()
    current = spec.contract_hash()
    stale = {
        name: str(st["format_contract_sha256"])
        for name, st in made.items()
        if st.get("format_contract_sha256") and st["format_contract_sha256"] != current
    }
    if stale:
        listed = ", ".join(f"{name} ({sha[:12]}…)" for name, sha in stale.items())
        raise GrpoError(
            f"{listed} of {rd.path} were made with another format contract than the config's {spec.name} "
            f"({current[:12]}…): config.yaml's `format:` or manifest.json was changed since; put the format "
            f"back (`grpo doctor --run {rd.path}` shows both), or start a new run with `grpo prep`"
        )
