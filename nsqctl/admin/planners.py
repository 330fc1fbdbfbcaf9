"""The planners: pure functions from a :class:`Placement` to staged HTTP requests, so
both families' URLs are unit-tested without servers. No IO here."""

from __future__ import annotations

from collections.abc import Sequence

from nsqctl.admin.base import FamilyUnsupportedError
from nsqctl.admin.placement import Placement
from nsqctl.admin.requests import AdminRequest, Node
from nsqctl.errors import AdminError, ConfigError
from nsqctl.protocol.raw_message import Family

MAX_PARTITIONS = 255  # redesign lookupd limits
MAX_REPLICAS = 5

TOPIC_ACTIONS = ("pause", "unpause", "empty")
CHANNEL_ACTIONS = ("create", "delete", "pause", "unpause", "empty", "skip", "unskip", "setoffset")
REDESIGN_ONLY = ("skip", "unskip", "setoffset")


def _req(node: Node, path: str, body: bytes | None = None, /, **params: str) -> AdminRequest:
    return AdminRequest(node, path, tuple(params.items()), body)


def _need_nsqds(placement: Placement, what: str) -> None:
    if not placement.nsqds:
        raise AdminError(
            f"topic {placement.topic!r} is registered but no nsqd has it yet, so there is "
            f"nothing to {what}: publish to it, or check `lookup({placement.topic})`"
        )


def check_create_options(
    family: Family, partitions: int, replicas: int, ordered: bool, ext: bool
) -> None:
    """Reject options the family cannot honour before anything is sent."""
    if family == "original":
        if partitions != 1 or replicas != 1 or ordered or ext:
            raise ConfigError(
                "the original NSQ has no partitions, replicas, ordered or ext topics: drop "
                "`partitions`/`replicas`/`ordered`/`ext`, or point at a redesign cluster"
            )
        return
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ConfigError(f"`partitions` must be between 1 and {MAX_PARTITIONS}")
    if not 1 <= replicas <= MAX_REPLICAS:
        raise ConfigError(f"`replicas` must be between 1 and {MAX_REPLICAS}")


def nodes_needed(partitions: int, replicas: int, ordered: bool) -> int:
    """The nsqds nsqlookupd needs registered to place a topic (and to change its meta):
    every replica of a partition on its own nsqd, and an unordered topic at most one
    partition replica on a node; an ordered topic may put several partitions on one."""
    return replicas if ordered else partitions * replicas


def check_node_count(
    topic: str,
    partitions: int,
    replicas: int,
    ordered: bool,
    nodes: int,
    *,
    expanding_from: int | None = None,
) -> None:
    """nsqlookupd's placement rule (:func:`nodes_needed`), said before it answers a bare
    "No node is available". ``expanding_from``: the partitions an existing topic has, which
    an expand to ``partitions`` would grow (:func:`_check_expand`)."""
    if expanding_from is not None:
        _check_expand(topic, partitions, replicas, ordered, nodes, expanding_from)
        return
    if replicas > nodes:
        raise ConfigError(
            f"topic {topic}: {replicas} replicas need {replicas} nsqd nodes, but {nodes} "
            f"registered with lookupd: add nsqd nodes or use `replicas` {nodes}"
        )
    if nodes_needed(partitions, replicas, ordered) > nodes:
        raise ConfigError(
            f"topic {topic}: an unordered topic puts each partition replica on its own nsqd, "
            f"so {partitions} partitions x {replicas} replica(s) need {partitions * replicas} "
            f"nodes and {nodes} registered: add nsqd nodes, use fewer partitions/replicas, or "
            "`ordered` (ordered topics may share nodes)"
        )


def _check_expand(
    topic: str, partitions: int, replicas: int, ordered: bool, nodes: int, now: int
) -> None:
    """The placement rule for an expand of a topic of ``now`` partitions. A topic keeps its
    ordering for life, so the ways out are more nsqds, a smaller expand, or fewer replicas
    first (a meta update: youzan's ChangeTopicMetaParam takes any count from 1 to 5)."""
    need = nodes_needed(partitions, replicas, ordered)
    if need <= nodes:
        return
    ways = ["add nsqd nodes"]
    fit = nodes // replicas
    if not ordered and fit > now:
        ways.append(f"expand to at most {fit} partitions")
    fewer = nodes if ordered else nodes // partitions
    if 1 <= fewer < replicas:
        ways.append(f"lower its replicas first: `topic_update({topic}, replicas={fewer})`")
    rule = (
        f"{replicas} replicas need {replicas} nsqd nodes"
        if ordered
        else f"an unordered topic puts each partition replica on its own nsqd, so "
        f"{partitions} partitions x {replicas} replica(s) need {need} nodes"
    )
    raise ConfigError(f"topic {topic}: {rule} and {nodes} registered: {', or '.join(ways)}")


def plan_topic_create(
    family: Family,
    topic: str,
    *,
    lookupds: Sequence[str] = (),
    nsqds: Sequence[str] = (),
    leader: str | None = None,
    partitions: int = 1,
    replicas: int = 1,
    ordered: bool = False,
    ext: bool = False,
) -> list[list[AdminRequest]]:
    """Original: every lookupd, then every nsqd. Redesign: one request to the leader."""
    check_create_options(family, partitions, replicas, ordered, ext)
    if family == "original":
        return [
            [_req(Node(a, "lookupd"), "/topic/create", topic=topic) for a in lookupds],
            [_req(Node(a, "nsqd"), "/topic/create", topic=topic) for a in nsqds],
        ]
    if leader is None:
        raise AdminError("creating a redesign topic needs the lookupd leader: give `lookupd_http`")
    params = {"topic": topic, "partition_num": str(partitions), "replicator": str(replicas)}
    if ordered:
        params["orderedmulti"] = "true"
    if ext:
        params["extend"] = "true"
    return [[_req(Node(leader, "lookupd"), "/topic/create", **params)]]


def plan_topic_delete(
    placement: Placement, leader: str | None = None, *, force: bool = False
) -> list[list[AdminRequest]]:
    """Original: lookupds, then the producers found beforehand. Redesign: leader, all parts;
    ``force``: a topic whose meta is gone, still held by nsqds (see
    :mod:`nsqctl.admin.partitions.leftover_copies`)."""
    topic = placement.topic
    if placement.family == "redesign":
        if leader is None:
            raise AdminError(
                "deleting a redesign topic needs the lookupd leader: give `lookupd_http`"
            )
        extra = {"force": "true"} if force else {}
        return [
            [_req(Node(leader, "lookupd"), "/topic/delete", topic=topic, partition="**", **extra)]
        ]
    return [
        [_req(Node(a, "lookupd"), "/topic/delete", topic=topic) for a in placement.lookupds],
        [_req(n, "/topic/delete", topic=topic) for n in placement.nsqds],
    ]


def plan_topic_action(
    action: str, placement: Placement, *, node: str | None = None
) -> list[list[AdminRequest]]:
    """pause / unpause / empty on every nsqd holding the topic, or on ``node`` only
    (original only)."""
    if action not in TOPIC_ACTIONS:
        raise ConfigError(f"unknown topic action {action!r}")
    if placement.family == "redesign":
        raise FamilyUnsupportedError(
            f"the redesign nsqd has no topic {action}: use `channel_{action}("
            f"{placement.topic}, CHANNEL)` on each channel instead"
        )
    _need_nsqds(placement, action)
    nodes = select_nodes(placement, node=node)
    return [[_req(n, f"/topic/{action}", topic=placement.topic) for n in nodes]]


def parse_offset(
    *,
    timestamp: int | None = None,
    virtual_offset: int | None = None,
    msgcount: int | None = None,
    end: bool = False,
) -> str:
    """The redesign ``/channel/setoffset`` body, ``TYPE:VALUE``; exactly one choice allowed."""
    given = [
        (name, value)
        for name, value in (
            ("timestamp", timestamp),
            ("virtual_queue", virtual_offset),
            ("msgcount", msgcount),
            ("special", -1 if end else None),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise ConfigError(
            "setoffset needs exactly one of `timestamp` (seconds), `virtual_offset` (bytes), "
            "`msgcount` or `end`"
        )
    name, value = given[0]
    if value < 0 and name != "special":
        raise ConfigError(f"the {name} offset must not be negative")
    return f"{name}:{value}"


def select_nodes(
    placement: Placement, *, partition: int | None = None, node: str | None = None
) -> tuple[Node, ...]:
    """The nsqds of ``placement`` an action goes to: all of them, or only ``partition``
    (redesign) and/or only the nsqd ``node`` (its HTTP address, as ``dash`` and completion
    show it, or another name :attr:`Placement.aliases` knows, e.g. its TCP address).

    Unknown ones are a :class:`ConfigError` naming those the topic has, so the operator
    can retype without looking them up.
    """
    nodes = placement.nsqds
    if partition is not None:
        if placement.family != "redesign":
            raise ConfigError(
                "a partition exists only on the redesign (partitioned topics)",
                setting="partition",
            )
        nodes = tuple(n for n in nodes if n.partition == partition)
        if not nodes:
            # a partition with no leader exists too: it is not among the nsqds to act on
            led = {n.partition for n in placement.nsqds if n.partition is not None}
            have = sorted(led | set(placement.leaderless))
            raise ConfigError(
                f"topic {placement.topic!r} has no partition {partition} (partitions: {have})",
                setting="partition",
            )
    if node is not None:
        address = placement.resolve_node(node)
        chosen = tuple(n for n in nodes if n.address == address)
        if not chosen:
            holders = sorted({n.address for n in nodes})
            where = "" if partition is None else f" partition {partition}"
            raise ConfigError(
                f"no nsqd {node} holds topic {placement.topic!r}{where} (nsqds that do: "
                f"{', '.join(holders) or 'none'})",
                setting="node",
            )
        nodes = chosen
    return nodes


def refuse_leaderless(placement: Placement, what: str, partition: int | None = None) -> None:
    """Refuse, before anything is sent, an action on redesign partitions of which one (of
    those ``partition`` narrows it to) has no leader: every nsqd holding it is down, or
    nsqlookupd is still electing one (a live copy waits for it then; the lookup alone
    cannot tell which), so nobody can be asked to change it, and changing the others
    alone would leave the topic half done with nothing to say which half."""
    dead = [p for p in placement.leaderless if partition is None or p == partition]
    if not dead:
        return
    parts = ", ".join(map(str, dead))
    alive = sorted({n.partition for n in placement.nsqds if n.partition is not None})
    others = (
        f"; or change only the partitions that have one, once per partition "
        f"({', '.join(map(str, alive))})"
        if partition is None and alive
        else ""
    )
    raise AdminError(
        f"{what} refused, nothing was changed: topic {placement.topic!r} partition(s) "
        f"{parts} have no leader (every nsqd holding them is down, or nsqlookupd is still "
        f"electing one): bring one of their nsqds back, or wait for the election "
        f"(`lookup({placement.topic})` shows which){others}",
        setting="partition" if others else None,
    )


def plan_channel_action(
    action: str,
    placement: Placement,
    channel: str,
    *,
    partition: int | None = None,
    offset: str | None = None,
    leader: str | None = None,
    node: str | None = None,
) -> list[list[AdminRequest]]:
    """A channel operation on every nsqd (original) or every partition leader (redesign),
    or only on ``partition`` / the nsqd ``node`` (see :func:`select_nodes`).

    Original create/delete also (un)register the channel on every lookupd, as nsqadmin does.
    On a redesign topic with ``disable_channel_auto_create`` the channel is only
    (un)registered on the lookupd leader: its nsqds follow the registered list and refuse
    local create/delete.
    """
    if action not in CHANNEL_ACTIONS:
        raise ConfigError(f"unknown channel action {action!r}")
    topic = placement.topic
    if placement.family == "original" and action in REDESIGN_ONLY:
        hint = "`channel_empty()`" if action != "unskip" else "`channel_unpause()`"
        raise FamilyUnsupportedError(
            f"channel {action} exists only on the redesign (youzan) nsqd; on the original "
            f"NSQ use {hint}"
        )
    if node is not None and action in ("create", "delete"):
        raise ConfigError(
            f"channel {action} registers the channel with nsqlookupd for the whole topic: "
            "it cannot be limited to one nsqd",
            setting="node",
        )
    refuse_leaderless(placement, f"channel {action} {topic}/{channel}", partition)
    nodes = select_nodes(placement, partition=partition, node=node)
    body = None
    if action == "setoffset":
        if offset is None:
            raise ConfigError("setoffset needs an offset")
        if (
            offset.split(":")[0] in ("virtual_queue", "msgcount")
            and partition is None
            and len(nodes) > 1
        ):
            raise ConfigError(
                "virtual-queue and message-count offsets differ per partition: give `partition`"
            )
        body = offset.encode()

    def params(node: Node) -> dict[str, str]:
        out = {"topic": topic, "channel": channel}
        if node.partition is not None:
            out["partition"] = str(node.partition)
        return out

    if placement.family == "original":
        stages: list[list[AdminRequest]] = []
        if action in ("create", "delete"):
            stages.append(
                [
                    _req(Node(a, "lookupd"), f"/channel/{action}", topic=topic, channel=channel)
                    for a in placement.lookupds
                ]
            )
        if action != "create":
            _need_nsqds(placement, action)
        stages.append([_req(n, f"/channel/{action}", **params(n)) for n in nodes])
        return stages
    _need_nsqds(placement, action)
    registered = placement.meta is not None and placement.meta.disable_channel_auto_create
    if action in ("create", "delete") and registered:
        if leader is None:
            raise AdminError(
                f"topic {topic!r} registers channels on the lookupd leader: give `lookupd_http`"
            )
        # Only the registration: the nsqds create (or delete) the channel from the
        # registered list nsqlookupd hands them, and refuse a local create or delete
        # (HTTP 403) on such a topic whatever the list says.
        return [[_req(Node(leader, "lookupd"), f"/channel/{action}", topic=topic, channel=channel)]]
    return [[_req(n, f"/channel/{action}", body, **params(n)) for n in nodes]]
