"""Refill a DataTable from the model on every poll without losing the operator's place."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable

Cell = str | Text
Row = tuple[str, Sequence[Cell]]


def selected_key(table: DataTable[Cell]) -> str | None:
    """The key of the row under the cursor, or None for an empty table."""
    if table.row_count == 0:
        return None
    try:
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
    except Exception:  # the cursor is past the last row after a shrink
        return None
    return key.value


def fill(table: DataTable[Cell], rows: Sequence[Row]) -> None:
    """Replace all rows; keep the cursor on the same key (or the same index) when possible."""
    keep = selected_key(table)
    index = table.cursor_row
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if not rows:
        return
    keys = [k for k, _ in rows]
    target = keys.index(keep) if keep in keys else min(index, len(rows) - 1)
    table.move_cursor(row=target, animate=False)
