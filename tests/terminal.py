"""A long test's progress on the terminal while it runs: the README chain and the kill-and-resume tests
took minutes each with nothing on the screen, which looks like a hang.

In one pytest process the lines go through pytest's terminal reporter, past its output capture. Under
pytest-xdist (``make test`` runs ``-n 2``) a worker has no terminal: the controller lends it one. Its
``pytest_configure`` (tests/conftest.py, :func:`lend`) duplicates the terminal's descriptor and names it in
``GRPO_TEST_PROGRESS_PATH`` (``/proc/<controller>/fd/<n>``, which the workers inherit and open for appending);
each line is marked with the worker's name.
"""

from __future__ import annotations

import os
from typing import IO

import pytest

_config: list[pytest.Config] = []  # set by tests/conftest.py's pytest_configure
_sink: list[IO[str]] = []  # a worker's handle on the controller's terminal, opened on first use

PATH_VAR = "GRPO_TEST_PROGRESS_PATH"


def lend(config: pytest.Config) -> None:
    """In the xdist controller: give the workers a path to this terminal (before they start)."""
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    if config.getoption("numprocesses", None) in (None, 0) or not os.path.isdir(f"/proc/{os.getpid()}/fd"):
        return
    capture = config.pluginmanager.get_plugin("capturemanager")
    if capture is None:
        return
    with capture.global_and_fixture_disabled():  # fd 1 is the terminal again inside this block
        fd = os.dup(1)
    os.environ[PATH_VAR] = f"/proc/{os.getpid()}/fd/{fd}"


def progress(line: str) -> None:
    """Print ``  … line`` on the terminal now, through pytest's output capture (nothing outside pytest)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    path = os.environ.get(PATH_VAR)
    if worker and path:
        try:
            if not _sink:
                _sink.append(open(path, "a", encoding="utf-8"))  # noqa: SIM115 - kept for the session
            _sink[0].write(f"  … [{worker}] {line}\n")
            _sink[0].flush()
            return
        except OSError:  # the controller is gone, or no /proc: stay quiet
            return
    if not _config:
        return
    plugins = _config[-1].pluginmanager
    capture, terminal = plugins.get_plugin("capturemanager"), plugins.get_plugin("terminalreporter")
    if capture is None or terminal is None:
        return
    with capture.global_and_fixture_disabled():
        terminal.write_line(f"  … {line}")
        terminal.flush()


def close() -> None:
    """A worker's handle, closed at the session's end (tests/conftest.py's pytest_unconfigure)."""
    while _sink:
        _sink.pop().close()
