"""What changed in a topic's partitions between polls: a new leader, a copy leaving or
joining the ISR, a replica catching up. A leader move or a failover happens in seconds,
so the dashboard says each step as a short event line and marks the changed cells for a
while, instead of leaving the operator to spot a different address in a table.

Pure: :class:`PartitionTracker` is fed each :class:`ClusterView` in order and remembers the
last leader, ISR and catch-up of every partition. ISR and catch-up are known only for the
topics in focus (the poller asks youzan's ``/coordinator/stats`` for those), so their
events appear for the open topic; leader changes come from every nsqd's ``/stats``.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Literal

from nsqctl.stats.view import ClusterView, PartitionView

ChangeKind = Literal["leader", "no-leader", "isr-left", "isr-joined", "catch-up"]

HIGHLIGHT_SECONDS = 15.0
"""How long a changed leader or a shrunk ISR stays marked after the poll that saw it."""


@dataclass(frozen=True)
class PartitionChange:
    at: float
    topic: str
    partition: int | None
    kind: ChangeKind
    text: str

    def line(self) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(self.at))
        return f"{stamp} {self.topic} partition {self.partition}: {self.text}"


@dataclass
class _Seen:
    leader: str | None
    last_leader: str | None
    isr: tuple[str, ...] | None
    catchup: tuple[str, ...] | None
    leader_changed: float | None = None
    isr_shrunk: float | None = None


class PartitionTracker:
    """Remembers each partition across polls; :meth:`observe` returns what changed."""

    def __init__(self, keep: int = 200) -> None:
        self._seen: dict[tuple[str, int | None], _Seen] = {}
        self.events: deque[PartitionChange] = deque(maxlen=keep)

    def observe(self, view: ClusterView) -> list[PartitionChange]:
        found: list[PartitionChange] = []
        for topic in view.topics:
            if not topic.is_redesign:
                continue
            for p in topic.partitions:
                found.extend(self._partition(view.taken_at, topic.name, p))
        self.events.extend(found)
        return found

    def _partition(self, now: float, topic: str, p: PartitionView) -> list[PartitionChange]:
        key = (topic, p.partition)
        seen = self._seen.get(key)
        if seen is None:  # the first sight is the baseline, not a change
            self._seen[key] = _Seen(p.leader, p.leader, p.isr, p.catchup)
            return []
        out: list[PartitionChange] = []

        def say(kind: ChangeKind, text: str) -> None:
            out.append(PartitionChange(now, topic, p.partition, kind, text))

        if p.leader is None and seen.leader is not None:
            say("no-leader", f"no writable leader (was {seen.leader})")
        elif p.leader is not None and p.leader != seen.last_leader:
            say("leader", f"leader {seen.last_leader or '-'} → {p.leader}")
            seen.leader_changed = now
        if p.isr is not None and seen.isr is not None:
            left = [n for n in seen.isr if n not in p.isr]
            joined = [n for n in p.isr if n not in seen.isr]
            if left:
                say("isr-left", f"ISR lost {', '.join(left)} ({len(p.isr)} in sync)")
                seen.isr_shrunk = now
            if joined:
                say("isr-joined", f"{', '.join(joined)} joined the ISR ({len(p.isr)} in sync)")
        if p.catchup is not None:
            before = seen.catchup or ()
            started = [n for n in p.catchup if n not in before]
            if started:
                say("catch-up", f"{', '.join(started)} catching up")
        seen.leader = p.leader
        seen.last_leader = p.leader or seen.last_leader
        if p.isr is not None:
            seen.isr = p.isr
        if p.catchup is not None:
            seen.catchup = p.catchup
        return out

    def recent(self, topic: str | None = None, count: int = 5) -> list[PartitionChange]:
        """The last ``count`` events (of ``topic``), oldest first."""
        chosen = [e for e in self.events if topic is None or e.topic == topic]
        return chosen[-count:]

    def leader_changed(self, topic: str, partition: int | None, now: float) -> bool:
        """True while a leader change of the partition is recent enough to mark."""
        seen = self._seen.get((topic, partition))
        at = seen.leader_changed if seen else None
        return at is not None and now - at <= HIGHLIGHT_SECONDS

    def isr_shrunk(self, topic: str, partition: int | None, now: float) -> bool:
        """True while a copy left the partition's ISR recently."""
        seen = self._seen.get((topic, partition))
        at = seen.isr_shrunk if seen else None
        return at is not None and now - at <= HIGHLIGHT_SECONDS
