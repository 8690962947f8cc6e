"""SIGTERM is a request to stop, as Ctrl-C is: what `kill`, systemd, Slurm and Kubernetes send.

Python's default for SIGTERM ends the process on the spot: no line, no `finally` (a run's ``.grpo.lock``
stayed behind, a half-made attempt folder too). For the length of a command SIGTERM raises
:class:`Terminated`, a ``KeyboardInterrupt``, so it unwinds as Ctrl-C does; a training loop turns either
into save-and-stop at the step's end (:class:`cli.train.live.Interrupt`). The exit code says which signal
stopped the command, as a shell does: 128 + its number (130 for SIGINT, 143 for SIGTERM).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_CODES = tuple(128 + int(s) for s in STOP_SIGNALS)  # 130, 143: a command stopped on purpose
_received: list[int] = []  # the stop signals this command received, in order


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived outside a training loop's own handler."""


def received(signum: int) -> None:
    """Remember that ``signum`` asked this command to stop (the exit code follows the last one)."""
    _received.append(signum)


def exit_code() -> int:
    """128 + the number of the signal that stopped this command (SIGINT when none was recorded)."""
    return 128 + (_received[-1] if _received else int(signal.SIGINT))


def label(signum: int) -> str:
    """How a message names the signal: Ctrl-C for SIGINT (what users press), else its name."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def _terminate(signum: int, frame: Any) -> None:
    received(signum)
    raise Terminated


@contextlib.contextmanager
def terminate_raises() -> Iterator[None]:
    """For one command: SIGTERM raises :class:`Terminated`; the previous handler is put back after."""
    _received.clear()
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (an embedding application): leave its handling alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait for the end of the block, then act as they would have: for the first import
    of torch and the trainers, where C++ calls back into Python. An exception that a Python signal handler
    raises there crosses C++ that cannot pass it on, and the process aborts (pybind11's
    ``error_already_set``, then ``std::terminate``: exit -6, seen with SIGTERM during ``import torch``).
    The wait is the imports' few seconds."""
    pending: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        pending.append(signum)

    try:
        previous = {sig: signal.signal(sig, hold) for sig in STOP_SIGNALS}
    except ValueError:  # not the main thread: signal handlers run on the main one anyway
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:  # delivered again, now that a handler's exception is safe to raise
            signal.raise_signal(pending[-1])


def held_import(module: str) -> None:
    """Import ``module`` (torch, or a package that imports it first) with the stop signals held
    (:func:`deferred`): a command's first heavy import, so that a stop during it cannot abort the process."""
    with deferred():
        __import__(module)  # as an import statement does (importlib.import_module skips the audit event)
