"""Update a DataTable from the model on every poll without losing the operator's place.

Clearing and refilling a table re-measures every cell and blocks the event loop for
tens of milliseconds on a few hundred rows, at every poll; so when the rows (keys, in
order) are the same as shown, only the cells whose content changed are written.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
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


def same_cell(a: Cell, b: Cell) -> bool:
    """Equal text and look (rich's ``Text.__eq__`` ignores the base style)."""
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.style == b.style and a.spans == b.spans
    return type(a) is type(b) and a == b


def _width(cell: Cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


def fill(table: DataTable[Cell], rows: Sequence[Row]) -> None:
    """Show ``rows``: changed cells only when the row keys are unchanged, else rebuild."""
    if [k.value for k in table.rows] == [k for k, _ in rows]:
        _update(table, rows)
    else:
        _rebuild(table, rows)


def _update(table: DataTable[Cell], rows: Sequence[Row]) -> None:
    """Write changed cells in place; a column is widened when a value outgrows it (it only
    shrinks back on the next rebuild, which would otherwise re-measure the whole column)."""
    columns = table.ordered_columns
    for key, cells in rows:
        for column, old, new in zip(columns, table.get_row(key), cells, strict=False):
            if not same_cell(old, new):
                grow = _width(new) > column.content_width
                table.update_cell(key, column.key, new, update_width=grow)


def _rebuild(table: DataTable[Cell], rows: Sequence[Row]) -> None:
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
