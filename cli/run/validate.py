"""Checks of what a command reads from the run directory, made before it loads anything.

Any file of a run can be damaged: a disk that filled up, a copy cut short, a hand edit, a kill in the middle
of a library's own write. A command used to find out minutes later, deep in a library, with the library's
words ("invalid header length") and no file named. Here every reader opens only the cheap part of a file,
never the weights: a safetensors header (8 bytes of length + JSON), a parquet footer, a GGUF magic, a JSON
or YAML file, a zip's central directory. A bad file is one line naming it and the command that makes it
again, within a second of the start.

- :meth:`cli.run.rundir.RunDir.check` puts them together: what every command calls first (the run path,
  manifest.json, the base model folder, and the data files and adapters that command will read);
- :func:`checkpoint_problem`: why a ``checkpoint-N`` cannot be resumed from (None when it can), which
  :func:`cli.train.checkpoints.latest_checkpoint` uses to skip a bad one and name it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cli.common import GrpoError

SAFETENSORS_MAX_HEADER = 100 * 2**20  # the safetensors library refuses headers over 100 MB too
GGUF_MAGIC = b"GGUF"


class Corrupt(GrpoError):
    """A file of the run that cannot be used: ``path``, what is wrong with it, and what makes it again."""

    def __init__(self, path: Path, problem: str, redo: str) -> None:
        super().__init__(f"{path} {problem}: {redo}" if redo else f"{path} {problem}")
        self.path, self.problem = Path(path), problem


# ---- paths -------------------------------------------------------------------------------------------
def run_path(path: Path) -> None:
    """A ``--run`` that can never be a folder: a symlink loop, a dangling symlink, a file in its way.

    ``mkdir`` on them failed with "FileExistsError: [Errno 17] File exists" after minutes of loading."""
    path = Path(path)
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise GrpoError(
                f"run directory {path} is a symlink loop (its links point at each other): remove the link "
                "or pass another --run"
            ) from None
        if exc.errno == errno.ENOTDIR:
            raise GrpoError(f"run directory {path}: a part of the path is a file, not a folder") from None
        if exc.errno != errno.ENOENT:
            raise GrpoError(f"run directory {path}: {exc.strerror}") from None
        if path.is_symlink():
            raise GrpoError(
                f"run directory {path} is a symlink to {os.readlink(path)}, which does not exist: create "
                "the target folder or pass another --run"
            ) from None
        return  # simply not there yet: `grpo prep` makes it
    if not path.is_dir():
        raise GrpoError(f"run directory {path} exists and is not a directory")


# ---- single files ------------------------------------------------------------------------------------
_SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISDIR, "a directory"))  # fmt: skip


def regular_file(path: Path, redo: str = "") -> None:
    """A file of the run or a data file is a regular file: a FIFO or a device where one belongs is refused
    from its ``stat``, before anything opens it (opening a FIFO blocks until a writer comes, Ctrl-C
    ignored)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return  # the caller says what makes it
    except OSError as exc:
        raise Corrupt(path, f"cannot be read ({exc.strerror})", redo) from None
    for test, what in _SPECIAL:
        if test(mode):
            raise Corrupt(path, f"is {what}, not a regular file (reading it could block forever)", redo)


def json_file(path: Path, redo: str, kind: type = dict) -> Any:
    """A JSON file of the run, parsed; an empty, truncated or wrong one is one line naming it."""
    regular_file(path, redo)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise Corrupt(path, "is corrupt (not UTF-8 text)", redo) from None
    if not text.strip():
        raise Corrupt(path, "is corrupt (empty: a write cut short)", redo)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Corrupt(path, f"is corrupt (not JSON: {exc.msg}, line {exc.lineno})", redo) from None
    except RecursionError:
        raise Corrupt(path, "is corrupt (nested too deeply to be ours)", redo) from None
    if not isinstance(value, kind):
        want = "a JSON object" if kind is dict else f"a {kind.__name__}"
        raise Corrupt(path, f"is corrupt (holds a {type(value).__name__}, not {want})", redo)
    return value


def safetensors_header(path: Path, redo: str) -> dict[str, Any]:
    """The tensors a ``.safetensors`` file declares (name → dtype, shape, offsets), read from its header
    alone: 8 bytes of little-endian length, then that much JSON; the data must end where the header says."""
    regular_file(path, redo)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else -1
            if n < 2 or n > min(size - 8, SAFETENSORS_MAX_HEADER):
                what = "empty" if size == 0 else f"truncated or not safetensors: {size} bytes"
                raise Corrupt(path, f"is corrupt ({what})", redo)
            header = json.loads(fh.read(n))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise Corrupt(path, "is corrupt (its safetensors header is not JSON)", redo) from None
    if not isinstance(header, dict):
        raise Corrupt(path, "is corrupt (its safetensors header is not a table of tensors)", redo)
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    try:
        end = max((int(v["data_offsets"][1]) for v in tensors.values()), default=0)
    except (TypeError, KeyError, IndexError, ValueError):
        raise Corrupt(path, "is corrupt (a tensor without data offsets)", redo) from None
    described = 8 + n + end
    if described != size:
        what = "truncated" if size < described else "bytes after its last tensor"
        raise Corrupt(path, f"is corrupt ({what}: {size} bytes, its header describes {described})", redo)
    return tensors


def parquet(path: Path, redo: str, columns: Iterable[str] = ()) -> int:
    """Rows of a parquet file, from its footer (``read_metadata``: no data read); needed columns checked."""
    import pyarrow.parquet as pq

    regular_file(path, redo)
    try:
        meta = pq.read_metadata(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad footer
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Corrupt(path, f"is corrupt or truncated (not parquet: {first})", redo) from None
    names = set(meta.schema.names)
    missing = [c for c in columns if c not in names]
    if missing:
        raise Corrupt(path, f"lacks column(s) {', '.join(missing)}", redo)
    if meta.num_rows == 0:
        raise Corrupt(path, "has no rows", redo)
    return int(meta.num_rows)


def gguf(path: Path, redo: str) -> None:
    """A GGUF file starts with the magic ``GGUF`` and a version (llama.cpp reads 2 and 3)."""
    regular_file(path, redo)
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise GrpoError(f"cannot read {path}: {exc.strerror}") from None
    if len(head) < 8 or head[:4] != GGUF_MAGIC:
        raise Corrupt(path, "is corrupt or truncated (no GGUF header)", redo)
    version = int.from_bytes(head[4:], "little")
    if version not in (2, 3):
        raise Corrupt(path, f"is corrupt (GGUF version {version}; llama.cpp reads 2 and 3)", redo)


def torch_archive(path: Path, redo: str) -> None:
    """A ``torch.save`` file (optimizer, scheduler, RNG state) is a zip: its central directory must read."""
    try:
        with zipfile.ZipFile(path) as zf:
            zf.infolist()
    except (zipfile.BadZipFile, OSError, EOFError):
        raise Corrupt(path, "is corrupt or truncated (not a whole torch archive)", redo) from None


# ---- folders -----------------------------------------------------------------------------------------
_LORA = re.compile(r"(?P<module>.+)\.lora_(?P<part>[AB])(?:\.[^.]+)?\.weight$")


def adapter(folder: Path, redo: str) -> None:
    """A peft LoRA folder: ``adapter_config.json`` loads and names a peft type, the weights' header reads,
    and the tensors have the config's rank (peft would refuse the pair after the base model loaded)."""
    config = json_file(folder / "adapter_config.json", redo)
    if "peft_type" not in config:
        raise Corrupt(folder / "adapter_config.json", "is not a peft adapter config (no peft_type)", redo)
    weights = folder / "adapter_model.safetensors"
    if not weights.is_file():
        if (folder / "adapter_model.bin").is_file():
            torch_archive(folder / "adapter_model.bin", redo)
            return
        raise Corrupt(weights, "is missing", redo)
    tensors = safetensors_header(weights, redo)
    if not tensors:
        raise Corrupt(weights, "holds no tensors", redo)
    rank = config.get("r")
    if not isinstance(rank, int) or config.get("rank_pattern"):
        return  # per-module ranks: peft checks them
    for name, info in sorted(tensors.items()):
        m = _LORA.match(name)
        shape = info.get("shape") if isinstance(info, dict) else None
        if not m or not isinstance(shape, list) or len(shape) != 2:
            continue
        got = shape[0] if m["part"] == "A" else shape[1]
        if got != rank:
            problem = (
                f"has rank {got} in {name}, but adapter_config.json says {rank} (the config and the weights "
                "come from different adapters)"
            )
            raise Corrupt(weights, problem, redo)


def model_folder(folder: Path, redo: str) -> None:
    """An HF model folder the run made (``base/tiny``): config.json and every safetensors header."""
    if not (folder / "config.json").exists():
        return  # not one the run made: the loader says what is wrong with it
    json_file(folder / "config.json", redo)
    for weights in sorted(folder.glob("*.safetensors")):
        safetensors_header(weights, redo)


def checkpoint_problem(folder: Path) -> str | None:
    """Why ``checkpoint-N`` cannot be resumed from, or None when it can: its trainer_state.json loads and is
    at step N, its adapter reads (config + safetensors header, same rank), its torch archives are whole."""
    step = folder.name.rpartition("-")[2]
    try:
        state = json_file(folder / "trainer_state.json", "")
        adapter(folder, "")
        for archive in sorted(folder.glob("*.pt")) + sorted(folder.glob("*.pth")):
            if archive.is_file():
                torch_archive(archive, "")
    except Corrupt as exc:
        return f"{exc.path.name} {exc.problem}"
    except OSError as exc:
        name = Path(exc.filename or "").name or "a file"
        return f"{name} is missing" if isinstance(exc, FileNotFoundError) else f"{name}: {exc.strerror}"
    if str(state.get("global_step")) != step:
        return f"trainer_state.json is at step {state.get('global_step')!r}, not {step}"
    return None
