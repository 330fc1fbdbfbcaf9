"""Dashboard actions: pause/unpause/empty a channel, pause/unpause a topic.

Each action is a POST to every nsqd that leads a partition of the topic (every nsqd holding
it on the original family), with ``partition=`` on the redesign. The CLI admin commands
live in ``nsqctl.admin``; this module only serves the dashboard's confirmations.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

import httpx

from nsqctl.errors import NsqctlError
from nsqctl.httpclient import describe_http_error, http_client
from nsqctl.stats.view import TopicView

Action = Literal["pause", "unpause", "empty"]


class ActionError(NsqctlError):
    """An admin call failed on at least one nsqd; the message names which."""


@dataclass(frozen=True)
class ActionTarget:
    node: str
    partition: int | None


def targets(topic: TopicView) -> list[ActionTarget]:
    """The leader of every partition; partitions without a leader cannot be changed."""
    return [ActionTarget(p.leader, p.partition) for p in topic.partitions if p.leader]


def unsupported(action: Action, topic: TopicView, channel: str | None) -> str | None:
    """Why the cluster cannot do this at all (asked before the operator confirms it)."""
    if channel is None and action == "empty":
        return "emptying a whole topic is not offered here: pick a channel"
    if channel is None and topic.is_redesign:
        # youzan's nsqd has no /topic/pause or /topic/unpause (404)
        return f"the redesign nsqd cannot {action} a topic: {action} its channels instead"
    return None


def describe(action: Action, topic: str, channel: str | None) -> str:
    what = f"channel {topic}/{channel}" if channel else f"topic {topic}"
    return f"{action} {what}"


async def run_action(
    action: Action,
    topic: TopicView,
    channel: str | None = None,
    *,
    timeout: float = 5.0,
) -> int:
    """POST ``/channel/<action>`` or ``/topic/<action>`` to each target; returns how many
    nsqds accepted. Raises :class:`ActionError` naming every nsqd that did not."""
    reason = unsupported(action, topic, channel)
    if reason:
        raise ActionError(reason)
    path = f"/channel/{action}" if channel else f"/topic/{action}"
    goals = targets(topic)
    if not goals:
        raise ActionError(f"topic {topic.name} has no partition leader to send {action} to")

    async def one(client: httpx.AsyncClient, t: ActionTarget) -> str | None:
        params = {"topic": topic.name}
        if channel:
            params["channel"] = channel
        if t.partition is not None:
            params["partition"] = str(t.partition)
        try:
            resp = await client.post(f"http://{t.node}{path}", params=params)
        except httpx.HTTPError as exc:
            return f"{t.node} ({describe_http_error(exc)})"
        if resp.status_code != 200:
            return f"{t.node} (HTTP {resp.status_code}: {resp.text.strip()[:80]})"
        return None

    async with http_client(timeout=timeout) as client:
        failures = [f for f in await asyncio.gather(*(one(client, t) for t in goals)) if f]
    if failures:
        what = describe(action, topic.name, channel)
        raise ActionError(f"{what} failed on {', '.join(failures)}")
    return len(goals)
