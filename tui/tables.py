"""What a table row is, shared by the model→rows layer (:mod:`nsqctl.tui.rows`) and the table
widget (:mod:`nsqctl.tui.rowtable`), so the rows stay free of any widget."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

Cell = str | Text
Row = tuple[str, Sequence[Cell]]
"""``(key, cells)``: the key identifies the row across polls (the cursor follows it)."""
