"""Whether a redesign nsqd can be stopped without a partition losing writes (pure: no IO).

youzan's rule (v0.3.7-HA.1.12.7, consistence/): a partition takes writes only while its
ISR has more than ``Replica/2`` members, integer division (``IsISRReadyForWrite``; the
lookup lists a leader for writes only then): replicas 1 needs 1 copy, 2 needs 2, 3 needs
2. A write is acknowledged only once more than ``Replica/2`` copies have it, a new leader
is elected only from the ISR, and the coordinator refuses to drop a failed copy from the
ISR when that would leave ``Replica/2`` or fewer (``ErrLeavingISRWait``): so a dead nsqd
may still be listed in an ISR, and counts for nothing. Stopping a node is safe only when,
for every partition with an in-sync copy on it, the ISR members that are up, the node
aside, are still more than ``Replica/2``. Otherwise writes stop until the coordinator has
copied the partition to another nsqd (10 s after the failure at the earliest, plus the
catch-up), or for good when no other nsqd is up. The drain does that copy first, while
the node still serves: it moves the node's copy to a free nsqd (youzan has it catch up,
then drops the node from the ISR), when one is up and that is enough.

The inputs are the records the lookup gives (:class:`nsqctl.admin.partitions.TopicState`:
the topic's replica count, each partition's leader and ISR as nsqd HTTP addresses, or
youzan's node id for a node no lookupd lists) and the nsqds registered now.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from nsqctl.admin.drain.moves import LeaderMove
from nsqctl.admin.partitions import NsqdNode, PartitionState, TopicState
from nsqctl.admin.partitions.state import absent_copies
from nsqctl.lookup.topology import write_quorum
from nsqctl.stats.parse import node_id_key


def node_name(address: str) -> str:
    """How an operator knows an nsqd: a youzan node id (``ip:rpc_port:tcp_port:n``, which
    the ISR keeps for an nsqd no lookupd lists any more) becomes its TCP address."""
    return node_id_key(address) or address


NODE_ID = re.compile(r"\b(\d{1,3}(?:\.\d{1,3}){3}|[A-Za-z0-9.-]+):\d+:(\d+):\d+\b")
"""A youzan node id inside a server's message (``ip:rpc_port:tcp_port:n``)."""


def readable(text: str) -> str:
    """A message with every youzan node id in it written as the nsqd's TCP address."""
    return NODE_ID.sub(lambda m: f"{m.group(1)}:{m.group(2)}", text)


@dataclass(frozen=True)
class Blocker:
    """A partition that stops taking writes if the node stops now, and why."""

    topic: str
    partition: int | None  # None: the whole topic (its partitions could not be read)
    why: str

    def describe(self) -> str:
        where = self.topic if self.partition is None else f"{self.topic}/{self.partition}"
        return f"{where}: {self.why}"


@dataclass(frozen=True)
class KeptCopy:
    """A follower copy on the node (in sync, not the leader) of a partition that stays
    writable without the node: nothing moves for it, and the copy stays on the node."""

    topic: str
    partition: int
    isr: int  # members of its ISR now, the node included
    left: int  # of them, up and in sync once the node stops
    need: int  # in-sync copies it takes writes with

    def describe(self) -> str:
        return (
            f"{self.topic}/{self.partition}: follower copy in an ISR of {self.isr}; stopping "
            f"the node leaves {self.left} in sync and up, writes need {self.need}: youzan "
            "moves it to the catch-up list, and it rejoins the ISR once back and caught up"
        )


@dataclass(frozen=True)
class _Around:
    """The node to stop and the nsqds around it."""

    node: str
    up: Mapping[str, NsqdNode]  # registered now, by HTTP address
    loads: Mapping[str, float]  # leader load factors
    avoid: Collection[str]  # not to move to


def _free(state: TopicState, p: PartitionState, at: _Around) -> list[str]:
    """nsqds the node's copy of ``p`` could move to, least loaded first: up, holding no copy
    of ``p`` yet and, for an unordered topic, no copy of another of its partitions (youzan
    keeps one each)."""
    holding = {a for q in state.partitions.values() for a in (q.leader, *q.isr, *q.catchup)}
    own = {p.leader, *p.isr, *p.catchup}
    free = [
        a
        for a in at.up
        if a != at.node
        and a not in at.avoid
        and a not in own
        and (state.allow_multi or a not in holding)
    ]
    return sorted(free, key=lambda a: (at.loads.get(a, float("inf")), a))


def _left(p: PartitionState, at: _Around) -> list[str]:
    """The in-sync copies of ``p`` that are up, the node aside: those left once it stops."""
    return [a for a in p.isr if a != at.node and a in at.up]


def _leaderless(topic: str, p: PartitionState, need: int, at: _Around) -> str:
    """Why a partition with no leader blocks the stop, and what to do: waiting for an
    election helps only when enough of its in-sync copies are up for the leader elected to
    take writes; else the copies that are down must come back first (youzan elects only
    from the ISR, so waiting alone would be forever)."""
    up = [a for a in p.isr if a in at.up]
    head = "it has no leader now (not writable)"
    if len(up) >= need:
        return (
            f"{head}, and {len(up)} of its in-sync copies are up: wait for nsqlookupd to "
            f"elect one (`lookup({topic})` shows when), then drain again"
        )
    named, advice = absent_copies(topic, p, at.up, need, at.node)
    return (
        f"{head}, and {len(up)} of its in-sync copies are up{named}: it takes writes only "
        f"with {need}, so waiting for an election will not do; {advice}"
    )


def _check(state: TopicState, p: PartitionState, at: _Around) -> LeaderMove | Blocker | None:
    """None when ``p`` stays writable without ``node``; else the move of the node's copy
    to a free nsqd that makes it so, or why nothing can."""
    replicas = state.meta.replica
    need = write_quorum(replicas)
    if p.leader is None:
        return Blocker(state.topic, p.partition, _leaderless(state.topic, p, need, at))
    if not p.isr:
        why = f"its leader {p.leader} did not report the ISR: cannot tell if it stays writable"
        return Blocker(state.topic, p.partition, why)
    node = at.node
    left = _left(p, at)
    if len(left) >= need:
        return None
    free = _free(state, p, at)
    if free and len(left) + 1 >= need:
        return LeaderMove(state.topic, p.partition, node, free[0], copy=True)
    copies = f"{len(left)} in-sync cop{'y' if len(left) == 1 else 'ies'}"
    why = f"stopping {node} leaves {copies}" + (f" ({', '.join(left)})" if left else "")
    why += f"; with replicas {replicas} it takes writes and elects a leader only with {need}"
    named, advice = absent_copies(state.topic, p, at.up, need, at.node)
    return Blocker(state.topic, p.partition, f"{why}{named}: {advice}")


@dataclass(frozen=True)
class StopPlan:
    """What stopping a node takes, partition by partition (:func:`stop_plan`)."""

    moves: list[LeaderMove]  # copies to move off the node first
    blocked: list[Blocker]  # partitions no move keeps writable
    kept: list[KeptCopy]  # follower copies that need neither: they stay on the node


def stop_plan(
    states: Sequence[TopicState],
    node: str,
    up: Mapping[str, NsqdNode],
    loads: Mapping[str, float] | None = None,
    avoid: Collection[str] = (),
) -> StopPlan:
    """For every partition with a copy on ``node`` (leader or in sync) that would stop
    taking writes if ``node`` stopped (module doc): the move of the node's copy to a free
    nsqd (``copy=True``; least leader load factor first, by ``loads``; none of ``avoid``)
    that keeps it writable, or why none can. The others, where the node is a follower,
    are the copies kept: enough in-sync copies stay up without it. ``up``: the nsqds
    registered now, by HTTP address; an ISR member not among them counts as down."""
    at = _Around(node, up, loads or {}, avoid)
    plan = StopPlan([], [], [])
    for state in states:
        for p in state.partitions.values():
            if node != p.leader and node not in p.isr:
                continue
            found = _check(state, p, at)
            if isinstance(found, LeaderMove):
                plan.moves.append(found)
            elif found is not None:
                plan.blocked.append(found)
            elif node != p.leader:
                left, need = len(_left(p, at)), state.meta.write_quorum
                plan.kept.append(KeptCopy(state.topic, p.partition, len(p.isr), left, need))
    return plan
