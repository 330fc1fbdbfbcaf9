"""The dashboard's actions: pause/unpause/empty a channel, pause/unpause a topic.

Each is sent by :mod:`nsqctl.admin`, planned as the CLI's ``topic``/``channel`` commands
are, to what the last poll showed: the nsqd leading each partition (every nsqd holding the
topic on the original family), with ``partition=`` on the redesign. This module only adds
what the dashboard offers and how it asks.
"""

from __future__ import annotations

from typing import Literal

from nsqctl import admin
from nsqctl.errors import AdminError
from nsqctl.stats.view import TopicView

Action = Literal["pause", "unpause", "empty"]


def unsupported(action: Action, topic: TopicView, channel: str | None) -> str | None:
    """Why the dashboard will not do this at all (asked before the operator confirms it)."""
    if channel is None and action == "empty":
        return "emptying a whole topic is not offered here: pick a channel"
    if channel is None and topic.is_redesign:
        # youzan's nsqd has no /topic/pause or /topic/unpause (404)
        return f"the redesign nsqd cannot {action} a topic: {action} its channels instead"
    return None


def describe(action: Action, topic: str, channel: str | None) -> str:
    what = f"channel {topic}/{channel}" if channel else f"topic {topic}"
    return f"{action} {what}"


def placement_of(topic: TopicView) -> admin.Placement:
    """Where the action goes: every partition's leader; one without a leader is skipped."""
    family: admin.Family = "redesign" if topic.is_redesign else "original"
    leaders = [(p.leader, p.partition) for p in topic.partitions if p.leader]
    return admin.placement_from_leaders(topic.name, family, leaders)


async def run_action(action: Action, topic: TopicView, channel: str | None = None) -> int:
    """Send ``action``; returns how many nsqds accepted it. Raises :class:`AdminError`
    naming every nsqd that did not (and before sending, when it is not offered)."""
    reason = unsupported(action, topic, channel)
    if reason:
        raise AdminError(reason)
    placement = placement_of(topic)
    if not placement.nsqds:
        raise AdminError(f"topic {topic.name} has no partition leader to send {action} to")
    report = await admin.run_action(placement, action, channel)
    report.raise_for_failures()
    return len(report.results)
