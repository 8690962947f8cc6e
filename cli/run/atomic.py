"""Atomic writes: a reader sees the old file or the new one, never half of either.

A temp file (or folder) beside the target, fsynced, then one ``os.replace``. Modes follow the umask,
as ``open()`` would give them (a run directory shared between users or nodes stays readable), also for what
libraries write: :func:`follow_umask` is the one place that sets them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


def file_sha256(path: Path) -> str:
    from cli.run.validate import regular_file

    regular_file(path)  # a FIFO would block the read forever
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


def follow_umask(path: Path) -> None:
    """Give ``path`` (a file, or a folder and everything in it) the modes ``open()`` and ``mkdir()`` would
    under the umask. The safetensors library writes its files 0600 whatever the umask (every adapter, base
    model and checkpoint was unreadable to the other users of a shared run directory); temp files and
    folders are 0600/0700. Symlinks are left alone (they may point outside the run)."""
    mask = _umask()
    path = Path(path)
    if path.is_symlink() or not path.exists():
        return
    entries = [path] if path.is_file() else [path, *path.rglob("*")]
    for entry in entries:
        if entry.is_symlink():
            continue
        try:
            if entry.is_dir():
                os.chmod(entry, 0o777 & ~mask)
            else:
                executable = entry.stat().st_mode & 0o111
                os.chmod(entry, (0o666 | executable) & ~mask)
        except OSError:
            continue  # not ours to change (another owner): reading it is what matters, and may work


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
        yield tmp
        follow_umask(tmp)  # mkdtemp makes 0700 folders; libraries write 0600 files into them
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


@contextlib.contextmanager
def restored_on_failure(folder: Path, files: Iterable[str] = ()) -> Iterator[None]:
    """``folder`` (and ``files``: names beside it, config.yaml, manifest.json) as they were when the block
    fails (a full disk in the middle of `grpo prep`'s writes left a new train.parquet beside the old warm-up
    set). They are hard-linked aside first, which copies no data: every write here replaces a file by
    rename, so a link keeps the old bytes. A folder that did not exist is removed.

    A SIGKILL runs no ``except``: the backup stays, marked whole, and the next command on the run puts it back
    (:func:`recover_interrupted`, under the run's lock). When the block ends well the backup is renamed
    ``.committed.`` in one step (from then on the new state is the run's), then removed."""
    folder = Path(folder)
    backup = Path(tempfile.mkdtemp(prefix=f".{folder.name}{BEFORE}", dir=folder.parent))
    try:
        if folder.is_dir():
            shutil.copytree(folder, backup / folder.name, symlinks=True, copy_function=_link_or_copy)
        for name in files:
            src = folder.parent / name
            if src.is_file():
                _link_or_copy(str(src), str(backup / f"{_FILE}{name}"))
            else:
                (backup / f"{_NO_FILE}{name}").touch()
        (backup / _WHOLE).touch()  # only now may a recovery put it back: before this, nothing was written
        yield
    except BaseException:
        _put_back(folder, backup)
        raise
    committed = backup.with_name(backup.name.replace(BEFORE, COMMITTED, 1))
    os.replace(backup, committed)
    shutil.rmtree(committed, ignore_errors=True)


BEFORE, COMMITTED = ".before.", ".committed."  # a backup of restored_on_failure, and one no longer needed
_WHOLE, _FILE, _NO_FILE = ".whole", ".file.", ".no-file."


def _put_back(folder: Path, backup: Path) -> None:
    """``folder`` and the files beside it as ``backup`` kept them; the backup is removed."""
    kept = backup / folder.name
    if folder.exists():
        os.replace(folder, backup / ".failed")
    if kept.exists():
        os.replace(kept, folder)
    for entry in backup.iterdir():
        if entry.name.startswith(_FILE):
            os.replace(entry, folder.parent / entry.name[len(_FILE) :])
        elif entry.name.startswith(_NO_FILE):
            (folder.parent / entry.name[len(_NO_FILE) :]).unlink(missing_ok=True)
    shutil.rmtree(backup, ignore_errors=True)


def recover_interrupted(run: Path) -> list[str]:
    """Undo what a killed command left in ``run`` (the caller holds the run's lock, so no writer is at work):
    a whole ``restored_on_failure`` backup is put back (the run as it was before the killed command), a
    committed or half-made one removed, and temp files (``.NAME.*.tmp``, ``.NAME.old.PID``) of atomic writes
    removed. Returns what was put back, in words (the caller says it)."""
    run = Path(run)
    restored: list[str] = []
    if not run.is_dir():
        return restored
    for backup in sorted(run.glob(f".*{BEFORE}*")) + sorted(run.glob(f".*{COMMITTED}*")):
        if not backup.is_dir():
            continue
        name = backup.name[1:].split(BEFORE if BEFORE in backup.name else COMMITTED, 1)[0]
        if BEFORE in backup.name and (backup / _WHOLE).is_file():
            _put_back(run / name, backup)
            restored.append(name)
        else:
            shutil.rmtree(backup, ignore_errors=True)
    for root, dirs, names in os.walk(run):  # symlinks (base/tiny → a shared model) are not followed
        for entry in [*dirs, *names]:
            if entry.startswith(".") and (entry.endswith(".tmp") or ".old." in entry):
                path = Path(root) / entry
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):  # a read-only run keeps it; nothing reads it
                        path.unlink()
        dirs[:] = [d for d in dirs if not (d.startswith(".") and (d.endswith(".tmp") or ".old." in d))]
    return restored


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another filesystem below, or no hard links there
        shutil.copy2(src, dst)
