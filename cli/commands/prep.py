"""(stub) grpo prep."""

from __future__ import annotations

from cli.common import GrpoError, handle_errors


@handle_errors
def prep() -> None:
    raise GrpoError("grpo prep is not implemented yet")
