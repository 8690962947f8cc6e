"""Shared pieces of every command: the error type, consoles, option aliases, error handling.

Every user-facing failure is a :class:`GrpoError`: the command prints one line to stderr and exits
with a non-zero code, never a traceback.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

# Piped into a log or CI, rich would squeeze tables into 80 columns ("arti…", "tens…"): give them
# room there; a terminal (or COLUMNS) keeps its own width.
_WIDTH = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160
console = Console(highlight=False, width=_WIDTH)
err_console = Console(stderr=True, highlight=False, width=_WIDTH)

DEFAULT_RUN = Path(os.environ.get("GRPO_RUN", "runs/default"))

F = TypeVar("F", bound=Callable[..., Any])


class GrpoError(Exception):
    """A failure the user can act on; printed as one line, exit code ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = 2) -> None:
    """Print ``error: message`` to stderr and exit with ``code``."""
    from rich.markup import escape

    # Escaped: messages hold paths and hints like 'grpo[train]' that rich would read as markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def handle_errors(fn: F) -> F:
    """Turn expected failures into one clear line and a non-zero exit."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from cli import quiet

        # Library warnings, log lines and foreign progress bars go to <run>/logs/grpo.log (--verbose: here).
        undo = quiet.install(kwargs.get("run"), fn.__name__.rstrip("_"))
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except GrpoError as exc:
            fail(str(exc), exc.code)
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(130) from None
        except (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError) as exc:
            fail(f"{exc.strerror or exc}: {exc.filename}" if getattr(exc, "filename", None) else str(exc))
        except (ValueError, TypeError) as exc:
            if os.environ.get("GRPO_DEBUG"):
                raise
            fail(str(exc))
        except ImportError as exc:
            missing = getattr(exc, "name", None) or str(exc)
            fail(f"missing dependency {missing!r}: {exc}. "
                 "Install the training extra: pip install 'grpo[train]'")
        except MemoryError:
            fail("out of memory: lower --gens, --max-completion-length or the batch size")
        except Exception as exc:  # noqa: BLE001 - last line of defence: one line, details on request
            if os.environ.get("GRPO_DEBUG"):
                raise
            # torch.OutOfMemoryError and friends carry their own message.
            name = type(exc).__name__
            hint = " (set GRPO_DEBUG=1 for the traceback)"
            if "OutOfMemory" in name:
                hint = (" — lower --gens, --max-completion-length or the batch size; "
                        "see README 'Troubleshooting'")
            fail(f"{name}: {str(exc).strip().splitlines()[0] if str(exc).strip() else name}{hint}")
        finally:
            undo()
            from cli.rundir import release_locks

            release_locks()
        return None

    return wrapper  # type: ignore[return-value]


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
    typer.Option("--config", help="YAML config file; flags given on the command line override it.",
                 rich_help_panel=RUN_PANEL),
]
DryRunOpt = Annotated[
    bool,
    typer.Option("--dry-run", help="Print the fully resolved config and exit.", rich_help_panel=RUN_PANEL),
]
PresetOpt = Annotated[
    str | None,
    typer.Option("--preset", help="Seed preset: qwen3-4b (seed 000), llama3.2-3b (001), qwen3-8b (003).",
                 rich_help_panel=RUN_PANEL),
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="HF id or local path; 'tiny' (random 2-layer Qwen3, CPU smoke runs) or "
                 "'gemma3-270m' (offline from PyPI). Remembered by the run.", rich_help_panel="Model"),
]
BackendOpt = Annotated[
    str | None,
    typer.Option("--backend", help="unsloth (default when importable) or hf (transformers + peft + TRL).",
                 rich_help_panel="Model"),
]

