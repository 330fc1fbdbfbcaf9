"""Partition operations planned and checked before anything is sent (the CLI shows the
plan and asks first): inputs within nsqlookupd's limits, nodes registered, placement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

from nsqctl.admin.partitions.carry import TEMPORARY
from nsqctl.admin.partitions.stalled import dead_partitions, dead_words
from nsqctl.admin.partitions.state import (
    NsqdNode,
    PartitionState,
    RegisteredNsqds,
    TopicState,
    redesign_leader,
    registered_nsqds,
    topic_state,
)
from nsqctl.admin.placement import fetch_stats
from nsqctl.admin.planners import MAX_REPLICAS, check_node_count, nodes_needed
from nsqctl.admin.requests import AdminRequest, Node, admin_client
from nsqctl.errors import AdminError, ConfigError
from nsqctl.protocol.names import validate_topic

MAX_EXPAND = 254  # ExpandTopicPartition refuses >= MAX_PARTITION_NUM (255)
MAX_SYNC_EVERY = 4000
MAX_RETENTION_DAYS = 60


@dataclass
class PartitionPlan:
    """A checked operation, ready to show (``stages``) and to send (:func:`apply_plan`)."""

    action: str
    topic: str
    leader: str
    stages: list[list[AdminRequest]]
    before: TopicState
    nodes: dict[str, NsqdNode]
    partition_num: int = 0  # expand: the new count
    partition: int | None = None  # move
    target: str | None = None  # move: the nsqd HTTP address
    source: str | None = None  # move
    move_leader: bool = False
    replicas: int | None = None  # update
    channels: tuple[str, ...] = ()  # expand: the channels carried onto the new partitions
    notes: list[str] = field(default_factory=list)
    preview: list[str] = field(default_factory=list)
    """What the plan will do, in words (nodes by host:port), for the prompt and --dry-run."""


def _node(nodes: RegisteredNsqds, address: str, flag: str) -> NsqdNode:
    """The registered nsqd at ``address``: its HTTP address (as `nsqctl dash` shows) or
    its TCP address (as `nsqctl lookup` also shows)."""
    if address in nodes:
        return nodes[address]
    for node in nodes.values():
        if node.tcp == address:
            return node
    if (silent := nodes.silent_http(address)) is not None:
        raise AdminError(
            f"{flag} {address}: nsqd {silent} is registered with nsqlookupd but does not "
            "answer (hung, or just gone): it cannot take part in a move now, nothing was "
            "changed; run it again once it answers, or name another nsqd"
        )
    known = ", ".join(sorted(nodes)) or "none"
    raise ConfigError(
        f"{flag} {address}: not an nsqd registered with nsqlookupd (registered nsqd HTTP "
        f"addresses: {known}; see `dash()` or `lookup(TOPIC)`)"
    )


async def _context(
    client: httpx.AsyncClient,
    lookupd_http: Sequence[str],
    topic: str,
    what: str,
) -> tuple[str, RegisteredNsqds, TopicState]:
    validate_topic(topic)
    leader = await redesign_leader(client, lookupd_http, what)
    nodes = await registered_nsqds(client, leader)
    return leader, nodes, await topic_state(client, leader, topic, nodes)


def leader_request(leader: str, path: str, **params: str) -> AdminRequest:
    """A request to the redesign's lookupd leader, where every partition operation goes."""
    return AdminRequest(Node(leader, "lookupd"), path, tuple(params.items()))


# ------------------------------------------------------------------ planning (checks, no change)


async def plan_expand(
    lookupd_http: Sequence[str],
    topic: str,
    partitions: int,
) -> PartitionPlan:
    """Check an expand to ``partitions``: more than now, within limits and placement."""
    async with admin_client() as client:
        leader, nodes, state = await _context(client, lookupd_http, topic, "topic expand")
    now = state.meta.partition_num
    if partitions <= now:
        raise ConfigError(
            f"topic {topic} has {now} partition(s): `partitions` must be more than {now} "
            "(partitions cannot be removed)"
        )
    if partitions > MAX_EXPAND:
        raise ConfigError(f"`partitions` must be at most {MAX_EXPAND} (nsqlookupd's limit)")
    check_node_count(
        topic, partitions, state.meta.replica, state.allow_multi, len(nodes), expanding_from=now
    )
    await _check_no_dead_partition(leader, list(lookupd_http), f"topic expand {topic}")
    async with admin_client() as client:
        holders = {a for p in state.partitions.values() for a in (p.leader, *p.isr) if a}
        channels = await topic_channels(client, sorted(holders), topic)
    req = leader_request(
        leader, "/topic/partition/expand", topic=topic, partition_num=str(partitions)
    )
    plan = PartitionPlan(
        "topic expand",
        topic,
        leader,
        [[req]],
        state,
        nodes,
        partition_num=partitions,
        channels=channels,
    )
    added = f"{now}" if partitions == now + 1 else f"{now}-{partitions - 1}"
    plan.preview = [
        f"add partition(s) {added} to topic {topic} ({now} -> {partitions}; partitions "
        f"cannot be removed), asking nsqlookupd leader {leader}",
        f"nsqlookupd places each new partition ({state.meta.replica} replica(s)) on the "
        f"registered nsqds: {', '.join(sorted(nodes))}",
        carry_words(channels, state.meta.disable_channel_auto_create, leader),
        "wait until every partition is writable",
    ]
    return plan


async def _check_no_dead_partition(leader: str, lookupd_http: list[str], what: str) -> None:
    """Refuse at once an expand or a move, which nsqlookupd would refuse as "the cluster
    is unstable" for as long as one waits: a partition, of any topic, with no live copy
    to elect a leader from (:mod:`nsqctl.admin.partitions.stalled`). Not a meta update:
    nsqlookupd takes one whatever the cluster's state."""
    dead = await dead_partitions(leader, lookupd_http)
    if dead:
        many = sum(len(parts) for parts in dead.values()) > 1
        raise AdminError(
            f"{what} refused, nothing was changed: nsqlookupd expands and moves no partition "
            "while a partition has no leader and no live copy, and "
            f"{dead_words(dead)} {'have' if many else 'has'} none (every nsqd "
            "holding it is down or not answering): bring one of its nsqds back "
            "(`node_list()` shows them), then retry"
        )


def carry_words(channels: Sequence[str], registered: bool, leader: str) -> str:
    """How an expand carries ``channels`` onto the new partitions, in words."""
    if not channels:
        return "no channel exists yet: nothing to carry onto the new partitions"
    named = ", ".join(channels)
    back = "; set a channel back to its partition's start if that partition took messages first"
    if registered:
        return (
            f"have nsqlookupd leader {leader} write the registered channel(s) {named} onto "
            f"the new partitions (registering and unregistering {TEMPORARY}), and wait "
            f"until each new partition's leader holds them before the expand is reported "
            f"done{back}"
        )
    return (
        f"create channel(s) {named} on each new partition's leader as soon as it accepts "
        f"them, before the expand is reported done{back}"
    )


async def topic_channels(
    client: httpx.AsyncClient, nsqds: Sequence[str], topic: str
) -> tuple[str, ...]:
    """Every channel any copy of ``topic`` holds on ``nsqds`` (their ``/stats``); an nsqd
    that does not answer is an error: a channel it alone holds would not be carried."""
    stats = await fetch_stats(client, nsqds, topic)
    if stats.errors:
        raise AdminError(
            "cannot list the topic's channels to carry onto the new partitions: "
            + "; ".join(stats.errors.values())
        )
    names = {
        c.name
        for node in stats.nodes.values()
        for t in node.topics
        if t.topic == topic
        for c in t.channels
    }
    return tuple(sorted(n for n in names if n))


async def plan_move(
    lookupd_http: Sequence[str],
    topic: str,
    partition: int,
    to: str,
    *,
    source: str | None = None,
) -> PartitionPlan:
    """Check a move of ``partition``'s copy on ``source`` (default: its leader) to ``to``.

    Moving the leader's copy moves leadership too; moving a follower's copy keeps the
    leader and swaps which nsqd holds a replica. Refused, as an expand is, while any
    partition has no live copy: nsqlookupd would refuse the move until it had one.
    """
    async with admin_client() as client:
        leader, nodes, state = await _context(client, lookupd_http, topic, "topic move")
    part, led_by = _led_partition(state, partition)
    target = _node(nodes, to, "`to`")
    src = _node(nodes, source or led_by, "`source`")
    move_leader = src.http == led_by
    check_move(state, part, src.http, target.http, to)
    await _check_no_dead_partition(leader, list(lookupd_http), f"topic move {topic}")
    params = {
        "topic": topic,
        "partition": str(partition),
        "move_leader": "true" if move_leader else "false",
        "move_from": src.node_id,
        "move_to": target.node_id,
    }
    req = leader_request(leader, "/topic/partition/move", **params)
    plan = PartitionPlan(
        "topic move",
        topic,
        leader,
        [[req]],
        state,
        nodes,
        partition=partition,
        target=target.http,
        source=src.http,
        move_leader=move_leader,
    )
    plan.preview = _move_preview(plan, led_by)
    return plan


def _led_partition(state: TopicState, partition: int) -> tuple[PartitionState, str]:
    """The partition to move and its leader: one the topic has, led now."""
    topic = state.topic
    if not 0 <= partition < state.meta.partition_num:
        raise ConfigError(
            f"topic {topic} has partitions 0-{state.meta.partition_num - 1}: no partition "
            f"{partition}"
        )
    part = state.partitions.get(partition)
    if part is None or part.leader is None:
        # no leader listed: an election under way, or no live copy left to elect (its
        # nsqds down), and waiting cures only the first; the lookup tells them apart
        raise AdminError(
            f"{topic} partition {partition} has no leader now: if every nsqd holding it is "
            "down, bring one back; else wait for nsqlookupd to elect one "
            f"(`lookup({topic})` shows which), then move it"
        )
    return part, part.leader


def check_move(state: TopicState, part: PartitionState, source: str, target: str, to: str) -> None:
    """Refuse a move of ``part``'s copy on ``source`` to ``target`` (nsqd HTTP addresses;
    ``to`` as the caller named it) that would do nothing, or that nsqlookupd would refuse
    or carry out against the topic's placement."""
    topic, partition = state.topic, part.partition
    move_leader = source == part.leader
    if target == source:
        raise ConfigError(f"`to` {to} is where the copy already is: name another nsqd")
    if move_leader and target == part.leader:
        raise ConfigError(f"{to} already leads {topic} partition {partition}: nothing to move")
    if not move_leader:
        if part.isr and source not in part.isr:
            raise ConfigError(
                f"`source` {source} holds no in-sync copy of {topic} partition {partition} "
                f"(ISR: {', '.join(part.isr)})"
            )
        if target in part.isr:
            raise ConfigError(
                f"`to` {to} already holds a copy of {topic} partition {partition}: to make it "
                "the leader, leave out `source`"
            )
    if not state.allow_multi:
        for other in state.partitions.values():
            if other.partition != partition and target in (*other.isr, *other.catchup):
                raise ConfigError(
                    f"{to} holds partition {other.partition} of {topic}; an unordered topic "
                    "keeps each nsqd to one partition's copy: pick another nsqd"
                )


def _move_preview(plan: PartitionPlan, led_by: str) -> list[str]:
    """The move in words, for the prompt and --dry-run."""
    topic, partition, leader = plan.topic, plan.partition, plan.leader
    if plan.move_leader:
        return [
            f"move the leader of {topic} partition {partition} from {plan.source} to "
            f"{plan.target}, asking nsqlookupd leader {leader}",
            f"{plan.target} catches up first if it holds no in-sync copy; writes to the "
            "partition pause while leadership changes hands",
            "youzan elects the new leader itself; if it picks another copy, leadership "
            "is moved on from there until the target leads (or the move fails)",
        ]
    return [
        f"move the copy of {topic} partition {partition} on {plan.source} to "
        f"{plan.target}, asking nsqlookupd leader {leader}; the leader "
        f"({led_by}) stays",
        f"{plan.target} catches up, then {plan.source} leaves the in-sync replicas",
    ]


@dataclass(frozen=True)
class MetaChange:
    """The dynamic parameters ``/topic/meta/update`` takes; None leaves one as it is."""

    replicas: int | None = None
    sync_every: int | None = None  # fsync every N messages (syncdisk)
    retention_days: int | None = None
    channel_auto_create: bool | None = None
    upgrade_ext: bool = False  # one way: an ext-header topic stays one

    def params(self) -> dict[str, str]:
        """The query parameters, each checked against nsqlookupd's limits first."""
        params: dict[str, str] = {}
        if self.replicas is not None:
            if not 1 <= self.replicas <= MAX_REPLICAS:
                raise ConfigError(f"`replicas` must be between 1 and {MAX_REPLICAS}")
            params["replicator"] = str(self.replicas)
        if self.sync_every is not None:
            if not 0 <= self.sync_every <= MAX_SYNC_EVERY:
                raise ConfigError(f"`sync_every` must be between 0 and {MAX_SYNC_EVERY} messages")
            params["syncdisk"] = str(self.sync_every)
        if self.retention_days is not None:
            if not 0 <= self.retention_days <= MAX_RETENTION_DAYS:
                raise ConfigError(f"`retention_days` must be between 0 and {MAX_RETENTION_DAYS}")
            params["retention"] = str(self.retention_days)
        if self.upgrade_ext:
            params["upgradeext"] = "true"
        if self.channel_auto_create is not None:
            params["disable_channel_auto_create"] = str(not self.channel_auto_create).lower()
        if not params:
            raise ConfigError(
                "nothing to update: give `replicas`, `sync_every`, `retention_days`, "
                "`upgrade_ext` or `channel_auto_create`"
            )
        return params


def _check_nodes_up(state: TopicState, nodes: int) -> None:
    """Refuse a meta change nsqlookupd would refuse for the nodes up, which it checks on
    every change against the topic's placement (its ``updateTopicMeta``): with an nsqd of
    the topic down it answers "No node is available" until one is back."""
    meta = state.meta
    need = nodes_needed(meta.partition_num, meta.replica, state.allow_multi)
    if nodes >= need:
        return
    shape = f"{meta.partition_num} partition(s) x {meta.replica} replica(s)"
    raise AdminError(
        f"topic update {state.topic} refused, nothing was changed: nsqlookupd changes a "
        f"topic's meta only while the nsqds its placement needs are up ({need} for "
        f"{shape}{', ordered' if state.allow_multi else ''}) and {nodes} are registered: "
        "bring the missing nsqds back (`node_list()` shows them), then retry"
    )


async def plan_update(
    lookupd_http: Sequence[str],
    topic: str,
    change: MetaChange,
) -> PartitionPlan:
    """Check a meta update: at least one parameter, each within nsqlookupd's limits."""
    params = {"topic": topic, **change.params()}
    async with admin_client() as client:
        leader, nodes, state = await _context(client, lookupd_http, topic, "topic update")
    replicas = change.replicas
    if replicas is not None:
        check_node_count(topic, state.meta.partition_num, replicas, state.allow_multi, len(nodes))
    else:
        _check_nodes_up(state, len(nodes))
    req = leader_request(leader, "/topic/meta/update", **params)
    plan = PartitionPlan("topic update", topic, leader, [[req]], state, nodes, replicas=replicas)
    changes = ", ".join(f"{k}={v}" for k, v in params.items() if k != "topic")
    plan.preview = [f"set {changes} on topic {topic}, asking nsqlookupd leader {leader}"]
    if change.sync_every is not None or change.retention_days is not None:
        plan.notes.append(
            "sync-every and retention-days are kept in etcd; nsqlookupd does not show them "
            "over HTTP, so they are reported as accepted"
        )
    return plan
