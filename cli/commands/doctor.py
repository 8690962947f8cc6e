"""(stub) grpo doctor."""

from __future__ import annotations

from cli.common import GrpoError, handle_errors


@handle_errors
def doctor() -> None:
    raise GrpoError("grpo doctor is not implemented yet")
