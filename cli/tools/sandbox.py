"""Run the model's Python in pydantic-monty's interpreter, one fresh session per call.

pydantic-monty (the Pydantic team's Python interpreter in Rust, built for code LLMs write) runs each
snippet in a worker subprocess of a pool: a crash kills a worker, never us, and the pool replaces it.
Inside, code has no filesystem, network, process or environment access (none is granted here), and
each call is bounded in time, heap and recursion depth. What the model reads back is what a notebook
cell shows: the printed output, then the repr of a trailing expression, cut at ``max_output_chars``.
Every failure is one ``Error: <Kind>: <message>`` line (docs/tools.md "Sandbox").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_monty import Monty, MontyError

# Seconds the pool waits past the time limit before it kills a worker the interpreter could not stop
# itself (a long builtin between two checkpoints); the request deadline is the last backstop.
GRACE_S = 0.5
KINDS = ("ok", "error", "timeout", "memory", "output", "crash")
# No sleeping: time.sleep() returns at once, so a sleep cannot hold a worker outside the time limit.
_OS_POLICY: dict[str, Any] = {"sleep": "zero"}


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 2.0  # wall time per call
    memory_mb: int = 64  # heap per call
    max_recursion: int = 200
    max_output_chars: int = 2000  # what goes back to the model is cut (with a note) past this

    @property
    def collect_bytes(self) -> int:
        """Printed bytes a call may produce before it is stopped: well past the cut, and past the worker's
        16 KiB print chunks, so the start of the output is there to show."""
        return 4 * self.max_output_chars + 65_537  # odd: never equal to the heap limit (see _classify)


@dataclass(frozen=True)
class ToolOutcome:
    text: str  # what the model sees: output (+ repr of a last expression), or one "Error: ..." line
    kind: str  # one of KINDS
    seconds: float

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


class ToolStats:
    """Counts of tool calls since the last reset; thread-safe (TRL may call tools from threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = self._zero()

    @staticmethod
    def _zero() -> dict[str, float]:
        keys = ("calls", "errors", "timeouts", "memory", "seconds")
        return {f"tools/{k}": 0.0 for k in keys}

    def record(self, outcome: ToolOutcome) -> None:
        with self._lock:
            c = self._counts
            c["tools/calls"] += 1
            c["tools/errors"] += outcome.kind != "ok"
            c["tools/timeouts"] += outcome.kind == "timeout"
            c["tools/memory"] += outcome.kind == "memory"
            c["tools/seconds"] += outcome.seconds

    def snapshot(self, reset: bool = True) -> dict[str, float]:
        """{"tools/calls", "tools/errors", "tools/timeouts", "tools/memory", "tools/seconds"} since the last
        reset; an error is every call whose kind is not "ok" (timeouts and memory stops included)."""
        with self._lock:
            out = dict(self._counts)
            if reset:
                self._counts = self._zero()
        return out


class PythonSandbox:
    """A pool of monty workers, started on the first call; a context manager. ``close()`` stops every
    worker (a later ``run`` starts a fresh pool). ``run`` never raises because of the code it runs."""

    def __init__(
        self, limits: SandboxLimits = SandboxLimits(), stats: ToolStats | None = None, *, workers: int = 1
    ) -> None:
        self.limits, self.stats = limits, stats
        self.workers = max(1, workers)  # calls run in parallel up to this many (one worker process each)
        self._pool: Monty | None = None
        self._lock = threading.Lock()
        self._seen: set[int] = set()
        self._monty_limits: dict[str, Any] = {
            "max_feed_duration_secs": limits.timeout_s,
            "max_memory": limits.memory_mb * 2**20,
            "max_recursion_depth": limits.max_recursion,
        }

    def __enter__(self) -> PythonSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def worker_pids(self) -> list[int]:
        """The live worker processes this sandbox has run code in (for tests and the benchmark)."""
        import psutil

        children = {p.pid: p for p in psutil.Process().children()}
        return sorted(pid for pid in self._seen if pid in children and _is_monty(children[pid]))

    def start(self) -> None:
        """Start the pool and warm a worker with one uncounted call, so that the first counted call does not
        pay the start (tens of ms: over 2 % of a tiny CPU training step). Optional: ``run`` starts lazily."""
        self._execute("pass")

    def run(self, code: str) -> ToolOutcome:
        t0 = time.perf_counter()
        kind, text = self._execute(code)
        outcome = ToolOutcome(text=text, kind=kind, seconds=time.perf_counter() - t0)
        if self.stats is not None:
            self.stats.record(outcome)
        return outcome

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            try:
                pool.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 - a broken pool is being thrown away anyway
                pass

    def _started(self) -> Monty:
        from pydantic_monty import Monty

        with self._lock:
            if self._pool is None:
                pool = Monty(
                    min_processes=1,
                    max_processes=self.workers,
                    request_timeout=self.limits.timeout_s + 4 * GRACE_S,
                    feed_duration_limit_grace=GRACE_S,
                    turn_duration_limit_grace=GRACE_S,
                )
                pool.__enter__()
                self._pool = pool
            return self._pool

    def _execute(self, code: str) -> tuple[str, str]:
        from pydantic_monty import CollectString, MontyCrashedError, MontyError

        if not isinstance(code, str):
            return "error", f"Error: TypeError: code must be a string, not {type(code).__name__}"
        collector = CollectString(max_bytes=self.limits.collect_bytes)
        try:
            pool = self._started()
            with pool.checkout(limits=self._monty_limits, os_policy=_OS_POLICY) as session:  # type: ignore[arg-type]
                if (pid := session.worker_pid) is not None:
                    self._seen.add(pid)
                value = session.feed_run(code, print_callback=collector)
        except MontyCrashedError as e:
            if e.timed_out:
                return "timeout", self._timeout_text()
            return "crash", "Error: Crash: the interpreter stopped; the sandbox was restarted"
        except MontyError as e:
            return self._classify(e, collector.output)
        except Exception as e:  # noqa: BLE001 - our side failed (not the code): start afresh next call
            self.close()
            return "crash", f"Error: Crash: the sandbox failed ({type(e).__name__}); it was restarted"
        return self._shown(collector.output, value)

    def _timeout_text(self) -> str:
        return f"Error: TimeoutError: the code ran past the {self.limits.timeout_s:g} s limit"

    def _classify(self, e: MontyError, printed: str) -> tuple[str, str]:
        inner = e.exception()
        name = type(inner).__name__
        message = str(inner)
        if name == "TimeoutError":
            return "timeout", self._timeout_text()
        if name == "MemoryError" and message.endswith(f"> {self.limits.collect_bytes} bytes"):
            # the print collector's cap, not the heap: too much output; show its start, like a long cut
            text, _ = self._cut(printed, total=None)
            return "output", text
        line = _last_line(e)
        where = f" (line {line})" if line else ""
        text = f"Error: {name}: {message}{where}" if message else f"Error: {name}{where}"
        return ("memory" if name == "MemoryError" else "error"), self._cut(text, total=len(text))[0]

    def _shown(self, printed: str, value: object) -> tuple[str, str]:
        text = printed
        if value is not None:
            try:
                shown = repr(value)
            except Exception as e:  # noqa: BLE001 - e.g. an int past Python's 4300-digit str limit
                return "error", f"Error: {type(e).__name__}: {e}"[: self.limits.max_output_chars]
            text = f"{text}\n{shown}" if text and not text.endswith("\n") else text + shown
        text = text.rstrip("\n")
        if not text:
            return "ok", "(no output: print() the values you need, or end with an expression)"
        cut, was_cut = self._cut(text, total=len(text))
        return ("output" if was_cut else "ok"), cut

    def _cut(self, text: str, total: int | None) -> tuple[str, bool]:
        """``text`` cut at max_output_chars with a note; ``total`` None means the run was stopped."""
        n = self.limits.max_output_chars
        if total is not None and len(text) <= n:
            return text, False
        of = f" of {total:,}" if total is not None else "; the code was stopped for printing too much"
        return f"{text[:n]}\n... (output cut at {n:,} characters{of})", True


def _last_line(e: MontyError) -> int | None:
    frames = getattr(e, "traceback", None)
    try:
        stack = frames() if frames is not None else []
    except Exception:  # noqa: BLE001 - a traceback is a nicety
        return None
    return stack[-1].line if stack else None


def _is_monty(p: Any) -> bool:
    try:
        return "monty" in " ".join(p.cmdline()[:2])
    except Exception:  # noqa: BLE001 - a process that just ended
        return False


_DOC = """Run Python code in a sandbox and return what it printed, then the value of a last expression.

Use it for arithmetic and small computations; each call starts fresh, no variable is kept between calls.
Modules math, decimal, itertools, collections, re, json and random work; files, network, processes do not.
Limits per call: {t:g} s, {m} MB, recursion depth {r}, {o} characters of output.
A failure comes back as one line starting with "Error:".

Args:
    code: The Python source to run, e.g. "print(48 / 2)".
"""


def python_tool(sandbox: PythonSandbox) -> Callable[[str], str]:
    """The tool as TRL's ``tools=[...]`` and transformers' chat templates want it: a function named
    ``python``, typed ``(code: str) -> str``, whose docstring (with this sandbox's limits) is the schema.
    Starts the sandbox (:meth:`PythonSandbox.start`)."""

    def python(code: str) -> str:
        return sandbox.run(code).text

    sandbox.start()  # the tool is about to be used (a trainer, an eval): start its worker now, not in a step

    limits = sandbox.limits
    python.__doc__ = _DOC.format(
        t=limits.timeout_s, m=limits.memory_mb, r=limits.max_recursion, o=limits.max_output_chars
    )
    return python
