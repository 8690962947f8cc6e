"""`grpo` command-line interface: two-stage SFT + GRPO on Unsloth/TRL with the Rust reward core."""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # Lazy: importlib.metadata scans every installed distribution (~50 ms), too slow for `grpo --help`.
    if name == "__version__":
        try:
            from importlib.metadata import version

            return version("grpo")
        except Exception:  # running from a source tree without install
            return "0.0.0+local"
    raise AttributeError(f"module 'cli' has no attribute {name!r}")
