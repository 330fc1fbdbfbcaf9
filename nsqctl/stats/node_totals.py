"""Per-nsqd totals for the dashboard's node screen: what each node holds and leads.

Counted from the copies a node leads (every copy on the original family): a redesign
replica repeats its leader's channel counters, so counting it too would show a message
twice, and consumers take messages from leaders only. One pass over each node's
``/stats`` records, no client is parsed, so it stays cheap on a big cluster.

``drain_state`` comes from outside the stats (a ``node drain`` in progress is not in any
nsqd's ``/stats``): a mapping from nsqd HTTP address to a short state, ``-`` when absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nsqctl.stats.model import NodeState
from nsqctl.stats.view import ClusterView, NodeView

NO_DRAIN = "-"


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """One nsqd. ``partitions_led`` is None on the original family (no partitions there)."""

    address: str
    state: NodeState
    depth: int
    in_flight: int
    deferred: int
    topics: int
    partitions: int
    partitions_led: int | None
    drain_state: str
    error: str


def node_summary(node: NodeView, drain_states: Mapping[str, str] | None = None) -> NodeSummary:
    s = node.stats
    depth = in_flight = deferred = 0
    for t in s.topics:
        if not t.is_leader:
            continue
        if not t.depth_is_bytes:  # original: messages not yet handed to the channels
            depth += t.depth
        for ch in t.channels:
            depth += ch.depth
            in_flight += ch.in_flight_count
            deferred += ch.deferred_count
    return NodeSummary(
        address=s.address,
        state=s.state,
        depth=depth,
        in_flight=in_flight,
        deferred=deferred,
        topics=node.topic_count,
        partitions=node.partition_count,
        partitions_led=node.leader_count if s.is_redesign else None,
        drain_state=(drain_states or {}).get(s.address, NO_DRAIN),
        error=s.error,
    )


def node_summaries(
    view: ClusterView, drain_states: Mapping[str, str] | None = None
) -> list[NodeSummary]:
    """Every nsqd of ``view``, in its order (by address); a down one with zero totals."""
    return [node_summary(n, drain_states) for n in view.nodes]
