"""(stub) grpo export."""

from __future__ import annotations

from cli.common import GrpoError, handle_errors


@handle_errors
def export() -> None:
    raise GrpoError("grpo export is not implemented yet")
