"""The model's Python tool (cli/tools/): hostile programs never reach the host, output is shown and cut.

The fault test feeds the real pydantic-monty sandbox what a model could write to hurt the machine it
trains on: file reads, writes and deletes, os / subprocess / socket / ctypes, a fork bomb, an infinite
loop, a 10 GB allocation, 10**6-deep recursion, 100 MB of output, /proc and environment reads and
interpreter escapes (sys.modules, __import__, builtins, eval/exec, __subclasses__, frames). Each must
end as ONE counted tool error, the next call must still work, a marker file outside stays byte for byte,
no file appears, and closing the sandbox leaves no process behind. Small limits keep it fast.
docs/tools.md "Sandbox" cites this file for what the sandbox allows and denies.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import psutil
import pytest

from cli.tools import PythonSandbox, SandboxLimits, ToolOutcome, ToolStats, python_tool

LIMITS = SandboxLimits(timeout_s=0.3, memory_mb=16, max_recursion=100, max_output_chars=200)
MARKER_TEXT = "the host's own file: must stay as it is\n"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside the sandbox holding a marker file the hostile programs aim at."""
    d = tmp_path_factory.mktemp("host")
    (d / "marker.txt").write_text(MARKER_TEXT)
    return d


@pytest.fixture(scope="module")
def sandbox() -> Iterator[PythonSandbox]:
    with PythonSandbox(LIMITS, ToolStats()) as sb:
        yield sb


def hostile(marker: str, new: str) -> dict[str, str]:
    """name -> program; ``marker`` is the host file to read, change or delete, ``new`` a file to create."""
    return {
        # files
        "read the marker": f"open({marker!r}).read()",
        "read /etc/passwd": "print(open('/etc/passwd').read())",
        "read through pathlib": f"from pathlib import Path\nPath({marker!r}).read_text()",
        "write a new file": f"open({new!r}, 'w').write('x')",
        "write through pathlib": f"from pathlib import Path\nPath({new!r}).write_text('x')",
        "overwrite the marker": f"open({marker!r}, 'w').write('pwned')",
        "append to the marker": f"open({marker!r}, 'a').write('pwned')",
        "delete the marker": f"import os\nos.remove({marker!r})",
        "unlink through pathlib": f"from pathlib import Path\nPath({marker!r}).unlink()",
        "rename the marker": f"import os\nos.rename({marker!r}, {new!r})",
        "make a directory": f"import os\nos.mkdir({new!r})",
        "list the root": "import os\nos.listdir('/')",
        "read /dev/zero": "open('/dev/zero', 'rb').read()",
        # os, subprocess, socket, ctypes
        "os.system": f"import os\nos.system('touch {new}')",
        "os.popen": "import os\nos.popen('id').read()",
        "os.kill the parent": "import os\nos.kill(os.getppid(), 9)",
        "subprocess": f"import subprocess\nsubprocess.run(['touch', {new!r}])",
        "socket": "import socket\nsocket.create_connection(('127.0.0.1', 22))",
        "urllib": "import urllib.request\nurllib.request.urlopen('http://127.0.0.1')",
        "ctypes": "import ctypes\nctypes.CDLL(None).system(b'id')",
        "signal": "import signal\nsignal.alarm(1)",
        "threading": "import threading\nthreading.Thread(target=print).start()",
        "multiprocessing": "import multiprocessing\nmultiprocessing.Process(target=print).start()",
        # processes, time, memory, recursion
        "fork bomb": "import os\nwhile True:\n    os.fork()",
        "infinite loop": "while True:\n    pass",
        "loop that swallows its timeout": "while True:\n    try:\n        while True:\n            pass\n"
        "    except BaseException:\n        pass",
        "one long builtin": "sum(range(10**12))",
        "10 GB allocation": "x = b'\\0' * (10 * 2**30)",
        "10 GB list": "x = [0] * (10 * 2**30 // 8)",
        "doubling list": "x = [1]\nwhile True:\n    x = x + x",
        "10**6-deep recursion": "def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\nf(10**6)",
        "mutual recursion": "def a(n):\n    return b(n + 1)\ndef b(n):\n    return a(n + 1)\na(0)",
        "raise the recursion limit": "import sys\nsys.setrecursionlimit(10**6)",
        "huge integer": "10 ** (10**9)",
        "100 MB in one print": "print('x' * (100 * 2**20))",
        "100 MB in many prints": "for _ in range(100 * 2**10):\n    print('x' * 1023)",
        # /proc and the environment
        "read /proc/self/environ": "open('/proc/self/environ').read()",
        "read /proc/self/maps": "from pathlib import Path\nPath('/proc/self/maps').read_text()",
        "list /proc": "import os\nos.listdir('/proc')",
        "os.environ": "import os\nos.environ['HOME']",
        "os.getenv": "import os\nos.getenv('PATH')",
        # escapes from the interpreter
        "sys.modules": "import sys\nsys.modules['os'].system('id')",
        "__import__": "__import__('os').system('id')",
        "import builtins": f"import builtins\nbuiltins.open({marker!r}).read()",
        "__builtins__": f"__builtins__['open']({marker!r}).read()",
        "globals()": "globals()['__builtins__']",
        "importlib": "import importlib\nimportlib.import_module('os').system('id')",
        "eval nesting": f"eval(\"__import__('os').remove({marker!r})\")",
        "exec nesting": f'exec("import os\\nos.remove({marker!r})")',
        "exec in exec": f"exec(\"exec(\\\"open({marker!r}, 'w').write('x')\\\")\")",
        "compile": "exec(compile('1', 'x', 'exec'))",
        "__subclasses__": "().__class__.__bases__[0].__subclasses__()",
        "object subclasses": "object.__subclasses__()",
        "type mro": "type(()).__mro__",
        "function globals": "(lambda: 0).__globals__",
        "generator frame": "(x for x in []).gi_frame.f_globals",
        "getattr dunder": "getattr(1, '__class__')",
        "class dict": "class A:\n    pass\nA.__dict__",
        "breakpoint": "breakpoint()",
        "input": "input()",
        "sys.exit": "import sys\nsys.exit(1)",
        "raise SystemExit": "raise SystemExit(0)",
        "raise KeyboardInterrupt": "raise KeyboardInterrupt",
        "install a package (PEP 723)": "# /// script\n# dependencies = ['requests']\n# ///\nimport requests",
    }


PROGRAMS = sorted(hostile("M", "N"))


@pytest.mark.parametrize("name", PROGRAMS)
def test_hostile_program_is_one_counted_error(name: str, sandbox: PythonSandbox, host: Path) -> None:
    marker, new = host / "marker.txt", host / "created"
    code = hostile(str(marker), str(new))[name]
    assert sandbox.stats is not None
    sandbox.stats.snapshot(reset=True)
    before = sorted(p.name for p in host.iterdir())

    outcome = sandbox.run(code)

    assert outcome.kind != "ok", f"{name}: {outcome.text!r}"
    assert outcome.text.startswith("Error: ") or "output cut" in outcome.text, outcome.text
    assert "Traceback" not in outcome.text and "/site-packages/" not in outcome.text
    assert len(outcome.text) <= LIMITS.max_output_chars + 100
    assert outcome.seconds < LIMITS.timeout_s + 3
    counts = sandbox.stats.snapshot(reset=True)
    assert counts["tools/calls"] == 1 and counts["tools/errors"] == 1, counts
    # the host is unchanged and the sandbox still answers
    assert marker.read_text() == MARKER_TEXT
    assert sorted(p.name for p in host.iterdir()) == before
    assert not new.exists()
    assert sandbox.run("print(6 * 7)").text == "42"


def test_limits_are_counted_by_kind(sandbox: PythonSandbox) -> None:
    assert sandbox.stats is not None
    sandbox.stats.snapshot(reset=True)
    kinds = [sandbox.run(code).kind for code in ("while True:\n    pass", "x = [0] * 10**10", "1/0", "1 + 1")]
    assert kinds == ["timeout", "memory", "error", "ok"]
    counts = sandbox.stats.snapshot(reset=False)
    assert (counts["tools/calls"], counts["tools/errors"]) == (4, 3)
    assert (counts["tools/timeouts"], counts["tools/memory"]) == (1, 1)
    assert counts["tools/seconds"] >= LIMITS.timeout_s
    assert sandbox.stats.snapshot(reset=True) == counts  # reset=False kept them
    assert sandbox.stats.snapshot()["tools/calls"] == 0


def test_a_killed_worker_is_one_crash_and_is_replaced() -> None:
    stats = ToolStats()
    with PythonSandbox(SandboxLimits(timeout_s=5.0), stats) as sb:
        assert sb.run("1").text == "1"
        (pid,) = sb.worker_pids()
        threading.Timer(0.2, lambda: psutil.Process(pid).kill()).start()
        outcome = sb.run("while True:\n    pass")
        assert outcome.kind == "crash" and outcome.text.startswith("Error: Crash"), outcome
        assert outcome.seconds < 3
        assert sb.run("print(2 + 2)").text == "4"
        assert pid not in sb.worker_pids()
    assert stats.snapshot()["tools/errors"] == 1


def living(pids: Iterable[int]) -> list[int]:
    """The processes of ``pids`` still running (a zombie waiting for its parent is not running)."""
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def own_processes() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_close_leaves_no_process(host: Path) -> None:
    before = own_processes()
    with PythonSandbox(LIMITS, workers=2) as sb:
        codes = ["import os\nwhile True:\n    os.fork()", "while True:\n    pass", "sum(range(10**12))"]
        threads = [threading.Thread(target=sb.run, args=(c,)) for c in codes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        workers = set(sb.worker_pids())
        assert 1 <= len(workers) <= 2
        # only the workers: nothing they started
        assert own_processes() - before == workers
    deadline = time.monotonic() + 5
    while own_processes() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert own_processes() - before == set()
    assert living(workers) == []


def test_a_killed_host_leaves_no_worker() -> None:
    """SIGKILL of the process that owns the sandbox (a trainer killed mid-call): an idle worker ends with its
    pipe, a busy one at its own time limit; none outlives it for long."""
    import subprocess
    import sys

    code = (
        "from cli.tools import PythonSandbox, SandboxLimits\n"
        "sb = PythonSandbox(SandboxLimits(timeout_s=0.5), workers=2)\n"
        "print(sb.run('1').text, flush=True)\n"
        "sb.run('while True:\\n    pass')\n"
    )
    host = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert host.stdout is not None and host.stdout.readline().strip() == "1"
    time.sleep(0.2)  # the loop is running
    workers = [p.pid for p in psutil.Process(host.pid).children(recursive=True)]
    assert workers
    host.kill()
    host.communicate()  # and its pipe closed
    deadline = time.monotonic() + LIMITS.timeout_s + 5
    alive = workers
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [
            p for p in workers if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
        ]
    assert alive == []


def test_run_after_close_starts_afresh() -> None:
    sb = PythonSandbox(LIMITS)
    assert sb.run("1 + 1").text == "2"
    sb.close()
    assert sb.worker_pids() == []
    assert sb.run("2 + 2").text == "4"  # a new pool, lazily
    sb.close()
    sb.close()  # twice is harmless


def test_sleep_does_not_hold_a_worker(sandbox: PythonSandbox) -> None:
    t0 = time.perf_counter()
    assert sandbox.run("import time\ntime.sleep(3600)\nprint('awake')").text == "awake"
    assert time.perf_counter() - t0 < 1


@pytest.mark.parametrize(
    ("code", "text"),
    [
        ("print(48 / 2)", "24.0"),
        ("48 / 2", "24.0"),
        ("print('a')\n1 + 1", "a\n2"),
        ("print('a', end='')\n[1, 2]", "a\n[1, 2]"),
        ("x = 5\nx * 3", "15"),
        ("import math\nprint(math.comb(5, 2), math.sqrt(16))", "10 4.0"),
        ("'text'", "'text'"),
        ("print(1)\nNone", "1"),
        ("x = 1", "(no output: print() the values you need, or end with an expression)"),
        ("from decimal import Decimal\nDecimal('1.10') * 3", "Decimal('3.30')"),
        ("import itertools\nlist(itertools.permutations('ab'))", "[('a', 'b'), ('b', 'a')]"),
    ],
)
def test_output_is_prints_then_the_last_value(sandbox: PythonSandbox, code: str, text: str) -> None:
    outcome = sandbox.run(code)
    assert (outcome.kind, outcome.text) == ("ok", text)


def test_calls_share_no_state(sandbox: PythonSandbox) -> None:
    assert sandbox.run("secret = 41").kind == "ok"
    assert sandbox.run("secret + 1").text.startswith("Error: NameError")


def test_errors_are_one_readable_line(sandbox: PythonSandbox) -> None:
    cases = {
        "x = 1\ny = 2\nz": "Error: NameError: name 'z' is not defined (line 3)",
        "1 / 0": "Error: ZeroDivisionError: division by zero (line 1)",
        "while True:\n    pass": f"Error: TimeoutError: the code ran past the {LIMITS.timeout_s:g} s limit",
    }
    for code, text in cases.items():
        assert sandbox.run(code).text == text
    syntax = sandbox.run("def (")
    assert syntax.kind == "error" and syntax.text.startswith("Error: SyntaxError: ")
    assert "\n" not in syntax.text
    assert sandbox.run(None).text.startswith("Error: TypeError")  # type: ignore[arg-type]


def test_long_output_is_cut_with_a_note(sandbox: PythonSandbox) -> None:
    n = LIMITS.max_output_chars
    exact = sandbox.run(f"print('y' * {n})")
    assert (exact.kind, exact.text) == ("ok", "y" * n)
    long = sandbox.run(f"print('y' * {n + 50})")
    assert long.kind == "output"
    assert long.text == "y" * n + f"\n... (output cut at {n} characters of {n + 50})"
    flood = sandbox.run("i = 0\nwhile True:\n    print(i)\n    i += 1")
    assert flood.kind == "output" and flood.text.startswith("0\n1\n2\n")
    assert flood.text.endswith("the code was stopped for printing too much)")
    assert len(flood.text) < n + 80


def test_python_tool_is_a_documented_function(sandbox: PythonSandbox) -> None:
    from transformers.utils import get_json_schema

    tool = python_tool(sandbox)
    assert tool.__name__ == "python" and tool("print(6 * 7)") == "42"
    schema = get_json_schema(tool)["function"]
    assert schema["name"] == "python"
    assert schema["parameters"]["required"] == ["code"]
    assert schema["parameters"]["properties"]["code"]["type"] == "string"
    assert "0.3 s, 16 MB" in schema["description"]  # this sandbox's limits, not a default's


def test_python_tool_starts_the_sandbox_uncounted() -> None:
    stats = ToolStats()
    with PythonSandbox(LIMITS, stats) as sb:
        tool = python_tool(sb)  # a trainer builds it before its first step: the worker starts here
        assert len(sb.worker_pids()) == 1 and stats.snapshot(reset=False)["tools/calls"] == 0
        assert tool("1 + 1") == "2"
        assert stats.snapshot()["tools/calls"] == 1


def test_outcome_and_limits_are_values() -> None:
    assert ToolOutcome("1", "ok", 0.0).ok and not ToolOutcome("Error: x", "error", 0.0).ok
    default = SandboxLimits(timeout_s=2.0, memory_mb=64, max_recursion=200, max_output_chars=2000)
    assert SandboxLimits() == default
