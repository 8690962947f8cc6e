"""Per-test time limits that a loaded machine cannot reach, and one line naming what hung when one is passed.

pytest-timeout counts wall-clock seconds, so load alone failed correct tests: on a 2-core laptop busy with
other work (load average 2-12) the nine `grpo` processes of one fault test took 20-40 s each to print
their first line, the test reached its 600 s, and ~100 lines of thread stacks followed. Here (installed by
tests/conftest.py through pytest-timeout's own hooks, so `timeout` in pyproject.toml and
``@pytest.mark.timeout`` keep their meaning):

- a limit counts an idle machine's seconds: a second of wall time counts ``min(1, cores / load average)``
  (no less than 1/:data:`MAX_STRETCH`), so twice the load gives twice the wall time, while a hang (no
  progress at any load) is still caught;
- each `grpo` process a test starts through :func:`started` (``helpers.grpo_cli`` and friends) adds its own
  allowance to the test's limit: a test that starts nine processes gets nine allowances;
- past the limit the test fails with one line: the test, the limit, the wall time and load it took, and
  what was running then — the `grpo` commands still alive (pid, how long), else the test's own line.

The per-process ``timeout=`` that tests used to give ``subprocess.run`` was a wall-clock limit too; the
allowance replaces it.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

CORES = os.cpu_count() or 1
# However loaded the machine, a limit stretches at most this much (a hang on a machine at load 40 is still
# caught within 10x its limit).
MAX_STRETCH = 10.0
TICK = 1.0
# After the test was told to stop: if it is stuck in native code that never returns to Python, the
# session is ended with the same line rather than left hanging.
GRACE = 120.0
TESTS = Path(__file__).resolve().parent


def machine_rate() -> tuple[float, float]:
    """(idle-machine seconds per wall second, the load average): 1 up to one runnable process per core."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0, 0.0
    return (max(1.0 / MAX_STRETCH, min(1.0, CORES / load)) if load > 0 else 1.0), load


class Budget:
    """The running limit of one test: counted seconds, the allowances of what it started."""

    def __init__(self, nodeid: str, limit: float) -> None:
        self.nodeid, self.limit = nodeid, float(limit)
        self.counted = 0.0
        self.allowance = 0.0
        self.started_at = time.monotonic()
        self.peak_load = 0.0
        self.thread: threading.Thread | None = None
        self.procs: list[tuple[subprocess.Popen[Any], str, float]] = []
        self.fired = threading.Event()
        self.done = threading.Event()
        self.main = threading.main_thread().ident

    # ---- the watcher thread ---------------------------------------------------------------------
    def watch(self) -> None:
        last = time.monotonic()
        while not self.done.wait(TICK):
            now = time.monotonic()
            rate, load = machine_rate()
            self.peak_load = max(self.peak_load, load)
            self.counted += (now - last) * rate
            last = now
            if self.counted >= self.limit + self.allowance:
                self.fired.set()
                assert self.main is not None
                signal.pthread_kill(self.main, signal.SIGALRM)
                if not self.done.wait(GRACE):
                    sys.__stderr__.write(f"\nTimeout (the test did not stop; ending the session): "
                                         f"{self.message(None)}\n")  # fmt: skip
                    sys.__stderr__.flush()
                    os._exit(1)
                return

    # ---- the report -------------------------------------------------------------------------------
    def message(self, frame: Any) -> str:
        wall = time.monotonic() - self.started_at
        n = len(self.procs)
        extra = (
            f" + {self.allowance:.0f} s for the {n} `grpo` process{'es' if n != 1 else ''} it started"
            if n
            else ""
        )
        load = f", load average up to {self.peak_load:.1f} on {CORES} cores"
        return (
            f"{self.nodeid} ran past its limit of {self.limit:.0f} s{extra} (idle-machine seconds: "
            f"{wall:.0f} s of wall time{load}); {self.what(frame)}"
        )

    def what(self, frame: Any) -> str:
        alive = [(p, cmd, t) for p, cmd, t in self.procs if p.poll() is None]
        if alive:
            now = time.monotonic()
            return "still running: " + "; ".join(
                f"`{cmd}` (pid {p.pid}, {now - t:.0f} s)" for p, cmd, t in alive
            )
        where = _test_frame(frame)
        return f"it was at {where}" if where else "no `grpo` process was running"

    def raise_timeout(self, signum: int, frame: Any) -> None:
        if self.fired.is_set() and not self.done.is_set():
            self.done.set()  # the watcher stops; the session goes on with the next test
            pytest.fail(self.message(frame), pytrace=False)


def _test_frame(frame: Any) -> str | None:
    """``tests/test_x.py:42 (function)`` of the innermost frame in the tests' own code."""
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        ours = path.parent == TESTS and path.name != Path(__file__).name
        if ours or path.name.startswith("test_"):
            where = f"tests/{path.name}" if ours else path.name
            return f"{where}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return None


_current: list[Budget] = []


def current() -> Budget | None:
    return _current[-1] if _current else None


def started(proc: subprocess.Popen[Any], args: list[str], allowance: float) -> subprocess.Popen[Any]:
    """Count ``proc`` (a `grpo ARGS` process) against the running test: ``allowance`` idle-machine seconds
    more for the test, and its name in the report should the test run past its limit."""
    budget = current()
    if budget is not None:
        budget.allowance += allowance
        budget.procs.append((proc, describe(args), time.monotonic()))
    return proc


def describe(args: list[str]) -> str:
    """``grpo sft --run …/run --max-steps 30``: the command as a user would type it, paths shortened."""
    words = list(args)
    if words[:2] == [sys.executable, "-m"] and words[2:3] == ["cli"]:
        words = ["grpo", *words[3:]]
    short = [("…/" + Path(w).name) if os.sep in w and len(w) > 40 else w for w in map(str, words)]
    return shlex.join(short)


# ---- pytest-timeout's hooks (tests/conftest.py) --------------------------------------------------
def set_timer(item: pytest.Item, settings: Any) -> bool | None:
    if settings.method != "signal":
        return None  # "thread" (--timeout-method): pytest-timeout's own
    if not settings.timeout or settings.timeout <= 0:
        return True
    budget = Budget(item.nodeid, settings.timeout)
    _current.append(budget)
    item._grpo_budget = (budget, signal.signal(signal.SIGALRM, budget.raise_timeout))  # type: ignore[attr-defined]
    budget.thread = threading.Thread(target=budget.watch, name="test-budget", daemon=True)
    budget.thread.start()
    return True


def cancel_timer(item: pytest.Item) -> bool | None:
    state = getattr(item, "_grpo_budget", None)
    if state is None:
        return None
    budget, previous = state
    budget.done.set()
    if budget.thread is not None:
        budget.thread.join(timeout=5 * TICK)  # no signal comes after the handler is gone
    signal.signal(signal.SIGALRM, previous)
    if budget in _current:
        _current.remove(budget)
    del item._grpo_budget  # type: ignore[attr-defined]
    return True
