"""What a node being drained still holds, read from the stats view (pure: no IO).

Original family: every message the nsqd holds counts, at topic level (no channel has taken
it yet), queued in a channel, in flight to a consumer or deferred. Redesign: only what the
partitions the node *leads* hold matters (consumers read from leaders, and a follower's copy
is a copy); a channel's depth there already counts in-flight and deferred messages.

A node is done when it holds nothing, nsqlookupd lists it for none of its topics (original)
and no partition depends on it: led by it, or with it as the only in-sync copy (redesign).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nsqctl.stats.rules import drain_rate, time_to_drain
from nsqctl.stats.view import ClusterView, PartitionView


@dataclass(frozen=True)
class Undrained:
    """Messages nothing will drain: a channel without a consumer, or a topic without a
    channel (original: nsqd keeps those messages at topic level until a channel exists)."""

    topic: str
    channel: str | None
    messages: int

    def describe(self) -> str:
        if self.channel is None:
            return f"no channel takes {self.topic}: {self.messages} messages"
        return f"no consumer drains {self.topic}/{self.channel}: {self.messages} messages"


@dataclass(frozen=True)
class NodeLoad:
    """One poll's totals for the node."""

    depth: int
    in_flight: int
    deferred: int
    remaining: int  # messages still on the node, counted once
    undrained: tuple[Undrained, ...] = ()
    dependent: tuple[str, ...] = ()  # redesign: "topic/partition (why)" still on the node
    up: bool = True


def _depends(p: PartitionView, node: str) -> str | None:
    if p.leader == node:
        return "leader"
    if p.isr is not None and tuple(p.isr) == (node,):
        return "only in-sync copy"
    return None


def node_load(view: ClusterView, node: str) -> NodeLoad:
    """Totals of ``node`` from a view of a poll that included it (see the module doc)."""
    stats = next((n for n in view.nodes if n.address == node), None)
    if stats is None or stats.stats.state == "down":
        return NodeLoad(0, 0, 0, 0, up=False)
    depth = in_flight = deferred = remaining = 0
    undrained: list[Undrained] = []
    dependent: list[str] = []
    for topic in view.topics:
        for p in topic.partitions:
            if topic.is_redesign:
                why = _depends(p, node)
                if why is None:
                    continue
                dependent.append(f"{topic.name}/{p.label} ({why})")
            elif p.leader != node and node not in p.replicas:
                continue
            part_flight = sum(c.in_flight_count for c in p.channels)
            part_deferred = sum(c.deferred_count for c in p.channels)
            depth += p.depth
            in_flight += part_flight
            deferred += part_deferred
            held = p.depth if topic.is_redesign else p.depth + part_flight + part_deferred
            remaining += held
            undrained.extend(
                Undrained(topic.name, c.name, c.depth + c.deferred_count)
                for c in p.channels
                if c.client_count == 0 and c.depth + c.deferred_count > 0
            )
            topic_level = p.depth - sum(c.depth for c in p.channels)
            if not topic.is_redesign and not p.channels and topic_level > 0:
                undrained.append(Undrained(topic.name, None, topic_level))
    return NodeLoad(
        depth, in_flight, deferred, remaining, tuple(undrained), tuple(dependent), up=True
    )


@dataclass(frozen=True)
class DrainProgress:
    """One step of a drain, as shown and as ``--json`` reports it."""

    node: str
    elapsed: float
    load: NodeLoad
    listed: tuple[str, ...] = ()  # original: topics a lookupd still lists the node for
    rate: float | None = None  # messages/s the remaining count falls
    eta: float | None = None  # seconds until empty at that rate (None: not draining)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def done(self) -> bool:
        return (
            self.load.up
            and self.load.remaining == 0
            and not self.listed
            and not self.load.dependent
        )

    def line(self) -> str:
        load = self.load
        if not load.up:
            return f"{self.node}: not answering /stats ({self.elapsed:.0f}s)"
        parts = [
            f"{self.node}: {load.remaining} messages left",
            f"depth {load.depth}, in flight {load.in_flight}, deferred {load.deferred}",
        ]
        if self.rate is not None:
            parts.append(f"{self.rate:.1f}/s")
        if self.eta is not None and load.remaining:
            parts.append(f"empty in ~{self.eta:.0f}s")
        if self.listed:
            parts.append(f"still listed for {len(self.listed)} topic(s)")
        if load.dependent:
            parts.append(f"{len(load.dependent)} partition(s) depend on it")
        return "; ".join(parts) + f" ({self.elapsed:.0f}s)"

    def left(self) -> list[str]:
        """What stops the node from being drained, one item each."""
        load = self.load
        out: list[str] = []
        if not load.up:
            out.append(f"{self.node} did not answer /stats")
        if load.remaining:
            out.append(
                f"{load.remaining} messages (depth {load.depth}, in flight {load.in_flight}, "
                f"deferred {load.deferred})"
            )
        out.extend(u.describe() for u in load.undrained)
        out.extend(f"nsqlookupd still lists it for {t}" for t in self.listed)
        out.extend(f"{d} is on it" for d in load.dependent)
        return out

    def to_json(self) -> dict[str, Any]:
        load = self.load
        return {
            "node": self.node,
            "elapsed": round(self.elapsed, 3),
            "up": load.up,
            "remaining": load.remaining,
            "depth": load.depth,
            "in_flight": load.in_flight,
            "deferred": load.deferred,
            "rate": self.rate,
            "eta": self.eta,
            "listed_for": list(self.listed),
            "dependent_partitions": list(load.dependent),
            "undrained": [
                {"topic": u.topic, "channel": u.channel, "messages": u.messages}
                for u in load.undrained
            ],
            "left": self.left(),
            "done": self.done,
        }


RATE_SAMPLES = 10
"""The drain rate is taken over this many polls: long enough to smooth a consumer's
batches, short enough to follow a consumer that stopped."""


def estimate(history: Sequence[int], times: Sequence[float]) -> tuple[float | None, float | None]:
    """(drain rate, time to empty) from the remaining counts of the last polls, taken at
    ``times`` (monotonic seconds): the polls' real spacing, which a slow poll stretches."""
    recent = [float(v) for v in history[-RATE_SAMPLES:]]
    when = list(times[-RATE_SAMPLES:])
    spacing = (when[-1] - when[0]) / (len(when) - 1) if len(when) > 1 else 0.0
    rate_of_fall = drain_rate(recent, spacing)
    eta = time_to_drain(history[-1], rate_of_fall) if history else None
    return rate_of_fall, eta
