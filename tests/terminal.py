"""A long test's progress on the terminal while it runs: the README chain and the kill-and-resume tests
took minutes each with nothing on the screen, which looks like a hang."""

from __future__ import annotations

import pytest

_config: list[pytest.Config] = []  # set by tests/conftest.py's pytest_configure


def progress(line: str) -> None:
    """Print ``  … line`` on the terminal now, through pytest's output capture (nothing outside pytest)."""
    if not _config:
        return
    plugins = _config[-1].pluginmanager
    capture, terminal = plugins.get_plugin("capturemanager"), plugins.get_plugin("terminalreporter")
    if capture is None or terminal is None:
        return
    with capture.global_and_fixture_disabled():
        terminal.write_line(f"  … {line}")
        terminal.flush()
