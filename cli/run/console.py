"""Consoles for training output: one line per step, never hard-wrapped at 80 columns in logs and CI."""

from __future__ import annotations

from rich.console import Console

from cli.run.ranks import is_main

# Under `grpo grpo --gpus N` only global rank 0 talks; the other ranks train silently.
_quiet = not is_main()
console = Console(highlight=False, soft_wrap=True, quiet=_quiet)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, quiet=_quiet)
