"""The redesign's side of a node drain: which partition leaders to move off the node and
where, sent through the partition move (:mod:`nsqctl.admin.partitions`).

youzan elects a moved leader itself, the in-sync copy (the old leader aside) with the least
leader load factor, whatever ``move_to`` says (see :mod:`nsqctl.admin.partitions`). So the
target we name is the copy it would elect anyway: an in-sync copy on another nsqd, least
loaded first. A partition with no other in-sync copy (one replica) moves to an nsqd that
holds no copy yet, which the server first fills (it catches up, then takes over); for an
unordered topic that nsqd must hold no other partition of it (one copy per nsqd).

For a drain the move is judged by where leadership ended, not by the move's own report:
an election that picked another copy than the target still took the node out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace

import httpx

from nsqctl.admin.drain.moves import LeaderMove
from nsqctl.admin.drain.safety import Blocker
from nsqctl.admin.partitions import (
    NsqdNode,
    PartitionState,
    TopicState,
    apply_plan,
    plan_move,
    topic_state,
)
from nsqctl.admin.requests import AdminReport
from nsqctl.errors import NotFoundError, NsqctlError
from nsqctl.stats.view import ClusterView, PartitionView, TopicView


def _holds_other(topic: TopicView, partition: int, node: str) -> bool:
    return any(
        node in (p.leader, *p.replicas, *(p.isr or ()))
        for p in topic.partitions
        if p.partition != partition
    )


def _target(
    topic: TopicView,
    p: PartitionView,
    node: str,
    nodes: Sequence[str],
    loads: Mapping[str, float],
    avoid: Collection[str],
) -> str | None:
    """Where leadership of ``p`` should go (module doc); None when nowhere can take it."""

    def by_load(candidates: list[str]) -> list[str]:
        return sorted(candidates, key=lambda a: (loads.get(a, float("inf")), a))

    copies = p.isr if p.isr is not None else (p.leader, *p.replicas)
    # an ISR may still list an nsqd that is down (youzan keeps it while dropping it would
    # leave too few): only an nsqd that is up can take leadership
    in_sync = [a for a in copies if a and a != node and a not in avoid and a in nodes]
    if in_sync:
        return by_load(in_sync)[0]
    fresh = [
        a
        for a in nodes
        if a != node
        and a not in avoid
        and a not in (p.leader, *p.replicas)
        and (topic.ordered or not _holds_other(topic, p.partition or 0, a))
    ]
    return by_load(fresh)[0] if fresh else None


def plan_leader_moves(
    view: ClusterView,
    node: str,
    loads: Mapping[str, float],
    avoid: Collection[str] = (),
) -> tuple[list[LeaderMove], list[Blocker]]:
    """The moves that take every partition leader off ``node``, and one line for each
    partition none can (``avoid``: nsqds not to move to, e.g. others being drained)."""
    nodes = [n.address for n in view.nodes if n.stats.state != "down" and n.stats.is_redesign]
    moves: list[LeaderMove] = []
    blocked: list[Blocker] = []
    for topic in view.topics:
        for p in topic.partitions:
            if p.partition is None or p.leader != node:
                continue
            target = _target(topic, p, node, nodes, loads, avoid)
            if target is None:
                blocked.append(
                    Blocker(
                        topic.name,
                        p.partition,
                        "no other nsqd can lead it (no in-sync copy on an nsqd that is up, "
                        "and no free nsqd): add an nsqd or replicas",
                    )
                )
            else:
                moves.append(LeaderMove(topic.name, p.partition, node, target))
    return moves, blocked


def with_leaderless(states: Sequence[TopicState], view: ClusterView, node: str) -> list[TopicState]:
    """``states`` (each from the lookup, which lists a partition only with a leader) plus
    each partition with no leader now whose ISR, as the nsqds report it, has ``node`` in
    it: right after a leader dies, until an election, the node may hold the copy the
    election needs, and a stop check that does not see the partition calls it safe."""
    found: list[TopicState] = []
    for state in states:
        topic = view.topic(state.topic)
        extra = {
            p.partition: PartitionState(p.partition, None, p.isr or ())
            for p in (topic.partitions if topic is not None else ())
            if p.partition is not None
            and p.partition not in state.partitions
            and p.leader is None
            and node in (p.isr or ())
        }
        found.append(replace(state, partitions={**state.partitions, **extra}) if extra else state)
    return found


async def move_leader(
    lookupd: Sequence[str],
    move: LeaderMove,
    *,
    wait: float,
    progress: Callable[[str], None] | None = None,
) -> AdminReport | str:
    """Send one move (of leadership, or with ``move.copy`` of the copy on ``move.source``)
    and wait for it (:func:`nsqctl.admin.partitions.apply_plan`); the report, or the
    one-line reason it could not be planned (it may have moved already)."""
    source = move.source if move.copy else None
    try:
        plan = await plan_move(lookupd, move.topic, move.partition, move.target, source=source)
    except NsqctlError as err:
        return str(err)
    return await apply_plan(plan, wait=wait, progress=progress)


async def read_topic_states(
    client: httpx.AsyncClient, leader: str, topics: Sequence[str], nodes: dict[str, NsqdNode]
) -> tuple[list[TopicState], list[Blocker]]:
    """Each topic's partitions as the lookup tells them (replicas, leader, ISR), and a
    blocker for each topic that could not be read: what cannot be seen is not safe."""

    async def one(topic: str) -> TopicState | str | None:
        try:
            return await topic_state(client, leader, topic, nodes)
        except NotFoundError:
            return None  # deleted meanwhile: nothing of it depends on the node
        except NsqctlError as err:
            return str(err)

    states: list[TopicState] = []
    unread: list[Blocker] = []
    for topic, got in zip(topics, await asyncio.gather(*(one(t) for t in topics)), strict=True):
        if isinstance(got, TopicState):
            states.append(got)
        elif got is not None:
            unread.append(Blocker(topic, None, f"its partitions could not be read: {got}"))
    return states, unread
