"""(stub) grpo eval."""

from __future__ import annotations

from cli.common import GrpoError, handle_errors


@handle_errors
def eval_() -> None:
    raise GrpoError("grpo eval is not implemented yet")
