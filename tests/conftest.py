"""Shared pytest fixtures. Keep this file small: one documented fixture per need.

The environment is made hermetic at import time: no hub access (``HF_HUB_OFFLINE=1``) and no
run directory picked up from the caller's ``GRPO_RUN``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import budget
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.pop("GRPO_RUN", None)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# pytest-xdist starts its workers with COLUMNS=80, which the product reads as a terminal's width (cli.common)
# and wraps its lines there: a worker sees the COLUMNS the controller had (none, in CI), as one pytest would.
if os.environ.get("PYTEST_XDIST_WORKER"):
    if os.environ.get("GRPO_TEST_COLUMNS"):
        os.environ["COLUMNS"] = os.environ["GRPO_TEST_COLUMNS"]
    else:
        os.environ.pop("COLUMNS", None)
else:
    os.environ["GRPO_TEST_COLUMNS"] = os.environ.get("COLUMNS", "")

# The per-test limit of a `slow` test (the others: `timeout` in pyproject.toml). The slowest, grpo killed
# twenty times then resumed: 600 s leaves room for a slower CI machine. A test
# that needs more says so with its own @pytest.mark.timeout. Limits count an idle machine's seconds, plus an
# allowance per `grpo` process the test starts (tests/budget.py).
SLOW_TIMEOUT = 600


def pytest_configure(config: pytest.Config) -> None:
    import terminal

    terminal._config.append(config)  # terminal.progress: a long test's lines on the terminal
    terminal.lend(config)  # under xdist: the workers' progress lines reach this terminal


def pytest_unconfigure(config: pytest.Config) -> None:
    import terminal

    terminal.close()


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """``<basetemp>/name``, made by ``build(path)`` once per test session: under pytest-xdist the workers
    share the session's base folder (each has its own ``popen-gwN`` inside it), and the first to get here
    builds while the others wait on a lock, then use its result. A build that failed is tried again."""
    import fcntl

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = tmp_path_factory.getbasetemp()
    root = root.parent if worker else root
    path, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
            build(path)
            done.touch()
    return path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))


def pytest_timeout_set_timer(item: pytest.Item, settings: object) -> bool | None:
    return budget.set_timer(item, settings)


def pytest_timeout_cancel_timer(item: pytest.Item) -> bool | None:
    return budget.cancel_timer(item)


@pytest.fixture
def runner():
    """An in-process ``typer.testing.CliRunner``; ``result.output`` holds stdout and stderr."""
    from typer.testing import CliRunner

    return CliRunner()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One random 2-layer Qwen3 + local BPE tokenizer (``--model tiny``), built once per session (~15 s)."""
    from cli.models.resolve import build_tiny
    from py_rewards.spec import get_spec

    spec = get_spec("seed000")
    built = built_once(tmp_path_factory, "tiny-model", lambda p: build_tiny(p / "tiny", spec, seed=3407))
    return built / "tiny"


@pytest.fixture
def tiny_run(tmp_path: Path, tiny_model_dir: Path) -> Path:
    """A fresh run directory whose ``base/tiny`` links to the session's tiny model (no rebuild)."""
    return _link_tiny(tmp_path / "run", tiny_model_dir)


def _link_tiny(run: Path, tiny_model_dir: Path) -> Path:
    """``run/base/tiny`` → the session's tiny model: `--model tiny` finds it without a rebuild."""
    (run / "base").mkdir(parents=True)
    (run / "base" / "tiny").symlink_to(tiny_model_dir, target_is_directory=True)
    return run


@pytest.fixture(scope="session")
def prepped_once(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """The real `grpo prep gsm8k --limit 64 --model tiny`, run once per session (tests use ``prepped``)."""
    from helpers import SAMPLES, invoke

    def prep(root: Path) -> None:
        run = _link_tiny(root / "run", tiny_model_dir)
        src = SAMPLES / "gsm8k_train.jsonl"
        result = invoke("prep", "gsm8k", "--source", src, "--limit", "64", "--model", "tiny", "--run", run)
        assert result.exit_code == 0, result.output
        assert (run / "data" / "train.parquet").is_file()

    return built_once(tmp_path_factory, "prepped-once", prep) / "run"


@pytest.fixture(scope="module")
def prepped(tmp_path_factory: pytest.TempPathFactory, prepped_once: Path) -> Path:
    """A run directory after `grpo prep gsm8k --limit 64 --model tiny`: each test module its own copy of the
    session's one prep (what a module's tests do to it stays in the module)."""
    run = tmp_path_factory.mktemp("prepped") / "run"
    shutil.copytree(prepped_once, run, symlinks=True)
    return run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's trained tiny run (helpers.make_run: SFT + GRPO adapters that answer in the format)."""
    from helpers import make_run

    return built_once(tmp_path_factory, "tiny-run", make_run)
