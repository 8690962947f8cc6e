"""The run directory: the spine that chains the stages.

``runs/<name>/`` holds ``config.yaml`` (fully resolved), ``manifest.json`` (package versions, data
hashes, the format-contract hash, timings per stage), ``data/``, ``sft/``, ``grpo/`` (checkpoints),
``export/``, ``eval/`` and ``logs/metrics.jsonl``. Every write is atomic (temp file + rename, or a
temp folder renamed into place), so an interrupted stage never leaves a half-written artifact.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from cli import quiet
from cli.common import GrpoError
from cli.ranks import is_main as _is_main

# Which command makes each artifact: used to tell the user what to run first.
PRODUCER = {
    "data": "grpo prep NAME",
    "sft": "grpo sft",
    "grpo": "grpo grpo",
    "export": "grpo export",
}

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


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _umask() -> int:
    """The process umask, read without changing it (Linux: /proc/self/status). Setting it and putting it
    back, the only portable way, would briefly change the mode of files other threads create."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes 0600 files: give the file the mode open() would (a run directory shared between users
        # or nodes must stay readable to them).
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


@contextlib.contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """Yield a temp folder beside ``final``; on success it replaces ``final`` in one rename."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        tmp.chmod(0o777 & ~_umask())  # mkdtemp makes 0700 folders
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}.old.{os.getpid()}")
        os.replace(final, old)
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# ---- one writer per run directory ---------------------------------------------------------------
LOCK_NAME = ".grpo.lock"  # who holds the run (pid, command, since), there only while it is held
_HELD: dict[str, int] = {}  # resolved run path -> fd of the locked run folder, held by this process


def release_locks() -> None:
    """Let go of every run directory this process holds (each command's end; process exit does it too)."""
    import fcntl

    for path, fd in _HELD.items():
        with contextlib.suppress(OSError):
            os.unlink(Path(path) / LOCK_NAME)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
    _HELD.clear()


class RunDir:
    """Paths and bookkeeping of one run directory."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

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

    # ---- checks ----------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.path.is_dir()

    def hold(self, command: str) -> None:
        """Become the one writer of this run directory until the command ends.

        Two commands writing one run at once mixed their checkpoints, config, adapter and metrics. The
        lock is ``flock`` on the run folder: the kernel drops it when its process dies, so a lock left by
        a killed command is simply taken over. ``.grpo.lock`` names the holder while it holds. The ranks of
        ``grpo grpo --gpus N`` run under their parent's lock; a run directory that does not exist yet has
        nothing to protect.
        """
        import fcntl

        if os.environ.get("GRPO_LAUNCHED") == "1" or not self.path.is_dir():
            return
        key = str(self.path.resolve())
        if key in _HELD:
            return
        try:  # the lock is on the folder itself: a failed command leaves no file behind
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            try:
                holder = json.loads((self.path / LOCK_NAME).read_text())
            except (OSError, ValueError):
                holder = {}
            who = "another grpo command"
            if holder:
                who = f"`{holder.get('command')}` (pid {holder.get('pid')}, since {holder.get('since')})"
            raise GrpoError(
                f"{self.path} is in use by {who}: wait for it to end or stop it — two commands writing one "
                "run directory would mix their checkpoints, config and metrics"
            ) from None
        info = {
            "pid": os.getpid(),
            "command": command,
            "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        with contextlib.suppress(OSError):  # the message's detail only: a read-only run still locks
            atomic_write_text(self.path / LOCK_NAME, json.dumps(info) + "\n")
        _HELD[key] = fd

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
        if not self.path.is_dir():
            raise GrpoError(
                f"no run directory at {self.path}: start a run with `grpo prep NAME --run {self.path}` "
                "(or pass --run DIR)"
            )
        if not Path(path).exists():
            hint = PRODUCER.get(stage, f"grpo {stage}")
            raise GrpoError(
                f"{what or stage} not found in {self.path} ({Path(path).relative_to(self.path)}): "
                f"run `{hint} --run {self.path}` first"
            )
        return Path(path)

    # ---- config ----------------------------------------------------------------------------
    def saved_config(self) -> dict[str, Any] | None:
        if not self.config_path.exists():
            return None
        from cli.config import load_yaml

        return load_yaml(self.config_path)

    def save_config(self, cfg: Any) -> None:
        from cli.config import to_yaml

        if not _is_main():
            return
        self.ensure()
        atomic_write_text(self.config_path, to_yaml(cfg))

    # ---- manifest --------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            return {"stages": {}}
        try:
            return json.loads(self.manifest_path.read_text())
        except json.JSONDecodeError:
            raise GrpoError(
                f"{self.manifest_path} is corrupt (not JSON): delete it or start a new run"
            ) from None

    def record_stage(self, stage: str, info: Mapping[str, Any]) -> None:
        """Merge ``info`` into ``manifest.json['stages'][stage]`` (atomically); rank 0 only."""
        if not _is_main():
            return
        self.ensure()
        data = self.manifest()
        stages = data.setdefault("stages", {})
        entry = stages.setdefault(stage, {})
        entry.update(info)
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        # Every stage says when it finished (`grpo doctor` listed export and eval as "(?)": issue #15).
        entry["finished"] = info.get("finished") or now
        data["updated"] = now
        atomic_write_json(self.manifest_path, data)

    @contextlib.contextmanager
    def stage(self, name: str, cfg: Any, **extra: Any) -> Iterator[dict[str, Any]]:
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
) -> Any:
    """Resolve the config of ``run`` (saved < preset < --config < flags); ``--dry-run`` prints, exits."""
    from cli.config import resolve, to_yaml

    saved = run.saved_config() if run.path.is_dir() else None
    cfg = resolve(saved=saved, preset=preset, config_file=config_file, overrides=overrides)
    if dry_run:
        import typer

        typer.echo(to_yaml(cfg), nl=False, file=quiet.stdout())
        raise typer.Exit(0)
    return cfg


def dry_run_exit(run: RunDir, config_file: Path | None, command: str, options: Mapping[str, Any]) -> None:
    """`--dry-run` of the commands without a config section of their own (export, chat, eval):
    print the run's resolved config plus this command's options, then exit 0."""
    import typer
    import yaml

    from cli.config import resolve, to_yaml

    saved = run.saved_config() if run.path.is_dir() else None
    cfg = resolve(saved=saved, config_file=config_file)
    opts = {k: (str(v) if isinstance(v, Path) else v) for k, v in options.items()}
    typer.echo(to_yaml(cfg) + yaml.safe_dump({command: opts}, sort_keys=False), nl=False, file=quiet.stdout())
    raise typer.Exit(0)
