"""The ``/`` filter box of the main screen (topics) and the topic screen (channels): hidden
until opened; enter keeps the filter and gives the keys back to the table, an empty enter
or :meth:`FilterBox.clear` hides it. The screen reads ``value`` (``Input.Changed``)."""

from __future__ import annotations

from textual.widgets import Input


class FilterBox(Input):
    DEFAULT_CSS = """
    FilterBox { display: none; height: 3; }
    FilterBox.visible { display: block; }
    """

    def __init__(self, placeholder: str, *, id: str, table_id: str) -> None:
        super().__init__(placeholder=placeholder, id=id)
        self.table_id = table_id

    @property
    def shown(self) -> bool:
        return self.has_class("visible")

    def open(self) -> None:
        self.add_class("visible")
        self.focus()

    def clear(self) -> None:
        """Empty and hide the box; the keys go back to the table it filters."""
        self.value = ""
        self.remove_class("visible")
        self.screen.query_one(f"#{self.table_id}").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not event.value:
            self.remove_class("visible")
        self.screen.query_one(f"#{self.table_id}").focus()
