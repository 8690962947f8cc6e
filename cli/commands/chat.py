"""(stub) grpo chat."""

from __future__ import annotations

from cli.common import GrpoError, handle_errors


@handle_errors
def chat() -> None:
    raise GrpoError("grpo chat is not implemented yet")
