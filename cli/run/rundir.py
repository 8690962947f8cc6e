"""The run directory: the spine that chains the stages.

``runs/<name>/`` holds ``config.yaml`` (fully resolved), ``manifest.json`` (package versions, data
hashes, the format-contract hash, timings per stage), ``data/``, ``sft/``, ``grpo/`` (checkpoints),
``export/``, ``eval/`` and ``logs/metrics.jsonl``. Every write is atomic (temp file + rename, or a
temp folder renamed into place), so an interrupted stage never leaves a half-written artifact.

Long because: the layout, the manifest (its stages, its rebuild when lost, the run-wide facts such as the
tokenizer's pad), the saved config, the adapters and the metrics are one object every stage shares.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import GrpoError
from cli.run import quiet, validate
from cli.run.atomic import atomic_write_json, atomic_write_text
from cli.run.console import err_console
from cli.run.ranks import is_main as _is_main

if TYPE_CHECKING:
    from cli.config.schema import Config

# Which command makes each artifact: used to tell the user what to run first.
PRODUCER = {
    "data": "grpo prep NAME",
    "sft": "grpo sft",
    "grpo": "grpo grpo",
    "export": "grpo export",
}

ADAPTER_STAGES = ("grpo", "sft")  # the stages that train a LoRA, the later one first
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
MERGED_DIRNAME = "merged-16bit"  # <run>/export/merged-16bit: `grpo export --merged 16bit`
MANIFEST_REDO = "delete it (the next stage to finish rebuilds it from the run's files) or restore a copy"
CONFIG_REDO = "fix it, or delete it and give the run's settings again as flags (--model …)"


def has_adapter(path: Path) -> bool:
    """A whole peft adapter folder: its config and its weights."""
    return (path / "adapter_config.json").is_file() and any((path / w).is_file() for w in ADAPTER_WEIGHTS)


def _adapter_mtime(path: Path) -> float:
    return max(
        (path / name).stat().st_mtime
        for name in ("adapter_config.json", *ADAPTER_WEIGHTS)
        if (path / name).exists()
    )


VERSIONED_PACKAGES = (
    "grpo",
    "torch",
    "transformers",
    "trl",
    "peft",
    "unsloth",
    "unsloth_zoo",
    "vllm",
    "datasets",
    "accelerate",
    "deepspeed",
    "bitsandbytes",
    "numpy",
    "xllamacpp",
)


def package_versions(names: tuple[str, ...] = VERSIONED_PACKAGES) -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = version(name.replace("_", "-"))
        except PackageNotFoundError:
            try:
                out[name] = version(name)
            except PackageNotFoundError:
                out[name] = None
    return out


class RunDir:
    """Paths and bookkeeping of one run directory."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        # Facts of the run (:meth:`record`) waiting for the stage that found them to succeed.
        self._facts: dict[str, dict[str, Any]] = {}

    # ---- layout ----------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.path / "config.yaml"

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    @property
    def data_dir(self) -> Path:
        return self.path / "data"

    @property
    def sft_dir(self) -> Path:
        return self.path / "sft"

    @property
    def sft_adapter(self) -> Path | None:
        """The SFT stage's adapter, once it is whole (its config written last), else None."""
        adapter = self.sft_dir / "adapter"
        return adapter if (adapter / "adapter_config.json").exists() else None

    @property
    def grpo_dir(self) -> Path:
        return self.path / "grpo"

    @property
    def export_dir(self) -> Path:
        return self.path / "export"

    @property
    def eval_dir(self) -> Path:
        return self.path / "eval"

    @property
    def logs_dir(self) -> Path:
        return self.path / "logs"

    @property
    def metrics_path(self) -> Path:
        return self.logs_dir / "metrics.jsonl"

    # ---- adapters ---------------------------------------------------------------------------
    def adapter_dir(self, stage: str) -> Path:
        """``<run>/<stage>/adapter``: where `grpo sft` / `grpo grpo` save their LoRA."""
        return self.path / stage / "adapter"

    def adapters(self) -> dict[str, Path]:
        """Trained adapters of the run by stage (``grpo``, ``sft``), only those present."""
        return {s: self.adapter_dir(s) for s in ADAPTER_STAGES if has_adapter(self.adapter_dir(s))}

    def pick_adapter(self, stage: str | None = None) -> tuple[str, Path]:
        """The adapter of ``stage``, or the newest one (GRPO wins a tie: it is the later stage)."""
        self.require_exists()
        found = self.adapters()
        if stage not in (None, "auto", "newest"):
            if stage not in ADAPTER_STAGES:
                raise GrpoError(f"unknown adapter source {stage!r} (choose grpo or sft)")
            if stage not in found:
                raise GrpoError(
                    f"no {stage} adapter in {self.path} ({stage}/adapter): "
                    f"run `grpo {stage} --run {self.path}` first"
                )
            return stage, found[stage]
        if not found:
            raise GrpoError(
                f"nothing trained yet in {self.path}: no sft/adapter or grpo/adapter — run "
                f"`grpo sft --run {self.path}` (then `grpo grpo`) first"
            )
        # Newest by the manifest's stage end times (they survive copies), else by file time; ties: GRPO.
        try:
            stages = self.manifest().get("stages", {})
        except GrpoError:
            stages = {}
        finished = {s: str(stages.get(s, {}).get("finished") or "") for s in found}
        if all(finished.values()):
            best = max(found, key=lambda s: (finished[s], s == "grpo"))
        else:
            best = max(found, key=lambda s: (_adapter_mtime(found[s]), s == "grpo"))
        return best, found[best]

    # ---- checks ----------------------------------------------------------------------------
    def require_exists(self) -> None:
        """Fail with the command that starts a run when the run directory does not exist."""
        validate.run_path(self.path)  # a symlink loop or a dangling link: said as such
        if not self.path.is_dir():
            raise GrpoError(
                f"no run directory at {self.path}: start a run with `grpo prep NAME --run {self.path}` "
                "(or pass --run DIR)"
            )

    def exists(self) -> bool:
        return self.path.is_dir()

    def hold(self, command: str, *, create: bool = False) -> None:
        """Become the one writer of this run directory until the command ends; ``create``: make it first when
        missing (`grpo prep`), under the lock, and remove it if the command fails (:mod:`cli.run.lock`)."""
        from cli.run.lock import hold

        validate.run_path(self.path)
        hold(self.path, command, create=create)

    def ensure(self) -> None:
        if self.path.exists() and not self.path.is_dir():
            raise GrpoError(f"run directory {self.path} exists and is not a directory")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except PermissionError:
            raise GrpoError(f"cannot create run directory {self.path}: permission denied") from None
        if not os.access(self.path, os.W_OK):
            raise GrpoError(f"run directory {self.path} is not writable")

    def require(self, path: Path, stage: str, what: str | None = None) -> Path:
        """Return ``path`` or fail telling which command makes it."""
        self.require_exists()
        if not Path(path).exists():
            hint = PRODUCER.get(stage, f"grpo {stage}")
            raise GrpoError(
                f"{what or stage} not found in {self.path} ({Path(path).relative_to(self.path)}): "
                f"run `{hint} --run {self.path}` first"
            )
        validate.regular_file(Path(path), f"re-create it with `{PRODUCER.get(stage, 'grpo ' + stage)}`")
        return Path(path)

    # ---- config ----------------------------------------------------------------------------
    def saved_config(self) -> dict[str, Any] | None:
        if not self.config_path.exists():
            return None
        from cli.config.schema import load_yaml

        try:
            return load_yaml(self.config_path)
        except GrpoError as exc:
            raise GrpoError(f"{exc}: {CONFIG_REDO}") from None

    def save_config(self, cfg: Config) -> None:
        from cli.config.schema import to_yaml

        if not _is_main():
            return
        self.ensure()
        atomic_write_text(self.config_path, to_yaml(cfg))

    # ---- manifest --------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        """manifest.json, checked: a JSON object whose ``stages`` is a table (``{"stages": {}}`` if none)."""
        if not self.manifest_path.exists():
            return {"stages": {}}
        data = validate.json_file(self.manifest_path, MANIFEST_REDO)
        stages = data.setdefault("stages", {})
        if not isinstance(stages, dict) or not all(isinstance(v, dict) for v in stages.values()):
            raise validate.Corrupt(self.manifest_path, "is corrupt ('stages' is not a table)", MANIFEST_REDO)
        return data

    def record_stage(self, stage: str, info: Mapping[str, Any]) -> None:
        """Merge ``info`` into ``manifest.json['stages'][stage]`` (atomically); rank 0 only. A run whose
        manifest.json is gone gets one rebuilt from its files (:meth:`rebuilt_manifest`), said in a note."""
        if not _is_main():
            return
        self.ensure()
        data = self.manifest() if self.manifest_path.exists() else self.rebuilt_manifest(stage)
        stages = data.setdefault("stages", {})
        entry = stages.setdefault(stage, {})
        entry.update(info)
        data.update(self._facts)
        self._facts.clear()
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        # Every stage says when it finished (`grpo doctor` listed export and eval as "(?)": docs/history.md
        # "First runs").
        entry["finished"] = info.get("finished") or now
        data["updated"] = now
        atomic_write_json(self.manifest_path, data)

    def rebuilt_manifest(self, recording: str) -> dict[str, Any]:
        """For a run that lost its manifest.json: an entry marked ``rebuilt`` per earlier stage whose output
        is here (prep: data/stats.json; sft, grpo: their adapter), said in a note — never a silent partial
        one. ``recording``: the stage about to record itself (its entry is made whole by it)."""
        prepped = (self.data_dir / "stats.json").is_file()
        stages: dict[str, Any] = {"prep": {"rebuilt": True}} if prepped else {}
        for name in ("sft", "grpo"):
            if has_adapter(self.adapter_dir(name)):
                stages[name] = {"rebuilt": True, "adapter": str(self.adapter_dir(name))}
        stages.pop(recording, None)
        if stages:
            err_console.print(
                f"[yellow]note:[/] {self.manifest_path} was missing: rebuilt from the run's files "
                f"({', '.join(stages)} marked rebuilt: their versions and timings are unknown)",
                soft_wrap=True,
            )
        return {"stages": stages}

    def record(self, key: str, info: Mapping[str, Any]) -> None:
        """Set ``manifest.json[key]``, a fact of the run no one stage owns (the tokenizer's pad,
        ``tokenizer``), with the next :meth:`record_stage`: a stage that fails leaves the run as it was."""
        self._facts[key] = dict(info)

    @contextlib.contextmanager
    def stage(self, name: str, cfg: Config, **extra: Any) -> Iterator[dict[str, Any]]:
        """Time a stage and record it (versions, contract hash, timings) when it succeeds.

        The yielded dict collects stage results (data hashes, output paths, metrics).
        """
        self.ensure()
        info: dict[str, Any] = {}
        start = time.time()
        yield info
        spec = cfg.format_spec()
        record = {
            "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.time() - start, 2),
            "versions": package_versions(),
            "format_contract_sha256": spec.contract_hash(),
            "model": cfg.model,
            **extra,
            **info,
        }
        self.record_stage(name, record)

    def read_metrics(self) -> list[dict[str, Any]]:
        """Every row of ``logs/metrics.jsonl`` (a torn last line from a crash is skipped)."""
        rows: list[dict[str, Any]] = []
        if not self.metrics_path.exists():
            return rows
        with open(self.metrics_path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(row, dict):
                    rows.append(row)
        return rows

    def log_metrics(self, row: Mapping[str, Any]) -> None:
        """Append one JSON line to ``logs/metrics.jsonl`` (a single write: lines never interleave);
        rank 0 only under `grpo grpo --gpus N`."""
        if not _is_main():
            return
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        # Strict JSON: a NaN or infinite value (a reward gone wrong) is written as null, not NaN/Infinity.
        line = json.dumps(_finite(dict(row)), default=float, allow_nan=False) + "\n"
        with open(self.metrics_path, "a", encoding="utf-8") as fh:
            fh.write(line)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) replaced by None, through dicts and lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy / torch scalars
        try:
            return _finite(value.item())
        except (TypeError, ValueError):
            return value
    return value


def resolve_config(
    run: RunDir,
    *,
    preset: str | None = None,
    config_file: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    dry_run: bool = False,
) -> Config:
    """Resolve the config of ``run`` (saved < preset < --config < flags); ``--dry-run`` prints, exits."""
    from cli.config.schema import to_yaml

    cfg = _resolve_over_saved(run, preset=preset, config_file=config_file, overrides=overrides)
    if dry_run:
        import typer

        typer.echo(to_yaml(cfg), nl=False, file=quiet.stdout())
        raise typer.Exit(0)
    return cfg


def _resolve_over_saved(run: RunDir, **layers: Any) -> Config:
    """``resolve()`` over the run's saved config. When config.yaml is what fails (a hand edit, a damaged
    file), the error names it: a bad key there is no flag of this command, and the user must know the file."""
    from cli.config.schema import resolve

    saved = run.saved_config() if run.path.is_dir() else None
    try:
        return resolve(saved=saved, **layers)
    except GrpoError:
        if saved:
            try:
                resolve(saved=saved)
            except GrpoError as own:
                raise GrpoError(f"{run.config_path}: {own}: {CONFIG_REDO}", own.code) from None
        raise


def dry_run_exit(run: RunDir, config_file: Path | None, command: str, options: Mapping[str, Any]) -> None:
    """`--dry-run` of the commands without a config section of their own (export, chat, eval):
    print the run's resolved config plus this command's options, then exit 0."""
    import typer
    import yaml

    from cli.config.schema import to_yaml

    cfg = _resolve_over_saved(run, config_file=config_file)
    opts = {k: (str(v) if isinstance(v, Path) else v) for k, v in options.items()}
    typer.echo(to_yaml(cfg) + yaml.safe_dump({command: opts}, sort_keys=False), nl=False, file=quiet.stdout())
    raise typer.Exit(0)


def run_config(run: RunDir, config_file: Path | None = None) -> Config:
    """The config of an existing run (the model it was trained on, the format contract), + ``--config``."""
    run.require_exists()
    return resolve_config(run, config_file=config_file)
