"""(stub) grpo sft."""

from __future__ import annotations

from cli.common import GrpoError, handle_errors


@handle_errors
def sft() -> None:
    raise GrpoError("grpo sft is not implemented yet")
