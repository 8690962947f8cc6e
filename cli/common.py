"""Shared pieces of every command: the error type, consoles, option aliases.

Every user-facing failure is a :class:`GrpoError`: the command prints one line to stderr and exits
with a non-zero code, never a traceback (:func:`cli.errors.handle_errors`).
"""

from __future__ import annotations

import importlib
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

# Piped into a log or CI, rich would squeeze tables into 80 columns ("arti…", "tens…"): give them
# room there; a terminal (or COLUMNS) keeps its own width.
_WIDTH = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
console = Console(highlight=False, width=_WIDTH)
err_console = Console(stderr=True, highlight=False, width=_WIDTH)

DEFAULT_RUN = Path(os.environ.get("GRPO_RUN", "runs/default"))


class GrpoError(Exception):
    """A failure the user can act on; printed as one line, exit code ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def finite(x: object) -> float | None:
    """A metrics value as a finite float, else None (text, None, nan, inf)."""
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ---- option aliases shared by every command -------------------------------------------------
RUN_PANEL = "Run"
RunOpt = Annotated[
    Path,
    typer.Option(
        "--run",
        help="Run directory: every stage reads the previous stage's output here and writes its own.",
        rich_help_panel=RUN_PANEL,
        envvar="GRPO_RUN",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="YAML config file; flags given on the command line override it.",
        rich_help_panel=RUN_PANEL,
    ),
]
DryRunOpt = Annotated[
    bool,
    typer.Option("--dry-run", help="Print the fully resolved config and exit.", rich_help_panel=RUN_PANEL),
]
PresetOpt = Annotated[
    str | None,
    typer.Option(
        "--preset",
        help="Seed preset: qwen3-4b (seed 000), llama3.2-3b (001), qwen3-8b (003); or cpu (a small model on "
        "2 CPU cores, with --model).",
        rich_help_panel=RUN_PANEL,
    ),
]


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A package's ``__getattr__`` (PEP 562) for the names its ``__all__`` exports to tools (bench scripts).

    ``exports`` maps a public name to ``"module"`` (the same name in that submodule), ``"module:attribute"``,
    or ``"module:"`` (the submodule itself); the submodule is imported only when the name is first used, so
    importing the package stays as cheap as before. A rename inside the package fails ``make lint``
    (tools/check_bench.py resolves every name a bench script imports) instead of a bench run.
    """

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, colon, attribute = exports[name].partition(":")
        loaded = importlib.import_module(f"{package}.{module}")
        return loaded if colon and not attribute else getattr(loaded, attribute or name)

    return __getattr__
