"""`grpo` processes forked from one warm interpreter: the kill-and-resume tests start ~30 of them.

Each `grpo grpo --backend hf` start spent ~6.5 s of one idle core importing torch, transformers, peft, TRL
and datasets before its first line, and 15-40 s at load 4: that import was most of the kill tests' time,
and no kill lands in it (they wait for a line the command prints after it). A :class:`Zygote` imports that
stack once, as a `grpo` command would (``cpu.configure`` and ``lean.hide`` first, as ``cli.main.main``
does), then forks one child per command. The child is a whole `grpo` process of its own: its own pid,
killed with SIGKILL by the tests, its own open files, its exit code; it runs ``cli.main.main`` with the
command's arguments, and what it prints comes through a FIFO line by line as a subprocess's pipe would.

Only for commands whose first import is the stack above (the hf backend): Unsloth must be imported before
transformers, so an unsloth-backend command still needs a fresh interpreter (``helpers.start_cli``).

The protocol, on the zygote's stdin/stdout: the test writes one JSON line ``{"argv": [...], "out": FIFO}``;
the zygote forks and answers ``pid N``, then ``exit CODE`` (the child's exit status, ``-9`` when killed by
SIGKILL, as ``subprocess`` reports it) once the child ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

# What `grpo grpo/sft --backend hf` imports before its first line (`python -X importtime`, 2026-12-05).
WARM = ("torch", "transformers", "peft", "trl", "datasets", "pandas", "pyarrow.parquet", "matplotlib.pyplot")


def _serve() -> None:  # pragma: no cover - runs in the zygote process
    from cli.run import cpu, lean

    cpu.configure()  # before torch: OMP_WAIT_POLICY is read when libgomp loads
    lean.hide()
    import matplotlib

    matplotlib.use("Agg")
    for name in WARM:
        __import__(name)
    from trl import GRPOTrainer, SFTTrainer  # noqa: F401 - the trainers' modules, as the stages import them

    # Forking is safe only from a process with one thread: none of these imports may have started one.
    if threading.active_count() != 1:
        sys.stdout.write(f"error threads {[t.name for t in threading.enumerate()]}\n")
        sys.stdout.flush()
        return
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request["argv"], request["out"])
        sys.stdout.write(f"pid {pid}\n")
        sys.stdout.flush()
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        sys.stdout.write(f"exit {code}\n")
        sys.stdout.flush()


def _child(argv: list[str], out: str) -> None:  # pragma: no cover - runs in a forked child
    """Become `grpo ARGV`: stdout and stderr to the FIFO, stdin empty, exit as the command does."""
    code = 1
    try:
        fd = os.open(out, os.O_WRONLY)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.close(null)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - fd 0 lives as long as the process
        sys.argv = ["grpo", *argv]
        from cli.main import main

        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int | None):
                print(exc.code, file=sys.stderr)
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001, S110 - a closed stream: nothing left to flush
                pass
        os._exit(code)


class Child:
    """One forked `grpo` command, with the part of ``subprocess.Popen``'s interface the tests use."""

    def __init__(self, zygote: Zygote, argv: list[str]) -> None:
        self.zygote, self.args = zygote, ["grpo", *argv]
        self.returncode: int | None = None
        fifo = Path(tempfile.mkdtemp(prefix="grpo-child-")) / "out"
        os.mkfifo(fifo)
        zygote.send({"argv": argv, "out": str(fifo)})
        self.stdout = open(fifo, encoding="utf-8", errors="replace")  # noqa: SIM115 - closed in communicate
        self.pid = int(zygote.expect("pid"))
        fifo.unlink()
        fifo.parent.rmdir()

    def poll(self) -> int | None:
        return self.returncode if self.returncode is not None else (None if self._alive() else self.wait())

    def _alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        # A zombie (ended, not yet reaped by the zygote) still answers kill(0): ask /proc.
        state = Path(f"/proc/{self.pid}/stat")
        return not (state.exists() and state.read_text().rsplit(")", 1)[-1].split()[0] == "Z")

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = int(self.zygote.expect("exit"))
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        rest = self.stdout.read()
        self.stdout.close()
        self.wait()
        return rest, ""

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.returncode is None:
            self.kill()
            self.communicate()


class Zygote:
    """The warm interpreter (one per test module that asks for it); :meth:`start` forks a `grpo` command."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import zygote; zygote._serve()"],
            cwd=cwd, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        line = self._line()
        if line != "ready":
            self.close()
            raise RuntimeError(f"the zygote did not start: {line!r}")

    def _line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def send(self, request: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()

    def expect(self, word: str) -> str:
        line = self._line()
        head, _, value = line.partition(" ")
        if head != word:
            raise RuntimeError(f"zygote: expected {word!r}, got {line!r}")
        return value

    def start(self, argv: list[str]) -> Child:
        return Child(self, [str(a) for a in argv])

    def close(self) -> None:
        """End the zygote (its stdin closed: it leaves its loop) and close its pipes: an unclosed pipe is a
        ResourceWarning at garbage collection, an error under the suite's ``filterwarnings = error``."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
