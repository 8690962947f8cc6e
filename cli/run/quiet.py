"""Quiet by default: what the libraries say goes to ``<run>/logs/grpo.log``, not the terminal.

Once (docs/history.md "First runs") every heavy command printed torch ``_pytree`` deprecation lines,
bitsandbytes' "Failed to load CPU gemm_4bit_forward … pip install kernels", the Unsloth banner, transformers'
"generation call has exceeded the model's predefined maximum length" and five tqdm bars from ``datasets`` — in
`grpo chat`, in the middle of the conversation. Here, for the length of one command:

- ``sys.stdout``/``sys.stderr`` are the log file, so Python warnings, banners printed at import (Unsloth's)
  and the log handlers libraries bind to ``sys.stderr`` when imported all land there, while our own
  consoles keep the terminal;
- library log handlers made before the command (tests, ``python -c``) are pointed at the log too
  (:func:`route_logs`);
- foreign progress bars are off (tqdm's ``TQDM_DISABLE``, the datasets/hub switches): each stage shows its
  own single progress display.

``grpo --verbose`` (or ``GRPO_VERBOSE=1``) leaves all of it on the terminal. The log file is opened on the
first line written once the run directory exists (lines before wait in memory): the log never creates a run
directory, so a command that fails early leaves none.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import io
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

VERBOSE_ENV = "GRPO_VERBOSE"
LOG_NAME = "grpo.log"
EARLY_LIMIT = 1 << 20  # characters kept for the log before the run directory exists
QUIET_ENV = {
    "TQDM_DISABLE": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class _LazyLog(io.TextIOBase):
    """A text stream onto the run's log file, opened (and its folder made) at the first write."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.header = ""
        self._fh: Any = None
        self._early: list[str] = []  # written before the run directory existed

    def point_at(self, path: Path | None, header: str) -> None:
        self.close_file()
        self.path, self.header = path, header
        self._early = []

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not text or self.path is None:
            return len(text or "")
        try:
            if self._fh is None:
                if not self.path.parent.parent.is_dir():
                    # The log never makes the run directory: the command that creates it does, under its
                    # lock (cli/run/lock.py); until then, lines wait here (a failed first prep leaves none).
                    if sum(map(len, self._early)) < EARLY_LIMIT:
                        self._early.append(text)
                    return len(text)
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the command
                self._fh.write(self.header + "".join(self._early))
                self._early = []
            self._fh.write(text)
            self._fh.flush()
        except OSError:
            pass  # a log that cannot be written never stops a command
        return len(text)

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        # Code that needs a real descriptor (faulthandler, subprocess) gets the terminal's stderr.
        stream = _real[1] if _real else sys.__stderr__
        assert stream is not None
        return stream.fileno()

    def close_file(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
        self._fh = None


_log = _LazyLog()
_handler = logging.StreamHandler(_log)
_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
_active = False
_moved: list[tuple[logging.Logger, logging.Handler]] = []
_real: list[Any] = []  # the terminal's (stdout, stderr) while a command runs


def log_path(run: Path | str | None) -> Path | None:
    return Path(run) / "logs" / LOG_NAME if run is not None else None


def _to_terminal(handler: logging.Handler) -> bool:
    stream = getattr(handler, "stream", None)
    return (
        type(handler) is logging.StreamHandler
        and handler is not _handler
        and stream in (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)
    )


def route_logs() -> None:
    """Point every library logger that writes to the terminal at the log file instead."""
    if not _active:
        return
    for logger in [logging.getLogger(), *logging.root.manager.loggerDict.values()]:
        if not isinstance(logger, logging.Logger) or logger.name.startswith("cli"):
            continue
        for h in list(logger.handlers):
            if _to_terminal(h):
                logger.removeHandler(h)
                _moved.append((logger, h))
                if _handler not in logger.handlers:
                    logger.addHandler(_handler)


@contextlib.contextmanager
def captured() -> Iterator[None]:
    """Text printed inside (an import banner) goes to the log file."""
    if not _active:
        yield
        return
    with contextlib.redirect_stdout(_log), contextlib.redirect_stderr(_log):  # type: ignore[type-var]
        yield
    route_logs()


def _consoles() -> list[Any]:
    """Our own rich consoles: they keep writing to the terminal while sys.stdout/err point at the log."""
    from cli import common
    from cli.run import console as training_console

    return [common.console, common.err_console, training_console.console, training_console.err_console]


def stdout() -> Any:
    """The terminal's stdout during a command (for ``typer.echo`` of our own output)."""
    return _real[0] if _active and _real else sys.stdout


@contextlib.contextmanager
def terminal() -> Iterator[None]:
    """The real streams back for a moment: ``input()`` keeps readline (line editing, history) only when
    sys.stdin/sys.stdout are the terminal's (`grpo chat`'s prompt)."""
    if not _active:
        yield
        return
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _real
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def install(run: Path | str | None, command: str) -> Callable[[], None]:
    """Quiet the libraries for one command; returns the undo (the CLI's error handler calls it).

    For the command's length ``sys.stdout``/``sys.stderr`` are the log file, so whatever a library prints
    or logs (its handlers bind to ``sys.stderr`` when it is imported, inside the command) lands there;
    our consoles are pointed at the real streams first.
    """
    global _active
    if verbose() or _active:
        return lambda: None
    _active = True
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    _log.point_at(log_path(run), f"\n== {started} grpo {command} ==\n")
    saved_env = {k: os.environ.get(k) for k in QUIET_ENV}
    for k, v in QUIET_ENV.items():
        os.environ.setdefault(k, v)
    _real[:] = [sys.stdout, sys.stderr]
    consoles = _consoles()
    saved_files = [c._file for c in consoles]
    for c in consoles:
        c.file = _real[1] if c.stderr else _real[0]
    sys.stdout = _log  # type: ignore[assignment]
    sys.stderr = _log  # type: ignore[assignment]
    # Warnings and log records go to the file even where someone else (pytest, an embedding app) has
    # taken over warnings.showwarning or the root logger's handlers.
    saved_showwarning = warnings.showwarning

    def showwarning(
        message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
    ) -> None:
        _log.write(warnings.formatwarning(message, category, filename, lineno, line))

    warnings.showwarning = showwarning
    root = logging.getLogger()
    root.addHandler(_handler)
    saved_level = root.level
    if root.level > logging.WARNING or root.level == logging.NOTSET:
        root.setLevel(logging.WARNING)
    _silence_loaded_libraries()
    route_logs()

    def undo() -> None:
        global _active
        sys.stdout, sys.stderr = _real
        warnings.showwarning = saved_showwarning
        root.removeHandler(_handler)
        for c, f in zip(consoles, saved_files, strict=True):
            c._file = f
        root.setLevel(saved_level)
        for logger, h in reversed(_moved):
            with contextlib.suppress(ValueError):
                logger.removeHandler(_handler)
            logger.addHandler(h)
        _moved.clear()
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _log.close_file()
        _active = False

    return undo


def _silence_loaded_libraries() -> None:
    """Progress-bar switches of libraries imported before the command started (tests, `python -c`)."""
    datasets_logging = sys.modules.get("datasets.utils.logging")
    if datasets_logging is not None:
        with contextlib.suppress(Exception):
            datasets_logging.disable_progress_bar()
