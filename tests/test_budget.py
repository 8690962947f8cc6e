"""tests/budget.py: test limits count an idle machine's seconds and what a test starts; one line when passed.

Each case runs a small test file in its own pytest process (pytester), under the same hooks as this suite's
conftest.py, with the machine's load replaced by a fixed figure where the case is about load.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import budget

RATE = None  # (idle-machine seconds per wall second, load average) to pretend, or the machine's own

if RATE is not None:
    budget.machine_rate = lambda: RATE

def pytest_timeout_set_timer(item, settings):
    return budget.set_timer(item, settings)

def pytest_timeout_cancel_timer(item):
    return budget.cancel_timer(item)
"""


def _run(pytester: pytest.Pytester, body: str, rate: tuple[float, float] | None = None) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST.replace("RATE = None", f"RATE = {rate!r}"))
    pytester.makepyfile(test_case=body)
    return pytester.runpytest_subprocess("--timeout-method=signal", "-q", "-rf")


def test_a_test_past_its_limit_fails_with_one_line(pytester: pytest.Pytester) -> None:
    result = _run(
        pytester,
        """
import time, pytest

@pytest.mark.timeout(1)
def test_hangs():
    time.sleep(60)
""",
    )
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "test_case.py::test_hangs ran past its limit of 1 s (idle-machine seconds:" in out
    assert "it was at test_case.py:5 (test_hangs)" in out  # where the test was when stopped
    assert "Timeout" not in out and "Thread" not in out and "File " not in out  # no stack dumps


def test_load_stretches_the_limit(pytester: pytest.Pytester) -> None:
    # At a quarter of an idle machine's pace, 2 s of wall time count 0.5 s: a 1 s limit is not reached.
    result = _run(
        pytester,
        """
import time, pytest

@pytest.mark.timeout(1)
def test_slow_because_busy():
    time.sleep(2)
""",
        rate=(0.25, 8.0),
    )
    result.assert_outcomes(passed=1)


def test_each_started_process_adds_its_allowance_and_is_named(pytester: pytest.Pytester) -> None:
    result = _run(
        pytester,
        """
import subprocess, sys, time, pytest
import budget

@pytest.mark.timeout(1)
def test_starts_two():
    quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2)"])
    budget.started(quick, ["grpo", "sft", "--max-steps", "1"], allowance=2)  # 1 + 2 s: this one fits
    quick.wait()
    stuck = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    budget.started(stuck, ["grpo", "export", "--lora"], allowance=1)
    try:
        stuck.wait()
    finally:
        stuck.kill()
""",
        rate=(1.0, 0.5),
    )
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "ran past its limit of 1 s + 3 s for the 2 `grpo` processes it started" in out
    assert (
        "still running: `grpo export --lora` (pid" in out and "grpo sft" not in out.split("still running")[1]
    )
