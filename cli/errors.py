"""How a command fails: one ``error:`` line on stderr and a non-zero exit, never a traceback.

Every command is wrapped in :func:`handle_errors`: library chatter goes to ``<run>/logs/grpo.log``
(:mod:`cli.run.quiet`), expected failures (:class:`~cli.common.GrpoError`, missing files, missing packages,
out of memory, a full disk) become one line, SIGTERM stops it as Ctrl-C does (:mod:`cli.run.signals`), and the
run directory's lock is released whatever happens (a run directory the command made is removed when it fails).

Libraries say what went wrong in their own words: torch's "[enforce fail at inline_container.cc:672] .
unexpected pos 101312 vs 101204" is a full disk, and so is safetensors' "I/O error: No space left on device
(os error 28)". :func:`in_our_words` says it in ours, naming the folder and its free space.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer

from cli.common import GrpoError, err_console

F = TypeVar("F", bound=Callable[..., Any])

# What libraries say when a write found no room: the OS's words, and torch's zip writer's (which drops the
# errno: a short write shows as a file position that did not advance).
DISK_FULL_WORDS = (
    "no space left on device", "os error 28", "storagefull", "disk quota exceeded", "os error 122"
)  # fmt: skip
SHORT_WRITE_WORDS = ("unexpected pos", "pytorchstreamwriter failed writing", "failed writing file")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` to stderr and exit with ``code``."""
    from rich.markup import escape

    # Escaped: messages hold paths and hints like 'grpo[train]' that rich would read as markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc).lower()
    if any(w in text for w in DISK_FULL_WORDS):
        return True
    short_write = "inline_container" in text and any(w in text for w in SHORT_WRITE_WORDS)
    return isinstance(exc, RuntimeError) and short_write


def in_our_words(exc: BaseException, run: Path | None) -> str | None:
    """One line for a library failure we know the meaning of (a full disk, a symlink loop), else None."""
    for e in _chain(exc):
        if _disk_full(e):
            filename = getattr(e, "filename", None)
            folder = Path(filename).parent if filename else Path(run) if run is not None else Path.cwd()
            while not folder.exists() and folder != folder.parent:
                folder = folder.parent
            try:
                free = f"{_human(shutil.disk_usage(folder).free)} free on its disk"
            except OSError:
                free = "free space unknown"
            quota = isinstance(e, OSError) and e.errno == errno.EDQUOT or "quota" in str(e).lower()
            what = "disk quota exceeded" if quota else "disk full"
            return (
                f"{what}: no room to write in {folder} ({free}); free some space (or use --run on another "
                "disk) and run the command again"
            )
        if isinstance(e, OSError) and e.errno == errno.ELOOP:
            return f"{e.filename or 'a path'} is a symlink loop (its links point at each other): remove it"
    return None


def handle_errors(fn: F) -> F:
    """Turn expected failures into one clear line and a non-zero exit."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from cli.run import quiet, signals

        # Library warnings, log lines and foreign progress bars go to <run>/logs/grpo.log (--verbose: here).
        undo = quiet.install(kwargs.get("run"), fn.__name__.rstrip("_"))
        failed = True
        try:
            with signals.terminate_raises():
                result = fn(*args, **kwargs)
            failed = False
            return result
        except typer.Exit as exc:
            failed = bool(exc.exit_code)
            raise
        except GrpoError as exc:
            fail(str(exc), exc.code)
        except KeyboardInterrupt as exc:
            if isinstance(exc, signals.Terminated):
                err_console.print("terminated (SIGTERM)")
            else:
                err_console.print("interrupted")
            raise typer.Exit(signals.exit_code()) from None
        except Exception as exc:  # noqa: BLE001 - each kind gets its own words, details on request
            _one_line(exc, kwargs.get("run"))
        finally:
            undo()
            from cli.run.lock import release_locks

            release_locks(failed=failed)
        return None

    return wrapper  # type: ignore[return-value]


def _one_line(exc: Exception, run: Path | None) -> NoReturn:
    """The last line of defence: one line for any other failure (GRPO_DEBUG=1 re-raises for the traceback)."""
    words = in_our_words(exc, run)
    if words is not None:
        fail(words)
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        fail(f"{exc.strerror or exc}: {exc.filename}" if getattr(exc, "filename", None) else str(exc))
    if isinstance(exc, (ValueError, TypeError)):
        if os.environ.get("GRPO_DEBUG"):
            raise exc
        fail(str(exc))
    if isinstance(exc, ImportError):
        missing = getattr(exc, "name", None) or str(exc)
        fail(f"missing dependency {missing!r}: {exc}. Install the training extra: pip install 'grpo[train]'")
    if isinstance(exc, MemoryError):
        fail("out of memory: lower --gens, --max-completion-length or the batch size")
    if os.environ.get("GRPO_DEBUG"):
        raise exc
    # torch.OutOfMemoryError and friends carry their own message.
    name = type(exc).__name__
    hint = " (set GRPO_DEBUG=1 for the traceback)"
    if "OutOfMemory" in name:
        hint = " — lower --gens, --max-completion-length or the batch size; see README 'Troubleshooting'"
    fail(f"{name}: {str(exc).strip().splitlines()[0] if str(exc).strip() else name}{hint}")
