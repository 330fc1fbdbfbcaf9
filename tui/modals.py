"""Modal screens: confirmation before a change (a yes, or a name typed back), the ``:``
command line, and the key help."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from nsqctl.admin import Confirmation

HELP_TEXT = """\
[b]nsqctl dash[/b] — keys

  [b]enter[/b]     open the selected topic / channel
  [b]escape[/b]    back (or close the filter)
  [b]enter[/b]     on an nsqd (main or nodes screen): that nsqd's topics
  [b]:[/b]         go to a topic or nsqd by name (:orders, :127.0.0.1:4151)
  [b]/[/b]         filter topics (on a topic: its channels) by name (type; enter to
            keep, escape to clear)
  [b]s[/b]         cycle the topics sort: name, depth, rate, channels
  [b]r[/b]         refresh now
  [b]tab[/b]       move between tables
  [b]p[/b]         pause / unpause the selected channel (asks first)
  [b]e[/b]         empty the selected channel (shows what it drops; above 1000
            messages asks for the topic name, as the CLI does)
  [b]t[/b]         pause / unpause the topic (asks first)
  [b]v[/b]         on a channel: its next messages (redesign: read in place; original:
            borrowed and given back, attempts +1, asks first); [b]r[/b] there reads again
  [b]m[/b]         on a topic: move the selected partition's leader to an nsqd you pick
            (shows the plan of `nsqctl topic move`, asks first)
  [b]d[/b] / [b]u[/b]     on an nsqd: drain it / restore it, as `nsqctl node drain|restore`
            (shows the plan, asks first; refused when a partition would stop taking
            writes); progress shows there, [b]c[/b] cancels the drain
  [b]n[/b]         nodes: each nsqd's depth, in-flight, deferred, partitions led, drain
  [b]h[/b]         hot spots: channels ([b]c[/b]: clients) ranked ([b]s[/b]: by requeue
            rate, timeout rate, time to drain, in-flight/RDY) and why flagged
  [b]?[/b]         this help
  [b]q[/b]         quit

Flags: [b]starved[/b] in-flight ≥ 85% of RDY · [b]stalled[/b] RDY 0 while depth waits
· [b]orphan[/b] growing, no client · [b]poison[/b] a few messages requeued over and over
· [b]no leader[/b] no nsqd takes writes for a partition (yet) · [b]out of ISR[/b] a copy
not in sync · [b]DELETED[/b] data a deleted topic left on an nsqd (nsqlookupd has no meta
for it): nsqctl topic delete removes it · colours: yellow warn, red critical.

Redesign: depth counts messages not yet confirmed, in-flight ones included;
[b]depth size[/b] and [b]stored[/b] (a partition's queue) are bytes. ISR and catch-up
([b]…[/b] until fetched) are asked for the open topic only; a catching-up copy shows its
messages of the leader's. A leader or ISR that just changed is shown in reverse video, and
event lines under the partitions tell each step of a move or failover (the latest one also
on the main screen). Its nsqd cannot pause a topic: pause the channels.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "dismiss", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 84; height: auto; max-height: 100%;
                                  border: round $accent; padding: 1 2;
                                  background: $surface; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():  # taller than a small terminal: it scrolls
            yield Static(HELP_TEXT, id="help-text")


class ConfirmScreen(ModalScreen[bool]):
    """Asks "really <action>?"; dismisses with True only on an explicit yes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Grid { grid-size: 2; grid-gutter: 1 2; grid-rows: auto 3; width: 100;
                           max-width: 95%; height: auto; border: thick $warning; padding: 1 2;
                           background: $surface; }
    ConfirmScreen #question { column-span: 2; width: 100%; }
    ConfirmScreen Button { width: 100%; }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Grid():
            yield Label(Text(self.question), id="question")
            yield Button("Yes (y)", variant="error", id="yes")
            yield Button("No (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class NoticeScreen(ModalScreen[None]):
    """Says why an action is refused (or what it found), with nothing to answer: any of
    escape, enter or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "dismiss", "close")]
    DEFAULT_CSS = """
    NoticeScreen { align: center middle; }
    NoticeScreen > Vertical { width: 110; max-width: 95%; height: auto; max-height: 90%;
                              border: thick $error; padding: 1 2; background: $surface; }
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(self.text), id="notice")
            yield Label("(escape closes this)", id="close-hint")


class TypeNameScreen(ModalScreen[bool]):
    """Asks for the name shown in ``prompt`` to be typed back; dismisses with True only
    when :meth:`~nsqctl.admin.Confirmation.accepts` takes what was typed (enter), False on
    anything else or escape. Has no key bindings of its own: every letter goes to the box."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    TypeNameScreen { align: center middle; }
    TypeNameScreen > Vertical { width: 100; max-width: 95%; height: auto; padding: 1 2;
                                border: thick $error; background: $surface; }
    TypeNameScreen #prompt { margin-top: 1; color: $error; }
    """

    def __init__(self, question: str, ask: Confirmation) -> None:
        super().__init__()
        self.question = question
        self.ask = ask

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question, id="question")
            yield Label(self.ask.prompt, id="prompt")
            yield Input(placeholder=self.ask.expected, id="name")

    def on_mount(self) -> None:
        self.query_one("#name", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(self.ask.accepts(event.value))

    def action_cancel(self) -> None:
        self.dismiss(False)


class CommandLine(ModalScreen[str]):
    """The ``:`` line: dismisses with what was typed (enter), or "" on escape."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    CommandLine { align: center bottom; }
    CommandLine > Input { width: 100%; margin: 0 0 1 0; }
    """

    def compose(self) -> ComposeResult:
        yield Input(placeholder=":topic or :nsqd host:port", id="command")

    def on_mount(self) -> None:
        self.query_one("#command", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip().removeprefix(":").strip())

    def action_cancel(self) -> None:
        self.dismiss("")
