"""nsqctl.tui.rowtable.RowTable: the dashboard's table. Pilot runs check what an operator sees
(cursor kept on its row, keys, selection) and that a refresh re-renders only the rows
whose cells changed (counted by ``rows_rendered``, the cache misses)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.text import Text
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.strip import Strip

from nsqctl.tui.rowtable import RowTable
from nsqctl.tui.tables import Row

HEIGHT = 8  # header + 7 rows visible


def rows(n: int, value: str = "v", prefix: str = "k") -> list[Row]:
    return [(f"{prefix}{i}", [f"{prefix}{i}", f"{value}{i}"]) for i in range(n)]


class TableApp(App[None]):
    CSS = f"RowTable {{ height: {HEIGHT}; }}"

    def __init__(self, initial: Sequence[Row]) -> None:
        super().__init__()
        self.initial = initial
        self.selected: list[str] = []

    def compose(self) -> ComposeResult:
        yield RowTable("name", "value", id="t")

    def on_mount(self) -> None:
        table = self.query_one(RowTable)
        table.set_rows(self.initial)
        table.focus()

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        assert event.control is self.query_one(RowTable)
        self.selected.append(event.row_key)


def table_of(pilot: Pilot[None]) -> RowTable:
    return pilot.app.query_one(RowTable)


def line(table: RowTable, y: int) -> str:
    return table.render_line(y).text.rstrip()


def visible(table: RowTable) -> range:
    top = table.scroll_offset.y
    return range(top, top + HEIGHT - 1)


async def test_renders_header_padded_cells_and_cursor_row() -> None:
    app = TableApp([("a", ["a", "1"]), ("bb", ["bb", Text("22", style="red")])])
    async with app.run_test(size=(40, 12)) as pilot:
        table = table_of(pilot)
        await pilot.pause()
        assert line(table, 0) == " name  value"
        assert line(table, 1) == " a     1"
        assert line(table, 2) == " bb    22"
        assert line(table, 3) == ""
        assert table.render_line(1).cell_length == table.size.width  # cursor row: full width
        cursor = table.get_component_rich_style("rowtable--cursor")
        assert all(s.style and s.style.bgcolor == cursor.bgcolor for s in table.render_line(1))
        assert not any(s.style and s.style.bgcolor == cursor.bgcolor for s in table.render_line(2))
        red = [s for s in table.render_line(2) if s.text == "22"]
        assert red and red[0].style and red[0].style.color and red[0].style.color.name == "red"


async def test_refresh_rerenders_only_the_changed_visible_rows() -> None:
    app = TableApp(rows(30))
    async with app.run_test(size=(40, 12)) as pilot:
        table = table_of(pilot)
        await pilot.pause()
        painted = table.rows_rendered
        assert painted == HEIGHT - 1  # the visible rows, each once

        table.set_rows(rows(30))  # new objects, same look
        table.refresh()  # even a full repaint takes every row from the cache
        await pilot.pause()
        assert table.rows_rendered == painted

        changed = rows(30)
        changed[3] = ("k3", ["k3", "v3!"])  # visible, same width as "v10"
        changed[20] = ("k20", ["k20", "new"])  # off screen
        table.set_rows(changed)
        await pilot.pause()
        assert table.rows_rendered == painted + 1
        assert line(table, 4) == " k3    v3!"

        styled = list(changed)
        styled[4] = ("k4", ["k4", Text("v4", style="bold red")])  # style-only change
        table.set_rows(styled)
        await pilot.pause()
        assert table.rows_rendered == painted + 2

        await pilot.press("down")  # two rows change look: the old and the new cursor row
        await pilot.pause()
        assert table.rows_rendered == painted + 4
        assert table.cursor_row == 1


async def test_a_wider_value_widens_its_column_and_repaints() -> None:
    app = TableApp(rows(3))
    async with app.run_test(size=(40, 12)) as pilot:
        table = table_of(pilot)
        await pilot.pause()
        painted = table.rows_rendered
        table.set_rows([*rows(2), ("k2", ["k2", "a much longer value"])])
        await pilot.pause()
        assert table.rows_rendered == painted + 3  # the layout changed: every row
        assert line(table, 0) == " name  value"
        assert line(table, 3) == " k2    a much longer value"
        assert table.virtual_size.width == 2 + 4 + 2 + len("a much longer value")


async def test_cursor_stays_on_its_row_key_across_refreshes() -> None:
    app = TableApp(rows(5))
    async with app.run_test(size=(40, 12)) as pilot:
        table = table_of(pilot)
        await pilot.press("down", "down")
        assert table.selected_key == "k2"
        table.set_rows(rows(5, value="w"))  # same keys, new values
        assert (table.cursor_row, table.selected_key) == (2, "k2")
        table.set_rows([("new", ["new", "0"]), *rows(5)])  # a row inserted above
        assert (table.cursor_row, table.selected_key) == (3, "k2")
        table.set_rows(list(reversed(rows(5))))  # resorted
        assert (table.cursor_row, table.selected_key) == (2, "k2")
        table.set_rows([r for r in rows(5) if r[0] != "k2"])  # its row is gone: same index
        assert (table.cursor_row, table.selected_key) == (2, "k3")
        await pilot.pause()
        assert line(table, 3).startswith(" k3")


async def test_shrinking_below_the_cursor_clamps_it_and_empty_is_safe() -> None:
    app = TableApp(rows(20))
    async with app.run_test(size=(40, 12)) as pilot:
        table = table_of(pilot)
        await pilot.press("end")
        assert (table.cursor_row, table.selected_key) == (19, "k19")
        assert 19 in visible(table)
        table.set_rows(rows(3, prefix="n"))
        await pilot.pause()
        assert (table.cursor_row, table.selected_key) == (2, "n2")
        assert table.scroll_offset.y == 0 and line(table, 3).startswith(" n2")

        table.set_rows([])
        await pilot.pause()
        assert (table.row_count, table.cursor_row, table.selected_key) == (0, 0, None)
        await pilot.press("down", "up", "pagedown", "end", "enter")
        assert app.selected == [] and table.cursor_row == 0
        assert line(table, 0) == " name  value" and line(table, 1) == ""

        table.set_rows(rows(2))
        assert (table.cursor_row, table.selected_key) == (0, "k0")


async def test_enter_posts_the_row_key_and_paging_keys_move_the_cursor() -> None:
    app = TableApp(rows(50))
    async with app.run_test(size=(40, 12)) as pilot:
        table = table_of(pilot)
        await pilot.press("down", "enter")
        assert app.selected == ["k1"]
        await pilot.press("up", "up")  # stops at the first row
        assert table.cursor_row == 0
        await pilot.press("pagedown")
        assert table.cursor_row == HEIGHT - 1 and table.cursor_row in visible(table)
        await pilot.press("pagedown", "pagedown")
        assert table.cursor_row == 3 * (HEIGHT - 1) and table.cursor_row in visible(table)
        await pilot.press("pageup")
        assert table.cursor_row == 2 * (HEIGHT - 1) and table.cursor_row in visible(table)
        await pilot.press("end")
        assert table.cursor_row == 49 and table.scroll_offset.y == 50 + 1 - HEIGHT
        await pilot.pause()
        assert line(table, HEIGHT - 1).startswith(" k49")
        assert line(table, 0) == " name  value"  # the header stays
        await pilot.press("home", "enter")
        assert table.cursor_row == 0 and table.scroll_offset.y == 0
        assert app.selected == ["k1", "k0"]


async def test_click_moves_the_cursor_and_a_click_on_the_cursor_row_selects() -> None:
    app = TableApp(rows(5))
    async with app.run_test(size=(40, 12)) as pilot:
        table = table_of(pilot)
        await pilot.click(RowTable, offset=(2, 3))  # line 3: the third row
        assert table.cursor_row == 2 and app.selected == []
        await pilot.click(RowTable, offset=(2, 3))
        assert app.selected == ["k2"]
        await pilot.click(RowTable, offset=(2, 0))  # the header: nothing
        await pilot.click(RowTable, offset=(2, 7))  # below the last row: nothing
        assert table.cursor_row == 2 and app.selected == ["k2"]


async def test_control_characters_in_a_value_are_shown_as_spaces() -> None:
    """One line per row, and no escape sequence from a remote value reaches the terminal."""
    app = TableApp([("a", ["a", "x\ny\x1bz"]), ("b", ["b", Text("p\tq", style="red")])])
    async with app.run_test(size=(40, 12)) as pilot:
        table = table_of(pilot)
        await pilot.pause()
        assert line(table, 1) == " a     x y z"
        assert line(table, 2) == " b     p q"
        assert table.get_row("b")[1].style == "red"  # type: ignore[union-attr]


def first(strip: Strip) -> Segment:
    return next(iter(strip))


class TwoTables(App[None]):
    CSS: ClassVar[str] = "RowTable { height: 5; }"

    def compose(self) -> ComposeResult:
        yield RowTable("a", id="one")
        yield RowTable("b", id="two")


async def test_focus_changes_the_cursor_style() -> None:
    app = TwoTables()
    async with app.run_test(size=(40, 12)) as pilot:
        one, two = app.query_one("#one", RowTable), app.query_one("#two", RowTable)
        one.set_rows([("x", ["x"])])
        two.set_rows([("y", ["y"])])
        one.focus()
        await pilot.pause()
        focused = first(one.render_line(1)).style
        blurred = first(two.render_line(1)).style
        assert focused != blurred
        await pilot.press("tab")
        await pilot.pause()
        assert two.has_focus
        assert first(one.render_line(1)).style == blurred
        assert first(two.render_line(1)).style == focused
