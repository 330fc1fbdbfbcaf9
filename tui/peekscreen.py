"""A channel's next messages (``v`` on a channel), as ``nsqctl peek`` shows them.

Redesign: :func:`nsqctl.peek.peek` reads them in place over HTTP, touching no channel, so
it runs at once, under read-only too. Original: nsqd has no such API, and
:func:`nsqctl.peek.borrow` takes the messages with a consumer and gives each back once
(their attempts rise by one, their order may change): that changes the channel, so it is
asked first, with the CLI's warning, and refused under read-only as ``peek --borrow`` is;
its consumer connects with the TLS, AUTH, compression and output buffering the dashboard
was started with.
``r`` on the screen reads again (borrows again: asked again).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static

from nsqctl import peek as lib
from nsqctl.admin import confirmation
from nsqctl.connection import ConnectionConfig
from nsqctl.errors import NsqctlError
from nsqctl.message import Message
from nsqctl.protocol.raw_message import RawMessage
from nsqctl.tui.host import ActionHost, host_of, lookupds, refused
from nsqctl.tui.modals import ConfirmScreen
from nsqctl.tui.rowtable import RowTable
from nsqctl.tui.tables import Row

PEEK_COLUMNS = ("partition", "position", "published", "attempts", "id", "nsqd", "body")
BODY_CHARS = 200
"""Characters of a body shown (the rest is cut, said with an ellipsis)."""


@dataclass(frozen=True)
class Shown:
    """One message as the screen lists it, from a peek or a borrow."""

    raw: RawMessage
    partition: int | None
    position: int | None  # the redesign's queue position (a peek); None when borrowed
    nsqd: str


def body_text(body: bytes) -> str:
    """A body on one line: not UTF-8 replaced, line ends and controls shown, cut short."""
    text = body.decode("utf-8", "replace")
    text = "".join(c if c.isprintable() else ("⏎" if c == "\n" else "·") for c in text)
    return text if len(text) <= BODY_CHARS else text[: BODY_CHARS - 1] + "…"


def id_text(raw: RawMessage) -> str:
    return raw.id.decode("ascii", "replace") if raw.internal_id is None else str(raw.internal_id)


def message_rows(messages: Sequence[Shown]) -> list[Row]:
    rows: list[Row] = []
    for n, m in enumerate(messages):
        published = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(m.raw.timestamp / 1e9))
        cells = (
            "-" if m.partition is None else str(m.partition),
            "-" if m.position is None else str(m.position),
            published,
            str(m.raw.attempts),
            id_text(m.raw),
            m.nsqd,
            body_text(m.raw.body),
        )
        rows.append((f"{n}", cells))
    return rows


def borrow_config(host: ActionHost, channel: str) -> ConnectionConfig:
    """The borrow's consumer's connection settings: the dashboard's TLS, AUTH and
    compression, and the output buffering its output-buffer setting asks for on
    ``channel``, as ``peek --borrow`` gets them (on a durable channel of the original
    family, ``auto`` is unbuffered, so a kill -9 of nsqd loses nothing borrowed)."""
    base = host.connection if host.connection is not None else ConnectionConfig()
    return base.for_consumer(host.output_buffer, channel)


def borrow_question(topic: str, channel: str, count: int) -> str:
    """The CLI's warning for ``peek --borrow``, as a question."""
    return "\n".join(
        [
            f"About to borrow up to {count} message(s) from {topic}/{channel}: the original nsqd "
            "cannot show a message without consuming it, so each is taken and given straight "
            "back; its attempts rise by one and it may now come after newer messages",
            confirmation(None).prompt + " (y/N)",
        ]
    )


class PeekScreen(Screen[None]):
    """The next messages of ``topic``/``channel``; on the original family borrowed."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "back"),
        Binding("r", "read", "read again"),
    ]
    DEFAULT_CSS = """
    #peek-summary { height: auto; padding: 0 1; }
    #peek-messages { height: 1fr; }
    """

    def __init__(
        self, topic: str, channel: str, redesign: bool, count: int = lib.DEFAULT_COUNT
    ) -> None:
        super().__init__()
        self.topic = topic
        self.channel = channel
        self.redesign = redesign
        self.count = count

    def compose(self) -> ComposeResult:
        yield Static(id="peek-summary")
        yield RowTable(*PEEK_COLUMNS, id="peek-messages")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#peek-messages", RowTable).focus()
        self.action_read()

    def say(self, text: str, style: str = "bold") -> None:
        self.query_one("#peek-summary", Static).update(Text(text, style=style))

    def action_read(self) -> None:
        host = host_of(self.app)
        if host is None:
            return
        if self.redesign:
            self.say(f"reading the next {self.count} messages of {self.topic}/{self.channel}…")
            self.run_worker(self._peek(host), group="peek", exclusive=True)
            return
        what = f"borrow messages from {self.topic}/{self.channel}"
        if refused(self.app, host, what):
            self.say(
                f"{self.topic}/{self.channel}: the original nsqd cannot show a message without "
                "consuming it, and borrowing is refused under read-only",
                "bold yellow",
            )
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.say(f"borrowing from {self.topic}/{self.channel}…")
                self.run_worker(self._borrow(host), group="peek", exclusive=True)
            else:
                self.say("nothing borrowed", "bold yellow")

        question = borrow_question(self.topic, self.channel, self.count)
        self.app.push_screen(ConfirmScreen(question), answered)

    def _show(self, messages: Sequence[Shown], how: str) -> None:
        self.query_one("#peek-messages", RowTable).set_rows(message_rows(messages))
        if not messages:
            self.say(f"no messages waiting in {self.topic}/{self.channel} ({how})", "bold yellow")
            return
        self.say(f"the next {len(messages)} message(s) of {self.topic}/{self.channel} ({how})")

    async def _peek(self, host: ActionHost) -> None:
        view = host.view
        nsqds = [n.address for n in view.nodes] if view else []
        try:
            result = await lib.peek(
                self.topic,
                self.channel,
                lookupd_http=lookupds(host),
                nsqd_http=nsqds,
                count=self.count,
            )
        except NsqctlError as exc:
            self.say(f"peek {self.topic}/{self.channel}: {exc}", "bold red")
            return
        shown = [Shown(m.raw, m.partition, m.index, m.nsqd) for m in result.messages]
        self._show(shown, "read in place: nothing was consumed")

    async def _borrow(self, host: ActionHost) -> None:
        view = host.view
        taken: list[Shown] = []
        unreachable: list[str] = []  # nsqds where the channel is paused: nothing comes

        def show(messages: list[Message]) -> None:
            taken.extend(Shown(m.raw, m.partition, None, m.nsqd_address) for m in messages)

        def paused(where: Sequence[tuple[str, int]]) -> None:
            unreachable.extend(f"{node} ({depth} waiting)" for node, depth in where)

        try:
            await lib.borrow(
                self.topic,
                self.channel,
                self.count,
                show,
                lookupd_http=lookupds(host),
                nsqd_tcp=host.nsqd_tcp,
                nsqd_http=[n.address for n in view.nodes] if view else [],
                config=borrow_config(host, self.channel),
                on_paused=paused,
            )
        except NsqctlError as exc:
            self.say(f"borrow from {self.topic}/{self.channel}: {exc}", "bold red")
            return
        note = "borrowed and given back: attempts +1"
        if unreachable:
            note += f"; paused on nsqd {', '.join(unreachable)}: not borrowed"
        self._show(taken, note)
