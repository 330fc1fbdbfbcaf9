"""Where one publish goes: a topic's topology plus the call's partition or shard key give
one nsqd (and, on the redesign, one partition).

Pure: no IO, no asyncio, no clock. The producer looks the topology up and opens the
connection; this module only decides, so every routing rule is tested without servers.

The rules:

* ``partition=``: that partition's writable leader (redesign only). A partition beyond
  the topic's count cannot appear by waiting (:class:`NoSuchPartitionError`); one without
  a leader now may get one (:class:`PartitionUnavailableError`, the caller retries).
  Given only nsqd addresses (``direct``), nothing says which leads the partition, nor
  even whether they are redesign servers: the partition is pinned on the first given
  nsqd, the connection tells its family (an original one refuses the partition), and
  one that answers it does not lead the partition hands the pin on to the next given
  nsqd (:meth:`Router.not_led_by`, :func:`not_led_by_given`).
* ``shard_key=``: ``hash(key) mod partition_num`` on the redesign (the count from the
  lookup ``meta``, as the official clients compute it), or one nsqd chosen the same way
  over the sorted node list on the original. Never another partition when the key's has
  no leader: that would break the key's order. Without lookupds there is no partition
  count, so a shard key cannot be routed on a redesign nsqd (:func:`check_keyed_send`).
* neither: round-robin over the writable partitions (redesign) or nodes (original);
  a retry passes the nsqds its call already failed on (``avoid``, oldest failure
  first) and goes to one it has not tried, or else to the one that failed longest ago:
  a round-robin position shared by concurrent calls would otherwise send a retry back
  to the nsqd that just hung, and leave another nsqd of the topic untried.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple

from nsqctl.addresses import HostPort
from nsqctl.errors import (
    ConfigError,
    NoSuchPartitionError,
    PartitionUnavailableError,
    PublishError,
    TopicNotFoundError,
)
from nsqctl.lookup.topology import Peer, Topology
from nsqctl.protocol.errors import ServerError
from nsqctl.sharding import DEFAULT_HASH, ShardKey, partition_for_key, pick_node_for_key

__all__ = [
    "Router",
    "Target",
    "check_keyed_send",
    "check_partition",
    "no_writable_nsqd",
    "not_led_by_given",
]


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class Target(NamedTuple):
    """One nsqd to publish to, and the partition on it (None on the original family)."""

    peer: Peer
    partition: int | None

    @property
    def key(self) -> tuple[str, int | None]:
        """(nsqd TCP address, partition): what :meth:`Producer.route` answers."""
        return (str(self.peer.tcp_address), self.partition)

    @property
    def route(self) -> int | HostPort:
        """The ordering domain: the partition on the redesign, the node on the original."""
        return self.peer.tcp_address if self.partition is None else self.partition


def check_partition(partition: int | None) -> None:
    """Reject a partition number no topic can have, before any lookup: waiting for a
    leader of partition -1 would only run out the retry budget."""
    if partition is None:
        return
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise ConfigError(
            f"bad partition {partition!r}: partitions are numbered from 0", setting="partition"
        )


def check_keyed_send(
    topic: str, target: Target, shard_key: ShardKey | None, is_redesign: bool
) -> None:
    """Refuse a shard-keyed send that no partition was chosen for, once the connection
    shows the nsqd is a redesign server.

    A topology of direct nsqd addresses has no partition count (only the lookupd's topic
    meta has one, and go-nsq shards only with it), so the key was routed to a node, not
    to ``hash(key) % partitions``. Sent without a partition, nsqd would put it on its
    default partition (a plain topic: the key's order silently broken against publishes
    routed by lookupd) or answer E_BAD_PARTITION (an ordered topic).
    """
    if shard_key is None or target.partition is not None or not is_redesign:
        return
    raise ConfigError(
        f"topic {topic!r} is on a redesign nsqd ({target.peer.tcp_address}), where a shard "
        "key picks its partition from the topic's partition count, known only to "
        "nsqlookupd: publish through the lookupds",
        setting="lookupd_http",
    )


def no_writable_nsqd(topic: str, topo: Topology) -> PublishError | TopicNotFoundError:
    """The error for a topology with nothing to publish to."""
    if topo.topic_not_found:
        return TopicNotFoundError(
            topic=topic,
            message=f"topic {topic!r} does not exist on any lookupd: create it first "
            f"(`topic_create({topic})`)",
        )
    if topo.is_redesign and topo.meta is not None and topo.meta.valid:
        count = topo.meta.partition_num
        return PartitionUnavailableError(
            f"no partition of topic {topic!r} takes writes now (nsqlookupd names a writable "
            f"leader for none of its {count}){unwritable_causes(topo)}"
        )
    return PublishError(f"no writable nsqd for topic {topic!r}: check `lookup({topic})`")


def unwritable_causes(topo: Topology) -> str:
    """Why a redesign partition may have no writable leader, and what to do: the tail of
    an error about one. A leader is missing while one is elected (seconds to minutes);
    a leader refuses writes while its in-sync replicas (ISR) are below quorum, which only
    returning replicas end."""
    topic = topo.topic
    meta = topo.meta
    if meta is None or meta.replica <= 1:
        return (
            f": its leader's nsqd is down or a new leader is being elected; wait for it, or "
            f"bring that nsqd back; `lookup({topic})` shows each partition's leader"
        )
    return (
        f": a new leader is being elected, or the partition's in-sync replicas (ISR) are "
        f"fewer than {meta.write_quorum} of its {meta.replica} replicas, and it refuses "
        "writes until enough of them are back; wait for the ISR to catch up, or bring the "
        f"replicas' nsqds back; `lookup({topic})` shows each partition's leader and ISR"
    )


def not_led_by_given(
    topic: str, partition: int, refused: Sequence[str], answer: ServerError
) -> ConfigError:
    """The error for a partition that no given nsqd leads: only a lookup knows where its
    leader is. ``answer`` is the last refusal: E_TOPIC_NOT_EXIST from an nsqd that holds
    no copy of the partition, E_FAILED_ON_NOT_LEADER from one that holds a replica."""
    if len(refused) == 1:
        who = f"nsqd {refused[0]} does not lead"
    else:
        who = f"none of the nsqds {', '.join(refused)} leads"
    return ConfigError(
        f"{who} partition {partition} of topic {topic!r} (answered {answer.code}): publish "
        "through the lookupds, which find the partition's leader",
        setting="lookupd_http",
    )


class Router:
    """Chooses a :class:`Target` per publish; holds the round-robin position of each topic
    (so unkeyed publishes spread over partitions and nodes) and, per topic, the targets of
    the topology it last saw: an unkeyed publish would otherwise build that list anew.

    ``direct``: the topologies are the nsqd addresses given instead of lookupds; then a
    pinned partition goes to the given nsqd that last took it (see the module docstring).
    """

    def __init__(self, hash: str = DEFAULT_HASH, *, direct: bool = False) -> None:
        self.hash = hash
        self.direct = direct
        self._rr: dict[str, itertools.count[int]] = {}
        self._spread: dict[str, tuple[Topology, list[Target]]] = {}
        self._pins: dict[tuple[str, int], int] = {}  # (topic, partition) -> given nsqd index

    def not_led_by(self, topic: str, topo: Topology, target: Target) -> None:
        """``target``'s nsqd answered that it does not lead ``target``'s partition: pin
        the partition on the next given nsqd (once, however many publishes it refused)."""
        if target.partition is None or not topo.producers:
            return
        key = (topic, target.partition)
        at = self._pins.get(key, 0)
        if topo.producers[at % len(topo.producers)].tcp_address == target.peer.tcp_address:
            self._pins[key] = at + 1

    def choose(
        self,
        topic: str,
        topo: Topology,
        partition: int | None,
        shard_key: ShardKey | None,
        avoid: Sequence[HostPort] = (),
    ) -> Target:
        """Where the publish goes. ``avoid``: nsqds this call already failed on, the
        oldest failure first; only an unkeyed publish may go elsewhere (a partition or a
        shard key names its one place)."""
        if partition is not None:
            return self._pinned(topic, topo, partition)
        if shard_key is not None:
            return self._sharded(topic, topo, shard_key)
        seen = self._spread.get(topic)
        if seen is None or seen[0] is not topo:  # topologies are immutable: same object, same list
            seen = self._spread[topic] = (
                topo,
                [Target(peer, part) for peer, part in topo.targets()],
            )
        targets = seen[1]
        if not targets:
            raise no_writable_nsqd(topic, topo)
        counter = self._rr.setdefault(topic, itertools.count())
        start = next(counter)
        if not avoid:
            return targets[start % len(targets)]
        ring = [targets[(start + step) % len(targets)] for step in range(len(targets))]
        failed = {address: order for order, address in enumerate(avoid)}
        # untried first (rank -1), then the nsqd whose failure is the oldest
        return min(ring, key=lambda target: failed.get(target.peer.tcp_address, -1))

    def _pinned(self, topic: str, topo: Topology, partition: int) -> Target:
        if self.direct and not topo.partitions:
            if not topo.producers:
                raise no_writable_nsqd(topic, topo)
            at = self._pins.get((topic, partition), 0)
            return Target(topo.producers[at % len(topo.producers)], partition)
        if not topo.is_redesign and not topo.partitions:
            raise ConfigError(
                f"topic {topic!r} is on original NSQ servers, which have no partitions: "
                "publish without a partition",
                setting="partition",
            )
        peer = topo.partitions.get(partition)
        if peer is not None:
            return Target(peer, partition)
        num = topo.partition_num if topo.meta is not None else 0
        if 0 < num <= partition:
            raise NoSuchPartitionError(
                f"topic {topic!r} has {num} partition(s), numbered 0-{num - 1}: "
                f"there is no partition {partition}",
                partition,
                setting="partition",
            )
        raise PartitionUnavailableError(
            f"partition {partition} of topic {topic!r} has no writable leader right now"
            f" (writable: {sorted(topo.partitions) or 'none'}){unwritable_causes(topo)}",
            partition,
        )

    def _sharded(self, topic: str, topo: Topology, shard_key: ShardKey) -> Target:
        if topo.partitions or topo.is_redesign:
            num = topo.partition_num
            if num <= 0:
                raise PartitionUnavailableError(
                    f"topic {topic!r} has no partition count in its lookup meta yet: cannot "
                    "shard; check that it exists (`lookup()`)"
                )
            part = partition_for_key(shard_key, num, self.hash)
            peer = topo.partitions.get(part)
            if peer is None:
                raise PartitionUnavailableError(
                    f"shard key maps to partition {part} of topic {topic!r}, which has no "
                    "writable leader right now (not rerouting: that would break the key's "
                    f"order){unwritable_causes(topo)}",
                    part,
                )
            return Target(peer, part)
        nodes = {peer.tcp_address: peer for peer in topo.producers}
        if not nodes:
            raise no_writable_nsqd(topic, topo)
        chosen = pick_node_for_key(shard_key, list(nodes), self.hash)
        return Target(nodes[chosen], None)
