"""A read-only, row-cursor table that re-renders only what changed.

Textual's ``DataTable`` (8.x) bumps one table-wide counter on every ``update_cell`` and
that counter is part of every render-cache key, so each poll re-rendered every visible
cell of a big channel screen, after one ``update_cell`` per cell, each doing its own
bookkeeping; key presses queued behind both (bench/README.md, Dashboard).

Here the dashboard hands over all rows at every poll (:meth:`RowTable.set_rows`); each
row's rendered :class:`~textual.strip.Strip` is cached under what decides its look (its
cells, its style, the column widths), so a poll re-renders only the visible rows whose
cells changed and a cursor move only the two rows involved.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from nsqctl.tui.tables import Cell, Row

Signature = tuple[object, ...]
# control characters (newlines, tabs, escapes: a client's user agent is remote input) as
# spaces, one for one, so a row stays one terminal line and Text spans keep their offsets
_CONTROL = str.maketrans(dict.fromkeys([*range(32), 127, *range(0x80, 0xA0)], " "))


def signature(cells: Sequence[Cell]) -> Signature:
    """A row's look as a comparable value (``Text.__eq__`` ignores the base style)."""
    return tuple(c if isinstance(c, str) else (c.plain, c.style, tuple(c.spans)) for c in cells)


def _clean(plain: str) -> str:
    return plain if plain.isprintable() else plain.translate(_CONTROL)


def _clean_text(text: Text) -> Text:
    if text.plain.isprintable():
        return text
    text = text.copy()
    text.plain = text.plain.translate(_CONTROL)
    return text


def _width(cell: Cell) -> int:
    plain = cell if isinstance(cell, str) else cell.plain
    if plain.isascii() and plain.isprintable():  # the common case, without a call into rich
        return len(plain)
    return cell_len(_clean(plain))


class RowTable(ScrollView, can_focus=True):
    """Fixed header, zebra rows, a row cursor that stays on its row's key across updates.

    Rows are ``(key, cells)`` (:data:`nsqctl.tui.tables.Row`); str cells are shown as plain text
    (no markup). Column widths fit the content: they grow when a value outgrows them and
    are measured afresh only when the row keys change.
    """

    ALLOW_SELECT = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "select", show=False),
        Binding("up", "cursor_up", "cursor up", show=False),
        Binding("down", "cursor_down", "cursor down", show=False),
        Binding("pageup", "cursor_page_up", "page up", show=False),
        Binding("pagedown", "cursor_page_down", "page down", show=False),
        Binding("home,ctrl+home", "cursor_first", "first row", show=False),
        Binding("end,ctrl+end", "cursor_last", "last row", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "rowtable--header",
        "rowtable--cursor",
        "rowtable--even-row",
        "rowtable--odd-row",
    }
    # DataTable's look, so the dashboard reads the same as before
    DEFAULT_CSS = """
    RowTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        &:focus {
            background-tint: $foreground 5%;
            & > .rowtable--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .rowtable--header { background-tint: $foreground 5%; }
        }
        &:dark > .rowtable--even-row { background: $surface-darken-1 40%; }
        & > .rowtable--header { text-style: bold; background: $panel; color: $foreground; }
        &:ansi > .rowtable--header { background: ansi_bright_blue; color: ansi_default; }
        & > .rowtable--even-row { background: $surface-lighten-1 50%; }
        & > .rowtable--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    class RowSelected(Message):
        """Enter on a row, or a click on the cursor row."""

        def __init__(self, table: RowTable, row_key: str, cursor_row: int) -> None:
            super().__init__()
            self.table = table
            self.row_key = row_key
            self.cursor_row = cursor_row

        @property
        def control(self) -> RowTable:
            return self.table

    def __init__(
        self,
        *columns: str,
        zebra_stripes: bool = True,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.columns: tuple[str, ...] = columns
        self.zebra_stripes = zebra_stripes
        self.rows_rendered = 0
        """Rows rendered rather than taken from the cache (tests count re-renders)."""
        self._keys: list[str] = []
        self._cells: list[tuple[Cell, ...]] = []
        self._sigs: list[Signature] = []
        self._index: dict[str, int] = {}
        self._widths = [cell_len(c) for c in columns]
        self._layout = 0  # bumped when a column width changes: every cached row is stale
        self._cursor = 0
        self._strips: dict[str, tuple[tuple[object, ...], Strip]] = {}
        self._header: tuple[tuple[object, ...], Strip] | None = None
        self._styles: dict[str, Style] = {}
        self._update_virtual_size()

    # ------------------------------------------------------------------ data

    @property
    def row_count(self) -> int:
        return len(self._keys)

    @property
    def cursor_row(self) -> int:
        """Index of the cursor row (0 for an empty table)."""
        return self._cursor

    @property
    def selected_key(self) -> str | None:
        """The key of the row under the cursor, or None for an empty table."""
        return self._keys[self._cursor] if self._keys else None

    def get_row_at(self, index: int) -> tuple[Cell, ...]:
        return self._cells[index]

    def get_row(self, key: str) -> tuple[Cell, ...]:
        return self._cells[self._index[key]]

    def set_columns(self, columns: tuple[str, ...]) -> None:
        """New header labels, as many as before (a view of the other server family names
        its columns differently); the widths are measured afresh."""
        if columns == self.columns:
            return
        self.columns = columns
        self._widths = [cell_len(c) for c in columns]
        self._grow(range(len(self._keys)))
        self._layout += 1
        self._header = None
        self._update_virtual_size()
        self.refresh()

    def set_rows(self, rows: Sequence[Row]) -> None:
        """Show ``rows``. With the same keys in the same order only the changed rows are
        repainted; otherwise the table is rebuilt and the cursor follows its row's key (or
        keeps its index, clamped, when that row is gone)."""
        keys = [key for key, _ in rows]
        cells = [tuple(row) for _, row in rows]
        sigs = [signature(row) for row in cells]
        if keys == self._keys:
            self._update(cells, sigs)
            return
        keep = self.selected_key
        self._keys, self._cells, self._sigs = keys, cells, sigs
        self._index = {key: i for i, key in enumerate(keys)}  # a repeated key: its last row
        self._strips = {k: v for k, v in self._strips.items() if k in self._index}
        old_widths, self._widths = self._widths, [cell_len(c) for c in self.columns]
        self._grow(range(len(keys)))
        if self._widths != old_widths:
            self._layout += 1
        self._update_virtual_size()
        target = self._index.get(keep, self._cursor) if keep is not None else self._cursor
        self._cursor = max(0, min(target, len(keys) - 1))
        self.refresh()
        self._scroll_to_cursor()

    def _update(self, cells: list[tuple[Cell, ...]], sigs: list[Signature]) -> None:
        """Same rows: repaint those that changed; measure only the cells that changed."""
        widths, changed, grew = self._widths, [], False
        for i, (old, new) in enumerate(zip(self._sigs, sigs, strict=True)):
            if old == new:
                continue
            changed.append(i)
            row = cells[i]
            same_shape = len(old) == len(new)
            for j in range(min(len(row), len(widths))):
                if same_shape and old[j] == new[j]:
                    continue
                w = _width(row[j])
                if w > widths[j]:
                    widths[j], grew = w, True
        self._cells, self._sigs = cells, sigs
        if grew:
            self._layout += 1
            self._update_virtual_size()
            self.refresh()
            return
        shown = self._shown_rows()
        for i in changed:
            if i in shown:
                self.refresh_line(i + 1)  # virtual y: the header is line 0

    def _grow(self, indices: Iterable[int]) -> bool:
        """Widen columns to fit these rows; True when any column grew (the caller repaints)."""
        widths, grew = self._widths, False
        for i in indices:
            for j, cell in enumerate(self._cells[i][: len(widths)]):
                w = _width(cell)
                if w > widths[j]:
                    widths[j], grew = w, True
        return grew

    def _update_virtual_size(self) -> None:
        self.virtual_size = Size(self._table_width(), len(self._keys) + 1)

    def _table_width(self) -> int:
        return sum(self._widths) + 2 * len(self._widths)

    # ------------------------------------------------------------------ cursor

    def move_cursor(self, row: int) -> None:
        """Put the cursor on ``row`` (clamped) and scroll it into view."""
        row = max(0, min(row, len(self._keys) - 1))
        if row != self._cursor:
            self._refresh_row(self._cursor)
            self._cursor = row
            self._refresh_row(row)
        self._scroll_to_cursor()

    def _visible_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)  # less the header

    def _shown_rows(self) -> range:
        top = self.scroll_offset.y
        return range(top, top + self._visible_rows())

    def _refresh_row(self, index: int) -> None:
        if index in self._shown_rows():
            self.refresh_line(index + 1)  # virtual y: the header is line 0

    def _scroll_to_cursor(self) -> None:
        if not self.size.height:
            return  # not laid out yet; on_resize scrolls
        top, visible = self.scroll_offset.y, self._visible_rows()
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, force=True)
        elif self._cursor >= top + visible:
            self.scroll_to(y=self._cursor - visible + 1, animate=False, force=True)

    def on_resize(self, event: events.Resize) -> None:
        self._scroll_to_cursor()

    def action_cursor_up(self) -> None:
        self.move_cursor(self._cursor - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(self._cursor + 1)

    def action_cursor_page_up(self) -> None:
        page = self._visible_rows()
        self.scroll_to(y=self.scroll_offset.y - page, animate=False, force=True)
        self.move_cursor(self._cursor - page)

    def action_cursor_page_down(self) -> None:
        page = self._visible_rows()
        self.scroll_to(y=self.scroll_offset.y + page, animate=False, force=True)
        self.move_cursor(self._cursor + page)

    def action_cursor_first(self) -> None:
        self.move_cursor(0)

    def action_cursor_last(self) -> None:
        self.move_cursor(len(self._keys) - 1)

    def action_select_cursor(self) -> None:
        if self._keys:
            self.post_message(self.RowSelected(self, self._keys[self._cursor], self._cursor))

    def on_click(self, event: events.Click) -> None:
        """A click puts the cursor on a row; a click on the cursor row selects it."""
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:
            return
        row = self.scroll_offset.y + offset.y - 1
        if row >= len(self._keys):
            return
        event.stop()
        if row == self._cursor:
            self.action_select_cursor()
        else:
            self.move_cursor(row)

    def on_focus(self) -> None:
        self.refresh()  # the cursor and header styles depend on focus

    def on_blur(self) -> None:
        self.refresh()

    # ------------------------------------------------------------------ rendering

    def render_lines(self, crop: Region) -> list[Strip]:
        self._styles = self._row_styles()  # once per paint, not per line
        return super().render_lines(crop)

    def _row_styles(self) -> dict[str, Style]:
        get = self.get_component_rich_style
        base = self.rich_style
        cursor = get("rowtable--cursor")
        even = get("rowtable--even-row") if self.zebra_stripes else base
        odd = get("rowtable--odd-row") if self.zebra_stripes else base
        return {
            "header": get("rowtable--header"),
            "even": even,
            "odd": odd,
            "even-cursor": even + cursor,
            "odd-cursor": odd + cursor,
            "post-cursor": Style.from_color(color=cursor.color),  # like DataTable: css wins
        }

    def render_line(self, y: int) -> Strip:
        if not self._styles:
            self._styles = self._row_styles()
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        if y == 0:
            strip = self._header_strip(width)
        else:
            index = scroll_y + y - 1
            if index >= len(self._keys):
                return Strip.blank(width, self.rich_style)
            strip = self._row_strip(index, width)
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)

    def _header_strip(self, width: int) -> Strip:
        style = self._styles["header"]
        key = (style, self._layout, width)
        if self._header is None or self._header[0] != key:
            self._header = (key, self._render_cells(self.columns, style, None, width))
        return self._header[1]

    def _row_strip(self, index: int, width: int) -> Strip:
        parity = "odd" if index % 2 else "even"
        post = None
        if index == self._cursor:
            parity += "-cursor"
            post = self._styles["post-cursor"]
        style = self._styles[parity]
        sig = self._sigs[index]
        key = (sig, style, self._layout, width)
        row_key = self._keys[index]
        cached = self._strips.get(row_key)
        if cached is not None and cached[0] == key:
            return cached[1]
        strip = self._render_cells(self._cells[index], style, post, width)
        self._strips[row_key] = (key, strip)
        self.rows_rendered += 1
        return strip

    def _render_cells(
        self, cells: Sequence[Cell], style: Style, post: Style | None, width: int
    ) -> Strip:
        """One row at least ``width`` wide: each cell padded by one space either side, the
        rest of the line in the row's style. Plain cells are joined into one segment; a Text
        cell's own styles go over the row's, and ``post`` over both (as in DataTable)."""
        get_style = self.app.console.get_style
        plain_style = style + post
        segments: list[Segment] = []
        run: list[str] = []
        for j, w in enumerate(self._widths):
            cell = cells[j] if j < len(cells) else ""
            if isinstance(cell, str):
                run.append(f" {_clean(cell)}{' ' * (w - _width(cell))} ")
                continue
            run.append(" ")
            segments.append(Segment("".join(run), plain_style))
            run = [" " * (w - _width(cell)) + " "]
            text = _clean_text(cell)
            if text.spans:
                segments.extend(
                    Segment(seg.text, style + seg.style + post)
                    for seg in text.render(self.app.console)
                )
            else:  # Text.render would drop the base style of a text without spans
                segments.append(Segment(text.plain, style + get_style(text.style) + post))
        total = self._table_width()
        if total < width:
            run.append(" " * (width - total))
        segments.append(Segment("".join(run), plain_style))
        return Strip([seg for seg in segments if seg.text], max(total, width))
