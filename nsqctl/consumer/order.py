"""Per-partition order check of ordered subscriptions (sans-IO: no connections here)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from nsqctl.protocol.raw_message import RawMessage


@dataclass(frozen=True)
class OrderViolation:
    """A regression or gap seen on an ordered partition."""

    kind: str  # "regression" | "gap"
    topic: str
    partition: int | None
    nsqd: str
    previous_offset: int
    previous_internal_id: int
    offset: int
    internal_id: int
    expected_offset: int | None = None


# A partition's last message: (offset, internal id, raw size). A tuple, not an object: the
# check runs for every ordered message.
_Mark = tuple[int, int, int]


class OrderChecker:
    """Per-partition order check with disk-queue offsets and internal ids.

    A redelivery of the same message (same offset and id) is normal after a requeue, a
    timeout or a reader reset. A smaller offset/id is a regression, reported once: if the
    messages after it continue from the regressed one (the channel was rewound, e.g. by
    ``setoffset``), the check follows the new position; if they continue from the old high
    water mark (one stray old message), it keeps that. An offset beyond ``previous offset +
    previous size`` is a gap; channels that skip or move offsets on purpose produce gaps
    by design, so gaps are events, not errors. Partitions are keyed by number, not by
    nsqd: offsets are the same on every replica, so the check holds across a failover.

    After :meth:`reconnected` (the partition's connection broke: a reconnect or a new
    leader) the server resends from its last confirmed position, which can be behind what
    this consumer saw: messages at or below the partition's high water mark are then
    counted in :attr:`redeliveries` (at-least-once), not reported, until the stream passes
    the mark. Within one unbroken connection the same rewind stays a regression.
    """

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self._last: dict[int | None, _Mark] = {}
        self._rewound: dict[int | None, _Mark] = {}
        self._replaying: set[int | None] = set()
        # Partitions read on threads of their own (see .lanes) count here at once: under
        # a lock, not the GIL's word (``+=`` is a read then a write). Taken only for a
        # resend after a reconnect, never for the messages of an unbroken stream.
        self._count_lock = threading.Lock()
        self._redeliveries = 0

    @property
    def redeliveries(self) -> int:
        """Messages resent from a server's confirmed position, over every partition."""
        return self._redeliveries

    def reconnected(self, partition: int | None) -> None:
        """The partition's stream starts again (new connection or leader)."""
        if partition in self._last:
            self._replaying.add(partition)
            self._rewound.pop(partition, None)

    def check(self, nsqd: str, partition: int | None, raw: RawMessage) -> OrderViolation | None:
        offset, internal_id = raw.offset, raw.internal_id
        if offset is None or internal_id is None:
            return None
        last = self._last.get(partition)
        current = (offset, internal_id, raw.size or 0)
        if last is None:
            self._last[partition] = current
            return None
        last_offset, last_id, last_size = last
        if self._replaying and partition in self._replaying:
            if offset <= last_offset:
                with self._count_lock:  # resent from the server's confirmed position
                    self._redeliveries += 1
                return None
            self._replaying.discard(partition)  # past the mark: checked as usual below
        if offset == last_offset and internal_id == last_id:
            return None  # redelivery
        rewound = self._rewound.pop(partition, None) if self._rewound else None
        if offset < last_offset or internal_id < last_id:
            if rewound is not None and offset == rewound[0] + rewound[2]:
                self._last[partition] = current  # the rewind goes on: follow it
                return None
            self._rewound[partition] = current
            return self._violation("regression", nsqd, partition, last, current)
        self._last[partition] = current
        expected = last_offset + last_size if last_size else None
        if expected is not None and offset > expected:
            return self._violation("gap", nsqd, partition, last, current, expected)
        return None

    def _violation(
        self,
        kind: str,
        nsqd: str,
        partition: int | None,
        last: _Mark,
        current: _Mark,
        expected: int | None = None,
    ) -> OrderViolation:
        return OrderViolation(
            kind,
            self.topic,
            partition,
            nsqd,
            last[0],
            last[1],
            current[0],
            current[1],
            expected,
        )
