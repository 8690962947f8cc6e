"""A per-call time limit for Python code that may never return (a custom reward: docs/history.md "Hardening,
round 1").

The call runs where it was made, in the main thread, so rewards that rely on it keep working (Math-Verify
times its parsing with ``signal.alarm``, which only works there; so do thread-unsafe libraries). A watchdog
thread waits for the deadline and then sends the main thread ``SIGUSR1``, whose handler raises
:class:`DeadlineExceeded` inside the stuck code: a pure-Python loop stops at its next bytecode, a blocking
sleep or read is interrupted. Code stuck inside one C call that never checks for signals cannot be
stopped this way (nor by a thread or Ctrl-C); that needs a subprocess, which would cost every reward call
a pickle of the batch.

Outside the main thread (no signal can be aimed there) the call runs without a limit.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

SIGNAL = signal.SIGUSR1


class DeadlineExceeded(BaseException):  # noqa: N818 - reads as what happened
    """Raised inside a call that ran past its deadline (a BaseException: ``except Exception`` in the
    stuck code does not swallow it)."""


def call_with_deadline(fn: Callable[..., Any], seconds: float, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, or :class:`DeadlineExceeded` once it has run ``seconds`` (≤ 0: no limit)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        return fn(*args, **kwargs)
    lock = threading.Lock()
    state = {"running": True, "fired": False}
    main = threading.main_thread().ident
    done = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        if state["running"]:
            raise DeadlineExceeded

    def watchdog() -> None:
        if done.wait(seconds):
            return
        with lock:  # never signal once the call has ended: the previous handler may be the default (exit)
            if state["running"] and main is not None:
                state["fired"] = True
                signal.pthread_kill(main, SIGNAL)

    previous = signal.signal(SIGNAL, on_signal)
    timer = threading.Thread(target=watchdog, name="deadline", daemon=True)
    timer.start()
    try:
        return fn(*args, **kwargs)
    finally:
        done.set()
        with lock:
            state["running"] = False
        # A signal sent under the lock has reached this thread by now; if its Python handler has not run
        # yet it finds the default handler below and is dropped.
        signal.signal(SIGNAL, previous if previous is not None else signal.SIG_DFL)
        if state["fired"]:
            # The deadline passed even if the call swallowed the exception and returned something.
            raise DeadlineExceeded
