"""Typed records of what nsqd and nsqlookupd report, for both server families.

These are plain values parsed from one poll (``parse``); derived views with rates and
flags live in ``view``. Per-client/channel/partition records are msgspec records or slots
dataclasses, never frozen: a big cluster has tens of thousands of them and construction
cost counts (change one with ``msgspec.structs.replace`` or ``dataclasses.replace``,
whichever it is). Keeping raw and
derived apart lets a test build either from a recorded payload without any IO.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from nsqctl.lookup.topology import TopicMeta

NodeState = Literal["up", "slow", "unhealthy", "down"]


class ClientStats(msgspec.Struct, gc=False):
    """One consumer connection on one channel of one nsqd (one partition on the redesign).

    The field names are nsqd's JSON keys: msgspec decodes a channel's client list
    straight into these (:mod:`nsqctl.stats.wire`), a large cluster's tens of thousands
    of them when its connections are ranked.
    """

    client_id: str = ""
    hostname: str = ""
    remote_address: str = ""
    user_agent: str = ""
    ready_count: int = 0
    in_flight_count: int = 0
    message_count: int = 0
    finish_count: int = 0
    requeue_count: int = 0
    timeout_count: int | None = None  # the original family does not report it per client
    connect_ts: int = 0
    tls: bool = False
    snappy: bool = False
    deflate: bool = False
    desired_tag: str = ""
    tls_version: str = ""  # e.g. "TLS1.3" once TLS is negotiated, "" without TLS
    authed: bool = False  # the client passed nsqd's AUTH (nsqd with --auth-http-address)
    auth_identity: str = ""  # the identity the auth server named (never the secret)


class ChannelStats(msgspec.Struct, gc=False):
    """One channel of one topic partition on one nsqd.

    A msgspec record rather than a dataclass: a big cluster's poll makes one per channel
    per partition, tens of thousands, and msgspec builds it in C (about a third of a
    slots dataclass's cost) and keeps it out of the cyclic collector (it refers to
    nothing that could refer back to it). Fields are read as fast as a dataclass's.
    """

    name: str
    depth: int
    backend_depth: int
    in_flight_count: int
    deferred_count: int
    message_count: int
    requeue_count: int
    timeout_count: int
    client_count: int
    paused: bool
    skipped: bool = False
    clients: Sequence[ClientStats] = ()  # lazily parsed: see parse.LazyClients
    depth_bytes: int | None = None  # redesign ``depth_size``: bytes of the ``depth`` messages
    clients_listed: bool = True
    """False when nsqd was asked without its clients (``clients`` is then empty, not the
    connections; ``client_count`` still counts them): RDY and its rules are unknown."""


@dataclass(slots=True)
class TopicPartitionStats:
    """A topic as one nsqd holds it: the whole topic (original) or one partition (redesign).

    ``depth`` is a message count on the original (messages not yet handed to channels) but
    on the redesign the byte offset where the partition's queue ends, i.e. every byte ever
    written (``depth_is_bytes``); ``backend_start`` is where the retained queue begins.
    """

    topic: str
    partition: int | None
    node: str
    depth: int
    backend_depth: int
    message_count: int
    paused: bool
    is_leader: bool
    ordered: bool = False
    ext: bool = False
    depth_is_bytes: bool = False
    backend_start: int = 0
    channels: tuple[ChannelStats, ...] = ()
    message_bytes: int | None = None  # bytes ever published (newer nsqds report it)

    def channel(self, name: str) -> ChannelStats | None:
        """The channel called ``name``, if this copy of the topic has it."""
        return next((c for c in self.channels if c.name == name), None)


@dataclass(frozen=True)
class NodeStats:
    """One nsqd as seen in one poll; ``state`` is ``down`` when it did not answer."""

    address: str
    fetched_at: float
    state: NodeState
    version: str = ""
    health: str = ""
    start_time: int = 0
    is_redesign: bool = False
    error: str = ""
    elapsed: float = 0.0
    topics: tuple[TopicPartitionStats, ...] = ()

    def topic(self, name: str, partition: int | None = None) -> TopicPartitionStats | None:
        """This nsqd's copy of topic ``name`` (of ``partition`` on the redesign, where an
        nsqd lists one entry per partition it holds; None: the first listed)."""
        return next(
            (
                t
                for t in self.topics
                if t.topic == name and (partition is None or t.partition == partition)
            ),
            None,
        )

    def channel(
        self, topic: str, channel: str, partition: int | None = None
    ) -> ChannelStats | None:
        """Channel ``channel`` of this nsqd's copy of ``topic`` (see :meth:`topic`)."""
        found = self.topic(topic, partition)
        return found.channel(channel) if found is not None else None


@dataclass(frozen=True)
class CoordInfo:
    """Redesign ``/coordinator/stats?topic=`` for one partition, as one nsqd reports it.

    ``isr`` and ``catchup`` are node ids (``ip:rpc_port:tcp_port:n``) as parsed, nsqd HTTP
    addresses once the poller resolved them (:func:`nsqctl.stats.parse.resolve_node_ids`).
    The server reports no catch-up progress (always 0), so none is kept.
    """

    topic: str
    partition: int
    reported_by: str
    isr: tuple[str, ...] = ()
    catchup: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterNodeLoad:
    """One entry of redesign ``/cluster/stats`` ``node_stat_list``."""

    address: str
    hostname: str
    leader_load_factor: float
    node_load_factor: float


@dataclass(frozen=True)
class ClusterStability:
    """Redesign lookupd leader ``/cluster/stats``."""

    stable: bool
    nodes: tuple[ClusterNodeLoad, ...] = ()


@dataclass(frozen=True)
class LookupdStatus:
    """One nsqlookupd: reachable or not, and whether it leads (redesign)."""

    address: str
    ok: bool
    is_leader: bool = False
    error: str = ""
    etcd_error: str = ""
    """Redesign: the lookupd answers, but its ``/listlookup`` failed with these words (it
    cannot reach etcd): it serves the topology it last knew, and no leader (its own, or a
    partition's) can be elected until etcd answers."""


@dataclass(frozen=True)
class UnseenTopic:
    """An original-family topic that no nsqd which answered this poll holds, though it
    exists: its every nsqd is down or not answering (see :mod:`nsqctl.stats.poller` for
    where this is learned). ``holders`` are the nsqds (HTTP) that hold it and could not be
    asked; when nothing says which (nsqlookupd lists the topic but could not be asked for
    its producers), every nsqd that did not answer, and ``guessed`` is True (one of them
    holds it, unless only one did not answer). ``channels``: its channels where known. Its
    counters are unknown, never 0.

    ``unregistered``: nsqlookupd lists the topic with no producer. That is what it answers
    for a topic on an nsqd that was killed (it drops the nsqd's producers when the
    connection closes), and as well for a registration it kept after the last producer left
    (created on nsqlookupd alone, deleted on its nsqd, left by a decommissioned nsqd): the
    two cannot be told apart from nsqlookupd, so ``holders`` (the nsqds that did not
    answer) are a guess (``guessed`` is True) that may also be wrong altogether."""

    holders: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    guessed: bool = False
    unregistered: bool = False


@dataclass(frozen=True)
class ClusterSnapshot:
    """Everything one poll learned; input to :func:`nsqctl.stats.view.build_view`."""

    taken_at: float
    nodes: tuple[NodeStats, ...]
    lookupds: tuple[LookupdStatus, ...] = ()
    coordinator: tuple[CoordInfo, ...] = ()
    cluster: ClusterStability | None = None
    errors: tuple[str, ...] = field(default_factory=tuple)
    topic_meta: Mapping[str, TopicMeta] = field(default_factory=dict)
    """Redesign topics' meta from nsqlookupd (partition count, replicas): what tells the
    view a partition exists when no nsqd that answered holds a copy of it."""
    unseen_topics: Mapping[str, UnseenTopic] = field(default_factory=dict)
    """Original topics no answering nsqd holds (every nsqd holding them is down): the
    original family's counterpart of ``topic_meta``, so such a topic is listed, not lost."""
    listed_leaders: Mapping[str, Mapping[int, str]] = field(default_factory=dict)
    """topic → partition → the nsqd (HTTP address) nsqlookupd lists as its leader, for
    the redesign topics with a partition no answering copy leads: a leader that is hung
    (or gone since nsqlookupd last heard of it) is still listed there."""
    unseen_partitions: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Redesign topic → partitions no answering nsqd holds that an nsqd now down held
    when it last answered: with ``topic_meta``, what tells the view such a partition
    exists (the one source left when no nsqlookupd ever answered the topic's meta)."""
    deleted_topics: frozenset[str] = frozenset()
    """Redesign topics an nsqd that answered still holds a copy of while nsqlookupd, when
    last asked, answered that it has no such topic (no meta in etcd): data a deleted topic
    left behind (youzan leaves it on disk on an nsqd down during the delete, which serves
    it again once back). Only from an answer: when no nsqlookupd ever answered the topic,
    nothing tells a deleted topic from one whose meta could not be asked, so it is not
    here."""
