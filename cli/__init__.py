"""`grpo` command-line interface: two-stage SFT + GRPO on Unsloth/TRL with the Rust reward core."""

from __future__ import annotations

__all__ = ["__version__"]

try:
    from importlib.metadata import version as _version

    __version__ = _version("grpo")
except Exception:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+local"
