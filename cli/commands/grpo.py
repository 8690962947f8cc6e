"""(stub) grpo grpo."""

from __future__ import annotations

from cli.common import GrpoError, handle_errors


@handle_errors
def grpo() -> None:
    raise GrpoError("grpo grpo is not implemented yet")
