"""Judge a window of cluster views against a :class:`RuleSet`.

The window is consecutive :class:`ClusterView` polls, oldest first, from one
:class:`~nsqctl.stats.sources.StatsSession` (so each channel carries its depth history).
State rules (depth, node down, leader, ISR, not seen, leftover) read the newest view; rules about
change (rates, time to drain, orphan, poison) read the window and, with fewer than two
polls, are ``unknown``: a check that could not see change must not say all is well. For
the same reason the rules that stand on nsqlookupd's answers (no-leader and isr on the
redesign, not-seen on the original) are ``unknown`` when no nsqlookupd answered
(:func:`lookupd_blind`), besides what they judge from the nsqds.

A redesign topic nsqlookupd answered as not found while an nsqd still holds a copy (the
view's :attr:`~nsqctl.stats.view.TopicView.deleted`) is data a deleted topic left behind:
its partitions have no leader by design, so ``leftover`` judges it (one finding per topic,
a warning by default, saying what removes it) instead of ``no-leader`` paging for each.
Only nsqlookupd's answer tells it: with none ever answered it is judged as any partition
with no leader, and no-leader is ``unknown`` besides.

The operator definitions (orphan, poison, drain rate, time to drain, growth, counter
rates) are those of :mod:`nsqctl.stats.rules`, and what a channel holds is that of
:mod:`nsqctl.stats.hotspots` (so ``check``, ``top`` and the dashboard flag the same
channels); this module only applies thresholds and globs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from nsqctl.health.findings import Finding
from nsqctl.health.spec import Rule, RuleSet
from nsqctl.health.time_to_drain import ChannelKey, depth_points, estimate
from nsqctl.stats.coverage import UNREGISTERED, holders_words
from nsqctl.stats.hotspots import held_messages
from nsqctl.stats.rules import (
    GROWING_SAMPLES,
    delta,
    is_growing,
    is_orphan,
    is_poison,
    rate,
)
from nsqctl.stats.view import (
    ChannelView,
    ClusterView,
    PartitionView,
    TopicView,
    behind,
    deleted_words,
    isr_lacking,
    isr_short,
    stale_copies,
    stale_words,
)


def unreachable(view: ClusterView) -> str | None:
    """Why nothing can be judged from ``view``, or None when the cluster answered.

    No nsqd answered and no nsqlookupd either (or none was asked): a wrong address or a
    network fault, not an outage to report node by node. When a lookupd answered, dead
    nsqds are real and the node-down rule reports them.
    """
    lookupd_up = any(lk.ok for lk in view.lookupds)
    if any(n.stats.state != "down" for n in view.nodes) or (view.nodes and lookupd_up):
        return None
    if view.lookupds and not lookupd_up:
        where = ", ".join(lk.address for lk in view.lookupds)
        return f"no nsqlookupd answered ({where})"
    if view.nodes:
        causes = "; ".join(f"{n.address}: {n.stats.error or n.stats.state}" for n in view.nodes)
        return f"no nsqd answered /stats ({causes})"
    return view.errors[0] if view.errors else "no nsqd found"


@dataclass(frozen=True)
class _Window:
    views: Sequence[ClusterView]
    drain: Mapping[ChannelKey, Sequence[tuple[float, int]]]

    @property
    def last(self) -> ClusterView:
        return self.views[-1]

    def first_channel(self, topic: str, channel: str) -> tuple[ChannelView, float] | None:
        """The channel in the oldest view that has it, with that view's time."""
        for view in self.views[:-1]:
            tv = view.topic(topic)
            found = tv.channel(channel) if tv is not None else None
            if found is not None:
                return found, view.taken_at
        return None

    def depths(self, ch: ChannelView) -> tuple[float, ...]:
        return ch.depth_history[-len(self.views) :]


def _shown(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:.1f}"


def _judge(rule: Rule, value: float, what: str, unit: str, topic: str, channel: str) -> Finding:
    assert rule.threshold is not None
    status = rule.threshold.severity(value)
    limit = rule.threshold.limit(status)
    first = rule.threshold.warn if rule.threshold.warn is not None else rule.threshold.crit
    bound = first if limit is None else limit
    sign = "<=" if limit is None else ">"
    return Finding(
        status,
        rule.kind,
        f"{what} {_shown(value)}{unit} {sign} {_shown(bound)}{unit}",
        topic=topic,
        channel=channel,
        value=value,
        threshold=bound,
    )


def _channel_findings(
    rules: RuleSet, window: _Window, topic: TopicView, ch: ChannelView
) -> Iterator[Finding]:
    t, c = topic.name, ch.name
    depths = window.depths(ch)
    need = f"needs 2 polls of the channel, got {len(depths)}"

    rule = rules.rule_for("max-depth", t, c)
    if rule is not None:
        yield _judge(rule, ch.depth, "depth", "", t, c)

    rule = rules.rule_for("max-time-to-drain", t, c)
    if rule is not None and rule.threshold is not None:
        drain = estimate(window.drain.get((t, c), ()))
        if drain is None:
            yield Finding("unknown", rule.kind, need, topic=t, channel=c)
        elif drain.time_to_drain is None:  # no value: unbounded, not the depth in seconds
            yield Finding(
                "crit",
                rule.kind,
                f"depth {ch.depth} did not fall {drain.window}: it does not drain at this pace",
                topic=t,
                channel=c,
                threshold=rule.threshold.crit,
            )
        else:
            found = _judge(rule, drain.time_to_drain, "drains in", "s", t, c)
            yield replace(found, message=f"{found.message}, at its pace {drain.window}")

    for kind, counter, what in (
        ("max-requeue-rate", "requeued", "requeues"),
        ("max-timeout-rate", "timed_out", "timeouts"),
    ):
        rule = rules.rule_for(kind, t, c)
        if rule is None:
            continue
        earlier = window.first_channel(t, c)
        per_second = None
        if earlier is not None:
            before, at = earlier
            dt = window.last.taken_at - at
            per_second = rate(getattr(ch, counter), getattr(before, counter), dt)
        if per_second is None:
            why = f"{need} (or its counters were reset)" if earlier is not None else need
            yield Finding("unknown", rule.kind, why, topic=t, channel=c)
        else:
            yield _judge(rule, per_second, what, "/s", t, c)

    rule = rules.rule_for("poison", t, c)
    if rule is not None:
        yield _poison(rule, window, topic, ch, need)

    rule = rules.rule_for("orphan", t, c)
    if rule is not None:
        if len(depths) < 2:
            yield Finding("unknown", rule.kind, need, topic=t, channel=c)
        else:
            growing = is_growing(depths, min(GROWING_SAMPLES, len(depths) - 1))
            orphan = is_orphan(ch.client_count, growing)
            yield Finding(
                rule.hit if orphan else "ok",
                rule.kind,
                (
                    f"depth grew {_shown(depths[0])} -> {ch.depth} with no client connected"
                    if orphan
                    else f"depth {ch.depth}, {ch.client_count} client(s)"
                ),
                topic=t,
                channel=c,
                value=ch.depth,
            )


def _poison(rule: Rule, window: _Window, topic: TopicView, ch: ChannelView, need: str) -> Finding:
    """Requeues over the whole window against what the channel holds now: the window's
    ends are the two polls :func:`~nsqctl.stats.rules.is_poison` compares."""
    t, c = topic.name, ch.name
    earlier = window.first_channel(t, c)
    requeues = delta(ch.requeued, earlier[0].requeued) if earlier is not None else None
    if earlier is None or requeues is None:
        why = f"{need} (or its counters were reset)" if earlier is not None else need
        return Finding("unknown", rule.kind, why, topic=t, channel=c)
    held = held_messages(topic, ch)
    span = window.last.taken_at - earlier[1]
    poisoned = is_poison(held, requeues)
    return Finding(
        rule.hit if poisoned else "ok",
        rule.kind,
        (
            f"{requeues} requeues of the {held} message(s) it holds in {span:.1f}s: "
            "the same messages fail over and over"
            if poisoned
            else f"{requeues} requeues, {held} message(s) held"
        ),
        topic=t,
        channel=c,
        value=requeues,
    )


def _partition_findings(rules: RuleSet, topic: TopicView) -> Iterator[Finding]:
    if not topic.is_redesign:
        return
    if topic.deleted:  # no leader by design: the leftover rule says what it is
        rule = rules.rule_for("leftover", topic.name, None)
        if rule is not None:
            yield Finding(rule.hit, rule.kind, deleted_words(topic), topic=topic.name)
        return
    leader_rule = rules.rule_for("no-leader", topic.name, None)
    isr_rule = rules.rule_for("isr", topic.name, None)
    for p in topic.partitions:
        if leader_rule is not None:
            copies = ", ".join(p.replicas) or "no nsqd that is up"
            why = (
                f"no writable leader (copies on {copies})"
                if p.live
                else "no leader and no live copy: every nsqd holding it is down or not answering"
            )
            yield Finding(
                leader_rule.hit if p.no_leader else "ok",
                leader_rule.kind,
                why if p.no_leader else "leader up",
                topic=topic.name,
                partition=p.partition,
                node=p.leader,
            )
        if isr_rule is not None and p.isr is not None:
            yield _isr_finding(isr_rule, topic, p, p.isr)


def _isr_finding(rule: Rule, topic: TopicView, p: PartitionView, isr: tuple[str, ...]) -> Finding:
    """The partition's ISR judged by what the topic needs (:func:`isr_lacking`): a copy
    still catching up while the ISR is full (a move under way), or an old copy a move or
    drain left (youzan removes it), is named but is no warning. ``isr``: the partition's
    (known)."""
    replicas = topic.replicas_configured
    lacking = isr_lacking(p, replicas)
    short = isr_short(p, replicas)
    if short:
        message = (
            f"ISR short: {len(isr)} of {replicas} replicas in sync ({', '.join(isr) or 'none'})"
        )
    elif lacking:  # replicas unknown: any copy outside the ISR may be one it needs
        message = f"{', '.join(p.out_of_sync)} not in the ISR ({len(isr)} in sync)"
    else:
        message = f"{len(isr)} in sync"
    if short or not lacking:
        out = behind(p, replicas)
        catching = [n for n in out if n in (p.catchup or ())]
        dropped = [n for n in out if n not in catching]
        if catching:
            message += f"; catching up: {', '.join(catching)}"
        if dropped:
            message += f"; not in the ISR: {', '.join(dropped)}"
    stale = stale_copies(p, replicas)
    if stale:
        message += f"; {stale_words(stale)}"
    return Finding(
        rule.hit if lacking else "ok",
        rule.kind,
        message,
        topic=topic.name,
        partition=p.partition,
        node=p.leader,
        value=len(isr),
    )


def _not_seen_finding(rule: Rule, topic: TopicView) -> Finding:
    """An original topic no answering nsqd holds (the view's :attr:`TopicView.not_seen`):
    its messages and channels are out of reach until one of its nsqds answers again."""
    if not topic.not_seen:
        copies = len(topic.partitions)  # an original topic: one copy per nsqd that answered
        return Finding("ok", rule.kind, f"on {copies} answering nsqd(s)", topic=topic.name)
    holders = holders_words(topic.held_by, topic.held_by_guessed)
    if topic.unregistered:
        return Finding("warn", rule.kind, unregistered_words(topic.name, holders), topic=topic.name)
    return Finding(
        rule.hit,
        rule.kind,
        f"no nsqd that answered holds it ({holders} down): nobody can read it, or publish "
        f"to it where it lives, until one answers again; fix: bring {holders} back",
        topic=topic.name,
    )


def unregistered_words(topic: str, holders: str) -> str:
    """A not-seen topic nsqlookupd lists with no producer: it may be on the nsqds down, or
    a registration nsqlookupd kept after its last producer left (nothing tells them apart:
    :class:`nsqctl.stats.model.UnseenTopic`), so a warning saying both, never an outage.
    The registration's fix is ``topic delete``, which unregisters it on every nsqlookupd
    and deletes it on the nsqds that hold it; it refuses while an nsqd it is given does not
    answer (that nsqd might hold it), so it is given the nsqds in service only."""
    return (
        f"{UNREGISTERED}: may be on {holders} (down), or a registration nsqlookupd kept "
        f"after its last producer left; fix: bring {holders} back, or, if nothing holds it, "
        f"delete the registration: nsqctl topic delete {topic}, given only the nsqlookupds "
        "and the nsqds in service (it refuses while an nsqd it is given is down)"
    )


def evaluate(
    views: Sequence[ClusterView], rules: RuleSet, *, polls: int | None = None
) -> list[Finding]:
    """Every rule on every subject it covers in the newest of ``views`` (oldest first):
    ok ones too, so an exporter can show a status per rule and subject.

    The rates, orphan and poison rules see the last ``polls`` views (all when None); the
    time to drain sees those of the last :data:`~nsqctl.health.time_to_drain.DRAIN_WINDOW`
    seconds, so a monitor may pass more views than ``polls`` to steady it."""
    if not views:
        raise ValueError("evaluate needs at least one view")
    recent = views if polls is None else views[-max(1, polls) :]
    window = _Window(recent, depth_points(views))
    findings: list[Finding] = []
    node_rule = rules.rule_for("node-down", None, None)
    if node_rule is not None:
        for node in window.last.nodes:
            down = node.stats.state == "down"
            findings.append(
                Finding(
                    node_rule.hit if down else "ok",
                    node_rule.kind,
                    f"does not answer /stats: {node.stats.error or 'down'}" if down else "up",
                    node=node.address,
                )
            )
        findings.extend(lookupd_findings(node_rule, window.last))
    for topic in window.last.topics:
        findings.extend(_partition_findings(rules, topic))
        seen_rule = None if topic.is_redesign else rules.rule_for("not-seen", topic.name, None)
        if seen_rule is not None:
            findings.append(_not_seen_finding(seen_rule, topic))
        for ch in topic.channels:
            findings.extend(_channel_findings(rules, window, topic, ch))
    findings.extend(lookupd_blind(rules, window.last))
    findings.extend(unmatched(rules, window.last))
    return findings


_BLIND_REDESIGN = (
    (
        "no-leader",
        "a partition whose every copy is on an nsqd that is down is counted only by "
        "nsqlookupd's topic meta, so only the partitions the answering nsqds hold were judged, "
        "and a deleted topic's data left on an nsqd is told only by nsqlookupd having no meta "
        "for it, so it was judged as a partition with no leader",
    ),
    (
        "isr",
        "the replicas each topic was created with are known only to nsqlookupd's topic "
        "meta, so an ISR short of them cannot be told",
    ),
)
_BLIND_ORIGINAL = (
    (
        "not-seen",
        "a topic whose every nsqd is down, or on an nsqd only nsqlookupd knows, is listed "
        "only by nsqlookupd, so only the topics of the nsqds that answered were judged",
    ),
)


def lookupd_blind(rules: RuleSet, view: ClusterView) -> Iterator[Finding]:
    """One ``unknown`` finding per enabled rule that stands on nsqlookupd, when every
    nsqlookupd asked is down: what the check could not see and why, so that the findings
    those rules could still make from the nsqds do not read as all clear."""
    if not view.lookupds or any(lk.ok for lk in view.lookupds):
        return
    why = "; ".join(f"{lk.address}: {lk.error or 'down'}" for lk in view.lookupds)
    for kind, blind in _BLIND_REDESIGN if view.is_redesign else _BLIND_ORIGINAL:
        if rules.active(kind):
            yield Finding(
                "unknown",
                kind,
                f"not judged: no nsqlookupd answered ({why}): {blind}; fix: bring an "
                "nsqlookupd back, or check against one that answers",
            )


def lookupd_findings(rule: Rule, view: ClusterView) -> Iterator[Finding]:
    """The node-down rule on each nsqlookupd: one down hides the nsqds it alone knew (and
    the partitions they hold); one that cannot reach etcd (redesign) serves what it last
    knew and cannot elect a leader, a warning while the nsqds still take writes."""
    for lk in view.lookupds:
        if not lk.ok:
            status, message = rule.hit, f"nsqlookupd does not answer: {lk.error or 'down'}"
        elif lk.etcd_error:
            status = "warn"
            message = (
                f"nsqlookupd cannot reach etcd ({lk.etcd_error}): no leader can be elected "
                "and no topic created or deleted until etcd answers"
            )
        else:
            status, message = "ok", "nsqlookupd up"
        yield Finding(status, rule.kind, message, node=lk.address)


PARTITION_RULES = ("no-leader", "isr")
"""Rule kinds judged per redesign partition."""
REDESIGN_TOPIC_RULES = ("leftover",)
"""Rule kinds judged per redesign topic (only one nsqlookupd has no meta for)."""
TOPIC_RULES = ("not-seen",)
"""Rule kinds judged per original topic; every other scoped kind is per channel."""


def unmatched(rules: RuleSet, view: ClusterView) -> Iterator[Finding]:
    """A warning for each enabled rule naming a topic or channel that matches nothing.

    A check that passes because its rule covers nothing watches nothing: a misspelt name,
    or a topic gone (deleted, or every nsqd holding it down), would otherwise read as all
    clear. Rules for every topic and channel (``*``) are left alone: an empty cluster is
    not a mistake in them."""
    for rule in rules:
        if not rule.enabled or (rule.topic, rule.channel) == ("*", "*"):
            continue
        if rule.kind in PARTITION_RULES or rule.kind in REDESIGN_TOPIC_RULES:
            what = "redesign topic"
            hit = any(t.is_redesign and rule.matches(t.name, None) for t in view.topics)
        elif rule.kind in TOPIC_RULES:
            what = "original topic"
            hit = any(not t.is_redesign and rule.matches(t.name, None) for t in view.topics)
        else:
            what = "channel"
            hit = any(rule.matches(t.name, c.name) for t in view.topics for c in t.channels)
        if not hit:
            yield Finding(
                "warn",
                rule.kind,
                f"rule {rule} matches no {what} the cluster shows: check the name, or the "
                "topic is gone (deleted, or on nsqds that are down)",
                topic=rule.topic,
                channel=None if rule.channel == "*" else rule.channel,
            )


def isr_focus(rules: RuleSet) -> frozenset[str] | None:
    """The topics whose ISR polls must ask (the redesign's ``/coordinator/stats``, one
    request per topic and leader): those the ``isr`` rules can cover, in their order (a
    later rule for every topic resets the earlier ones); ``None`` for every topic, as
    soon as an enabled rule is a glob."""
    focus: set[str] | None = set()
    for rule in rules.of("isr"):
        glob = any(ch in rule.topic for ch in "*?[")
        if rule.topic == "*":
            focus = None if rule.enabled else set()
        elif rule.enabled:
            if glob:
                focus = None
            elif focus is not None:
                focus.add(rule.topic)
        elif not glob and focus is not None:
            focus.discard(rule.topic)
    return None if focus is None else frozenset(focus)
