"""Never a silent minute: while a command works, it says so at least every few seconds.

Loading a model, tokenizing a data set, a slow training step, building and checking an export: on a loaded
2-core machine each of these took from 30 s to 15 minutes with nothing on the screen, which cannot be told
from a hang. Inside :func:`working`, a background thread watches our own consoles; whenever nothing was
printed for :data:`EVERY` seconds it prints one dim line naming what is under way and for how long::

      … sft: loading gemma3-270m (0:12)

The line names the latest :func:`doing` (or the text ``working`` started with); a callable gives the state
of the moment (eval's decoded tokens). Lines our code prints anyway (a training step, a progress bar's
refresh) reset the clock, so a command that talks often shows no extra line.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

# Silence allowed before a line. The promise is 10 s; at load average 7-9 the thread printed up to 7 s late
# (while a tokenizer or model loaded), hence less.
EVERY = 6.0
_TICK = 0.5

Status = str | Callable[[], str]


class _Stamped:
    """A console's stream that notes when it was last written to."""

    def __init__(self, stream: Any, beat: _Beat) -> None:
        self._stream, self._beat = stream, beat

    def write(self, text: str) -> int:
        if text:
            self._beat.last = time.monotonic()
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, ...
        return getattr(self._stream, name)


class _Beat:
    def __init__(self, status: Status, console: Any, every: float) -> None:
        self.status, self.console, self.every = status, console, every
        self.started = self.since = self.last = time.monotonic()
        self.paused = 0
        self.stop = threading.Event()

    def text(self) -> str:
        status = self.status() if callable(self.status) else self.status
        return f"{status} ({clock(time.monotonic() - self.since)})"

    def run(self) -> None:
        while not self.stop.wait(_TICK):
            if self.paused or time.monotonic() - self.last < self.every:
                continue
            with contextlib.suppress(Exception):  # a status callable that fails says nothing
                line = self.text()
                self.console.print(f"[dim]  … {line}[/]", markup=True, highlight=False, soft_wrap=True)
            self.last = time.monotonic()


_current: list[_Beat] = []


def clock(seconds: float) -> str:
    """0:07, 1:05, 1:02:03."""
    s = int(max(seconds, 0))
    h, m = divmod(s, 3600)
    return f"{h}:{m // 60:02d}:{m % 60:02d}" if h else f"{m // 60}:{m % 60:02d}"


def _consoles() -> list[Any]:
    from cli import common
    from cli.run import console as training_console

    return [common.console, common.err_console, training_console.console, training_console.err_console]


@contextlib.contextmanager
def working(status: Status, *, console: Any = None, every: float = EVERY) -> Iterator[None]:
    """While inside, a line on ``console`` (default: stderr) after each ``every`` seconds of silence.

    Nested calls share the outer thread: the inner one only changes what the line says, and gives the
    outer text back when it ends.
    """
    if _current:
        with _stage(status):
            yield
        return
    if console is None:
        from cli.common import err_console as console
    beat = _Beat(status, console, every)
    consoles = _consoles()
    saved = [c._file for c in consoles]
    for c in consoles:
        c.file = _Stamped(c.file, beat)
    _current.append(beat)
    thread = threading.Thread(target=beat.run, name="grpo-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        beat.stop.set()
        thread.join(timeout=2)
        _current.remove(beat)
        for c, f in zip(consoles, saved, strict=True):
            c._file = f


@contextlib.contextmanager
def _stage(status: Status) -> Iterator[None]:
    beat = _current[-1]
    outer = beat.status, beat.since
    doing(status)
    try:
        yield
    finally:
        beat.status, beat.since = outer


def doing(status: Status) -> None:
    """What the heartbeat line names from now on (its clock restarts); nothing outside :func:`working`."""
    if _current:
        beat = _current[-1]
        beat.status, beat.since = status, time.monotonic()


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No line while inside (waiting for the user's input is not work)."""
    beat = _current[-1] if _current else None
    if beat is not None:
        beat.paused += 1
    try:
        yield
    finally:
        if beat is not None:
            beat.paused -= 1
            beat.last = time.monotonic()
