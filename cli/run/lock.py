"""One writer per run directory: an ``flock`` on the run folder, held until the command ends.

Two commands writing one run at once mixed their checkpoints, config, adapter and metrics. The kernel
drops the lock when its process dies, so a lock left by a killed command is simply taken over.

A new run directory is made under the same lock (`grpo prep` into a path that does not exist yet): the
creation takes a short ``flock`` on the folder above it, so two commands starting the same new run cannot
both make it and both write it (they did: two preps at once both exited 0, one's rows on disk under the
other's summary). A command that fails removes the run directory it made ("nothing written" is true).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from cli.common import GrpoError
from cli.run.atomic import atomic_write_text

LOCK_NAME = ".grpo.lock"  # who holds the run (pid, command, since), there only while it is held
PARENT_WAIT = 5.0  # seconds to wait for the folder above a new run (held for a mkdir by another command)
HOLDER_WAIT = 2.0  # seconds to wait for a holder that has the lock but has not yet written LOCK_NAME


_HELD: dict[str, int] = {}  # resolved run path -> fd of the locked run folder, held by this process
_CREATED: dict[str, list[Path]] = {}  # resolved run path -> the folders made for it here, deepest first


def release_locks(*, failed: bool = False) -> None:
    """Let go of every run directory this process holds (each command's end; process exit does it too).
    ``failed``: the command did not succeed, so a run directory it made is removed (with the empty folders
    above it that it made), still under the lock."""
    import fcntl

    for path, fd in _HELD.items():
        with contextlib.suppress(OSError):
            os.unlink(Path(path) / LOCK_NAME)
        made = _CREATED.get(path, [])
        if failed and made:
            with _creating(made[0]):  # as it was made: no other command sees it half removed
                shutil.rmtree(made[0], ignore_errors=True)
                for folder in made[1:]:
                    with contextlib.suppress(OSError):
                        folder.rmdir()  # only when empty
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
    _HELD.clear()
    _CREATED.clear()


@contextlib.contextmanager
def _creating(path: Path) -> Iterator[None]:
    """A short exclusive ``flock`` on the nearest existing folder above ``path``, so that checking,
    making and locking ``path`` happen as one step across processes. Waits a few seconds at most (the
    folder above could itself be a run held by a long command: then the lock on ``path`` alone decides)."""
    import fcntl

    above = path.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    try:
        fd = os.open(above, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + PARENT_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # closing drops the flock


def _make(path: Path) -> list[Path]:
    """``mkdir -p path``; the folders it made, deepest first."""
    missing = []
    folder = path
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except PermissionError:
        raise GrpoError(f"cannot create run directory {path}: permission denied") from None
    except OSError as exc:
        raise GrpoError(f"cannot create run directory {path}: {exc.strerror}") from None
    return missing


def hold(path: Path, command: str, *, create: bool = False) -> None:
    """Become the one writer of this run directory until the command ends.

    Two commands writing one run at once mixed their checkpoints, config, adapter and metrics. The
    lock is ``flock`` on the run folder: the kernel drops it when its process dies, so a lock left by
    a killed command is simply taken over. ``.grpo.lock`` names the holder while it holds. The ranks of
    ``grpo grpo --gpus N`` run under their parent's lock. A run directory that does not exist yet is made
    here with ``create`` (under the lock of the folder above); without it there is nothing to protect.
    """
    if os.environ.get("GRPO_LAUNCHED") == "1" or (not create and not path.is_dir()):
        return
    key = str(path.resolve())
    if key in _HELD:
        return
    with _creating(path):
        made = _make(path) if create and not path.is_dir() else []
        try:  # the lock is on the folder itself: a failed command leaves no file behind
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            _lock(fd, path)
        except GrpoError:
            os.close(fd)
            raise
        _HELD[key] = fd
        if made:
            _CREATED[key] = made
        info = {
            "pid": os.getpid(),
            "command": command,
            "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        with contextlib.suppress(OSError):  # the message's detail only: a read-only run still locks
            atomic_write_text(path / LOCK_NAME, json.dumps(info) + "\n")
    _recover(path, command)


def _recover(path: Path, command: str) -> None:
    """What a killed command left, undone by the next one as soon as it holds the run: the run as it was
    before a `grpo prep` killed mid-write, and no temp or backup files (cli/run/atomic.py)."""
    from cli.run.atomic import recover_interrupted
    from cli.run.console import err_console

    try:
        restored = recover_interrupted(path)
    except OSError as exc:
        raise GrpoError(f"{command}: cannot clean up after a killed command in {path}: {exc}") from None
    if restored:
        err_console.print(
            f"[yellow]note:[/] {', '.join(f'{r}/' for r in restored)} config.yaml and manifest.json of "
            f"{path} "
            "put back as they were before a command that was killed while writing them"
        )


def _lock(fd: int, path: Path) -> None:
    """``flock`` the run folder, or refuse naming the command that holds it."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        # The holder names itself right after it takes the lock; two commands making the same new run can
        # meet in between (each may lock a different folder above it, the nearest one that exists when it
        # looks), so give it a moment before saying "another grpo command".
        holder = _holder(path)
        deadline = time.monotonic() + HOLDER_WAIT
        while not holder and time.monotonic() < deadline:
            time.sleep(0.05)
            holder = _holder(path)
        who = "another grpo command"
        if holder:
            who = f"`{holder.get('command')}` (pid {holder.get('pid')}, since {holder.get('since')})"
        raise GrpoError(
            f"{path} is in use by {who}: wait for it to end or stop it — two commands writing one "
            "run directory would mix their checkpoints, config and metrics"
        ) from None


def _holder(path: Path) -> dict[str, object]:
    """What ``LOCK_NAME`` says of the holder; empty while it is missing, half written or not an object."""
    try:
        holder = json.loads((path / LOCK_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}
