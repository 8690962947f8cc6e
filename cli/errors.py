"""How a command fails: one ``error:`` line on stderr and a non-zero exit, never a traceback.

Every command is wrapped in :func:`handle_errors`: library chatter goes to ``<run>/logs/grpo.log``
(:mod:`cli.run.quiet`), expected failures (:class:`~cli.common.GrpoError`, missing files, missing packages,
out of memory) become one line, and the run directory's lock is released whatever happens.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer

from cli.common import GrpoError, err_console

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` to stderr and exit with ``code``."""
    from rich.markup import escape

    # Escaped: messages hold paths and hints like 'grpo[train]' that rich would read as markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def handle_errors(fn: F) -> F:
    """Turn expected failures into one clear line and a non-zero exit."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from cli.run import quiet

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
            fail(
                f"missing dependency {missing!r}: {exc}. "
                "Install the training extra: pip install 'grpo[train]'"
            )
        except MemoryError:
            fail("out of memory: lower --gens, --max-completion-length or the batch size")
        except Exception as exc:  # noqa: BLE001 - last line of defence: one line, details on request
            if os.environ.get("GRPO_DEBUG"):
                raise
            # torch.OutOfMemoryError and friends carry their own message.
            name = type(exc).__name__
            hint = " (set GRPO_DEBUG=1 for the traceback)"
            if "OutOfMemory" in name:
                hint = (
                    " — lower --gens, --max-completion-length or the batch size; see README 'Troubleshooting'"
                )
            fail(f"{name}: {str(exc).strip().splitlines()[0] if str(exc).strip() else name}{hint}")
        finally:
            undo()
            from cli.run.lock import release_locks

            release_locks()
        return None

    return wrapper  # type: ignore[return-value]
