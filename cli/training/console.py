"""Consoles for training output: one line per step, never hard-wrapped at 80 columns in logs and CI."""

from __future__ import annotations

from rich.console import Console

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)
