"""One writer per run directory: an ``flock`` on the run folder, held until the command ends.

Two commands writing one run at once mixed their checkpoints, config, adapter and metrics. The kernel
drops the lock when its process dies, so a lock left by a killed command is simply taken over.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
from pathlib import Path

from cli.common import GrpoError
from cli.run.atomic import atomic_write_text

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


def hold(path: Path, command: str) -> None:
    """Become the one writer of this run directory until the command ends.

    Two commands writing one run at once mixed their checkpoints, config, adapter and metrics. The
    lock is ``flock`` on the run folder: the kernel drops it when its process dies, so a lock left by
    a killed command is simply taken over. ``.grpo.lock`` names the holder while it holds. The ranks of
    ``grpo grpo --gpus N`` run under their parent's lock; a run directory that does not exist yet has
    nothing to protect.
    """
    import fcntl

    if os.environ.get("GRPO_LAUNCHED") == "1" or not path.is_dir():
        return
    key = str(path.resolve())
    if key in _HELD:
        return
    try:  # the lock is on the folder itself: a failed command leaves no file behind
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        try:
            holder = json.loads((path / LOCK_NAME).read_text())
        except (OSError, ValueError):
            holder = {}
        who = "another grpo command"
        if holder:
            who = f"`{holder.get('command')}` (pid {holder.get('pid')}, since {holder.get('since')})"
        raise GrpoError(
            f"{path} is in use by {who}: wait for it to end or stop it — two commands writing one "
            "run directory would mix their checkpoints, config and metrics"
        ) from None
    info = {
        "pid": os.getpid(),
        "command": command,
        "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    with contextlib.suppress(OSError):  # the message's detail only: a read-only run still locks
        atomic_write_text(path / LOCK_NAME, json.dumps(info) + "\n")
    _HELD[key] = fd
