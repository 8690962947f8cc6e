"""A long test's progress on the terminal while it runs: the README chain and the kill-and-resume tests
took minutes each with nothing on the screen, which looks like a hang.

``make test`` runs tests/test_faults.py in a second pytest beside the rest, its output kept for the end;
that pytest gets ``GRPO_TEST_PROGRESS_FD`` (a descriptor of the terminal) and its progress lines go there
as they happen, marked with the shard's name.
"""

from __future__ import annotations

import os

import pytest

_config: list[pytest.Config] = []  # set by tests/conftest.py's pytest_configure


def progress(line: str) -> None:
    """Print ``  … line`` on the terminal now, through pytest's output capture (nothing outside pytest)."""
    fd = os.environ.get("GRPO_TEST_PROGRESS_FD", "").strip()
    if fd.isdigit():
        try:
            os.write(int(fd), f"  … [{os.environ.get('GRPO_TEST_SHARD', 'beside')}] {line}\n".encode())
            return
        except OSError:  # not open: fall back to pytest's terminal
            pass
    if not _config:
        return
    plugins = _config[-1].pluginmanager
    capture, terminal = plugins.get_plugin("capturemanager"), plugins.get_plugin("terminalreporter")
    if capture is None or terminal is None:
        return
    with capture.global_and_fixture_disabled():
        terminal.write_line(f"  … {line}")
        terminal.flush()
