"""The one rule for confirming an admin action before it is sent, for every front end (the
CLI's prompt; the dashboard's dialog): a plain yes, or, when the action drops more
messages than a threshold (or an nsqd could not say how many), the topic's name typed
back, since a reflexive "y" is too cheap for a real backlog."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nsqctl.admin.blast import DEFAULT_CONFIRM_ABOVE, BlastRadius


@dataclass(frozen=True)
class Confirmation:
    """What the operator must answer: ``"yes"`` or the ``expected`` text (the topic)."""

    answer: Literal["yes", "name"]
    prompt: str
    expected: str = ""

    def accepts(self, typed: str) -> bool:
        """Whether ``typed`` (the operator's answer) lets the action go ahead."""
        if self.answer == "name":
            return typed.strip() == self.expected
        return typed.strip().lower() in ("y", "yes")


def confirmation(
    blast: BlastRadius | None, confirm_above: int = DEFAULT_CONFIRM_ABOVE
) -> Confirmation:
    """The answer an action needs, given what it would lose (``blast``; None when it drops
    nothing measurable)."""
    if blast is not None and blast.exceeds(confirm_above):
        why = (
            f"{blast.messages} messages"
            if blast.complete
            else "an unknown number of messages (an nsqd did not answer)"
        )
        return Confirmation(
            "name", f"this drops {why}: type the topic name ({blast.topic}) to proceed", blast.topic
        )
    return Confirmation("yes", "proceed?")
