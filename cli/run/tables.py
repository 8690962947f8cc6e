"""Result tables that a terminal of 80 columns shows whole.

`grpo eval` and `grpo export` print one row per model or artifact and a column per figure: 7 and 10 columns,
~150 characters wide. At 80 columns Rich shrank every column, cutting headers and numbers
(``Completi…``, ``100.…``). Where a table does not fit, :func:`fit` turns it on its side: one row per
figure, one column per model or artifact, so every header and number is whole. Where it fits, it is the
table as built.
"""

from __future__ import annotations

from typing import Any

# Measured at this width, nothing wraps: the table's natural width.
_UNBOUNDED = 10_000


def fit(table: Any, console: Any) -> Any:
    """``table`` if it fits ``console``'s width, else the same cells transposed (title and caption kept)."""
    from rich.measure import Measurement
    from rich.table import Table

    wide = Measurement.get(console, console.options.update_width(_UNBOUNDED), table).maximum
    if wide <= console.width or len(table.columns) < 2:
        return table
    first, *rest = table.columns
    names = [str(cell) for cell in first.cells]
    side = Table(title=table.title, caption=table.caption)
    side.add_column(str(first.header))
    for name in names:
        side.add_column(name, justify="right")
    for column in rest:
        side.add_row(str(column.header), *(str(cell) for cell in column.cells))
    return side
