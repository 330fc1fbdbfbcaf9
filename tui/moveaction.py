"""The topic screen's leader move (``m`` on a redesign partition), as ``nsqctl topic move``
does it: the operator picks the nsqd to lead, :func:`nsqctl.admin.plan_move` checks it (its
refusals, word for word, are the CLI's: the target already leads, an unordered topic keeps
each nsqd to one partition, no leader now...), the plan's preview is shown with the CLI's
guard (a plain yes), and :func:`nsqctl.admin.apply_plan` sends it and waits until the
target leads, saying each step.

The picker lists every other nsqd of the last poll with what the move means for it: an
in-sync copy takes the lead at once, any other catches up first (writes pause while the
lead changes hands), a down nsqd cannot take it.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from nsqctl import admin
from nsqctl.stats.view import ClusterView, PartitionView


def move_what(topic: str, partition: int, target: str) -> str:
    """The move in the CLI's words (``nsqctl topic move``'s prompt)."""
    return f"move the leader of {topic} partition {partition} to {target}"


def candidates(view: ClusterView, part: PartitionView) -> list[tuple[str, str]]:
    """(nsqd HTTP address, what leading would take) for every nsqd but the leader."""
    isr = part.isr or ()
    out: list[tuple[str, str]] = []
    for node in sorted(view.nodes, key=lambda n: n.address):
        address = node.address
        if address == part.leader:
            continue
        if node.stats.state == "down":
            why = "down: cannot take the lead"
        elif address in isr:
            why = "in sync: takes the lead at once"
        elif address in part.replicas:
            why = "holds a copy out of sync: catches up first"
        else:
            why = "holds no copy: catches up first"
        out.append((address, why))
    return out


def move_question(plan: admin.PartitionPlan, what: str) -> str:
    """The confirmation: the plan's preview as the CLI prints it, then the CLI's guard."""
    lines = [f"About to {what}:", *(f"  {line}" for line in plan.preview)]
    lines.append(admin.confirmation(None).prompt + " (y/N)")
    return "\n".join(lines)


class TargetScreen(ModalScreen[str]):
    """Pick the nsqd to lead a partition; dismisses with its address, or "" on escape."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    TargetScreen { align: center middle; }
    TargetScreen > Vertical { width: 90; max-width: 95%; height: auto; max-height: 80%;
                              border: thick $warning; padding: 1 2; background: $surface; }
    TargetScreen OptionList { height: auto; max-height: 20; }
    """

    def __init__(self, title: str, choices: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(self.title_text), id="target-title")
            yield OptionList(
                *(Option(f"{address}  {why}", id=address) for address, why in self.choices),
                id="targets",
            )

    def on_mount(self) -> None:
        self.query_one("#targets", OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id or "")

    def action_cancel(self) -> None:
        self.dismiss("")
