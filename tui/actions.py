"""The dashboard's actions: pause/unpause/empty a channel, pause/unpause a topic.

Each is sent by :mod:`nsqctl.admin`, planned as the CLI's ``topic``/``channel`` commands
are, to what the last poll showed: the nsqd leading each partition (every nsqd holding the
topic on the original family), with ``partition=`` on the redesign. Before it is sent the
plan is put in words and what it would drop is measured exactly as the CLI does
(:func:`nsqctl.admin.describe_plan`, :func:`nsqctl.admin.measure_plan`), and the answer it
needs is the CLI's rule (:func:`nsqctl.admin.confirmation`): a yes, or the topic's name
above the threshold. Before anything is sent the CLI's preparation runs
(:func:`nsqctl.admin.prepare`: the topic found afresh, every nsqd of the plan asked, each
redesign partition's ISR checked), so a plan the CLI would refuse is refused here in its
words. This module only adds what the dashboard offers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from nsqctl import admin
from nsqctl.errors import AdminError
from nsqctl.stats.view import ClusterView, TopicView

Action = Literal["pause", "unpause", "empty"]


def unsupported(action: Action, topic: TopicView, channel: str | None) -> str | None:
    """Why the dashboard will not do this at all (asked before the operator confirms it)."""
    if channel is None and action == "empty":
        return "emptying a whole topic is not offered here: pick a channel"
    if channel is None and topic.is_redesign:
        # youzan's nsqd has no /topic/pause or /topic/unpause (404)
        return f"the redesign nsqd cannot {action} a topic: {action} its channels instead"
    return None


def read_only_refusal(origin: str, what: str) -> str:
    """The one notification of every dashboard action refused under read-only (``origin``:
    what set it), so that each says it alike."""
    return f"read-only (from {origin}): {what} changes the cluster; not sent"


def describe(action: Action, topic: str, channel: str | None) -> str:
    what = f"channel {topic}/{channel}" if channel else f"topic {topic}"
    return f"{action} {what}"


def placement_of(topic: TopicView) -> admin.Placement:
    """Where the action goes: every partition's leader; one without a leader is skipped."""
    family: admin.Family = "redesign" if topic.is_redesign else "original"
    leaders = [(p.leader, p.partition) for p in topic.partitions if p.leader]
    return admin.placement_from_leaders(topic.name, family, leaders)


@dataclass(frozen=True)
class PreparedAction:
    """An action planned on the last poll's placement, with what it would lose and the
    answer the operator must give; :func:`send` sends exactly these stages."""

    action: Action
    topic: str
    channel: str | None
    placement: admin.Placement
    stages: list[list[admin.AdminRequest]]
    blast: admin.BlastRadius | None
    ask: admin.Confirmation

    @property
    def what(self) -> str:
        return describe(self.action, self.topic, self.channel)

    def dialog_text(self) -> str:
        """The plan in words, then the loss preview (the CLI's prompt, in one block)."""
        lines = [f"About to {self.what}:"]
        lines.extend(f"  {line}" for line in admin.describe_plan(self.stages))
        lines.extend(self.blast.lines() if self.blast is not None else ())
        return "\n".join(lines)


def plan_action(action: Action, topic: TopicView, channel: str | None = None) -> PreparedAction:
    """Plan ``action`` on the poll's placement, as :func:`nsqctl.admin.run_action` plans it;
    nothing measured yet (a plain yes). Raises :class:`AdminError` when it is not offered
    or no nsqd could take it."""
    reason = unsupported(action, topic, channel)
    if reason:
        raise AdminError(reason)
    placement = placement_of(topic)
    if not placement.nsqds:
        raise AdminError(f"topic {topic.name} has no partition leader to send {action} to")
    if channel is None:
        stages = admin.plan_topic_action(action, placement)
    else:
        stages = admin.plan_channel_action(action, placement, channel)
    ask = admin.confirmation(None)
    return PreparedAction(action, topic.name, channel, placement, stages, None, ask)


def needs_measure(prepared: PreparedAction) -> bool:
    """Whether the action drops messages, so what it would lose is asked for first."""
    return prepared.action in admin.MEASURED


async def measure(
    prepared: PreparedAction, confirm_above: int = admin.DEFAULT_CONFIRM_ABOVE
) -> PreparedAction:
    """``prepared`` with its loss measured on the nsqds it goes to, as the CLI measures it
    (one /stats each, now: not part of the poll), and the answer that loss needs."""
    blast = await admin.measure_plan(
        prepared.action, prepared.placement, prepared.stages, channel=prepared.channel
    )
    return replace(prepared, blast=blast, ask=admin.confirmation(blast, confirm_above))


def where_to_look(view: ClusterView) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The addresses the CLI would be given for this dashboard's cluster: its lookupds,
    else its nsqds (``lookupd_http``, ``nsqd_http`` of :func:`nsqctl.admin.prepare`)."""
    lookupds = tuple(lk.address for lk in view.lookupds)
    return lookupds, () if lookupds else tuple(n.address for n in view.nodes)


def _requests(stages: list[list[admin.AdminRequest]]) -> set[admin.AdminRequest]:
    return {r for stage in stages for r in stage}


async def send(prepared: PreparedAction, view: ClusterView) -> int:
    """Send the prepared stages; returns how many nsqds accepted them. Raises
    :class:`AdminError` naming every nsqd that did not accept.

    First the topic is found and the plan checked exactly as the CLI does it
    (:func:`nsqctl.admin.prepare`, with ``view``'s addresses): an nsqd the plan needs that
    does not answer, a redesign partition whose ISR lists a down nsqd, refuse it in the
    CLI's words with nothing sent. What was asked about is sent only when that plan is
    still the one the operator saw."""
    kind = "topic" if prepared.channel is None else "channel"
    lookupds, nsqds = where_to_look(view)
    placement, stages = await admin.prepare(
        kind, prepared.topic, lookupds, nsqds, action=prepared.action, channel=prepared.channel
    )
    if _requests(stages) != _requests(prepared.stages):
        now = "; ".join(admin.describe_plan(stages))
        what = admin.action_subject(kind, prepared.action, prepared.topic, prepared.channel)
        raise AdminError(
            f"{what} refused, nothing was changed: the topic moved since it was shown "
            f"(now: {now}); ask again"
        )
    report = await admin.run_plan(
        f"{kind} {prepared.action}",
        placement,
        prepared.stages,
        channel=prepared.channel,
    )
    report.raise_for_failures()
    return len(report.results)
