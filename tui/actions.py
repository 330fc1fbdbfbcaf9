"""The dashboard's actions: pause/unpause/empty a channel, pause/unpause a topic.

Each is sent by :mod:`nsqctl.admin`, planned as the CLI's ``topic``/``channel`` commands
are: first on what the last poll showed (the nsqd leading each partition, every nsqd
holding the topic on the original family, with ``partition=`` on the redesign), to refuse
at once what is not offered. An action that drops messages is then prepared afresh before
the operator is asked, in the CLI's order (:func:`nsqctl.admin.prepare`: the topic found
now, every nsqd of the plan asked, each redesign partition's ISR checked; then
:func:`nsqctl.admin.measure_plan`), so the loss shown is the cluster's at that moment, on
every nsqd the topic is on now, not on those the last poll saw: messages published since,
on an nsqd the poll had not seen the topic on, are counted too. The plan is put in words
(:func:`nsqctl.admin.describe_plan`) and the answer it needs is the CLI's rule
(:func:`nsqctl.admin.confirmation`): a yes, or the topic's name above the threshold.
Before anything is sent the preparation runs again, so a plan the CLI would refuse is
refused here in its words, and a topic that moved while the question was open is not
changed. This module only adds what the dashboard offers.
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
    """An action planned on the last poll's placement (or afresh, by :func:`measure`),
    with what it would lose and the answer the operator must give; :func:`send` sends
    exactly these stages."""

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


def where_to_look(view: ClusterView) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The addresses the CLI would be given for this dashboard's cluster: its lookupds,
    else its nsqds (``lookupd_http``, ``nsqd_http`` of :func:`nsqctl.admin.prepare`)."""
    lookupds = tuple(lk.address for lk in view.lookupds)
    return lookupds, () if lookupds else tuple(n.address for n in view.nodes)


def _kind(prepared: PreparedAction) -> str:
    return "topic" if prepared.channel is None else "channel"


async def _prepared_now(
    prepared: PreparedAction, view: ClusterView
) -> tuple[admin.Placement, list[list[admin.AdminRequest]]]:
    """The plan as the CLI makes it now (:func:`nsqctl.admin.prepare`, with ``view``'s
    addresses): the topic found afresh and every check run; :class:`AdminError` in the
    CLI's words when the CLI would refuse it, with nothing sent."""
    lookupds, nsqds = where_to_look(view)
    return await admin.prepare(
        _kind(prepared),
        prepared.topic,
        lookupds,
        nsqds,
        action=prepared.action,
        channel=prepared.channel,
    )


async def measure(
    prepared: PreparedAction, view: ClusterView, confirm_above: int = admin.DEFAULT_CONFIRM_ABOVE
) -> PreparedAction:
    """``prepared`` planned afresh and checked as the CLI plans and checks it (``view``
    gives only the addresses to ask) and, for an action that drops messages, its loss
    measured on the nsqds that plan goes to (one /stats each, now: not part of the poll)
    with the answer that loss needs: what the CLI shows before it asks, at the moment the
    operator is asked. Raises :class:`AdminError` when the CLI would refuse it, so the
    operator is never asked to confirm what is then refused."""
    placement, stages = await _prepared_now(prepared, view)
    if not needs_measure(prepared):
        return replace(prepared, placement=placement, stages=stages)
    blast = await admin.measure_plan(prepared.action, placement, stages, channel=prepared.channel)
    return replace(
        prepared,
        placement=placement,
        stages=stages,
        blast=blast,
        ask=admin.confirmation(blast, confirm_above),
    )


def _requests(stages: list[list[admin.AdminRequest]]) -> set[admin.AdminRequest]:
    return {r for stage in stages for r in stage}


async def send(prepared: PreparedAction, view: ClusterView) -> int:
    """Send the prepared stages; returns how many nsqds accepted them. Raises
    :class:`AdminError` naming every nsqd that did not accept.

    First the topic is found and the plan checked exactly as the CLI does it
    (:func:`nsqctl.admin.prepare`, with ``view``'s addresses): an nsqd the plan needs that
    does not answer, an original nsqlookupd the nsqds were found through that does not
    answer (an nsqd registered with it alone would be missed), a redesign partition whose
    ISR lists a down nsqd, refuse it in the CLI's words with nothing sent. What was asked
    about is sent only when that plan is still the one the operator saw."""
    kind = _kind(prepared)
    placement, stages = await _prepared_now(prepared, view)
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
