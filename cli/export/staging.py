"""Staging: export builds every artifact in a temp folder inside the output and renames it into place.

A killed export leaves only a ``.export.<pid>.*.tmp`` folder, removed by the next export once its
process is gone; a failed first export leaves no empty output folder either.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from cli.common import GrpoError
from cli.run.atomic import follow_umask


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_writable(folder: Path, why: str) -> None:
    """Refuse, before anything is built, a folder this command must write into but cannot (a read-only
    run directory or mount: docs/history.md "Hardening, round 1"). A real probe file, as permissions alone do
    not tell (root,
    read-only mounts, immutable folders)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".grpo-probe.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise GrpoError(f"{folder} is not writable ({reason}): {why}") from None


def staging_dir(out: Path) -> Path:
    """Create ``out`` and a staging folder inside it; any failure is one line before any work.

    Staging folders left by a killed export (``.export.<pid>.*.tmp`` whose process is gone) are removed.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.glob(".export.*.tmp"):
            pid = stale.name.split(".")[2]
            if pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".export.{os.getpid()}.", suffix=".tmp", dir=out))
    except (PermissionError, FileExistsError, NotADirectoryError, OSError) as exc:
        reason = exc.strerror or type(exc).__name__
        raise GrpoError(
            f"output directory {out} is not writable ({reason}): pick another with --out"
        ) from None
    return staging


def move_into_place(staging: Path, out: Path, artifacts: list[dict[str, Any]]) -> None:
    """All artifacts built and verified: move each into ``out`` (one rename each) and record its path."""
    for art in artifacts:
        built = staging / art["dir"]
        final = out / art["dir"]
        if final.exists():
            old = out / f".{art['dir']}.old.{os.getpid()}"
            os.replace(final, old)
            os.replace(built, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(built, final)
        follow_umask(final)  # the safetensors library writes 0600 files; the folder is the staging's 0700
        art["path"] = str(final / art["file"]) if art.get("file") else str(final)
