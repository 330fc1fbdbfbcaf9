"""Riding through a partition leader failover on the redesign (sans-IO: no connections).

When a partition's connection breaks, nsqlookupd names a new leader only once youzan's
coordinator elected one, which can take minutes (bench/README.md has measured times), so
the consumer waits instead of failing at once. :class:`PartitionWatch` keeps, per
partition, since when it has no connection: a :class:`~nsqctl.failover.FailoverEvent` every
few seconds while waiting (so a reader knows why nothing arrives), a
:class:`FailoverTimeoutError` after the window
(:data:`nsqctl.failover.DEFAULT_FAILOVER_WINDOW`, shared with the producer).

The new leader resends from the channel position the coordinator synced to it, which can
be behind what this consumer FINed (at-least-once). :class:`FinWindow` remembers the
recently FINed ids of each partition (of each nsqd on the original family), bounded, so
those redeliveries are counted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence

from nsqctl.errors import FailoverTimeoutError
from nsqctl.failover import DEFAULT_FAILOVER_WINDOW as DEFAULT_FAILOVER_WINDOW
from nsqctl.failover import FailoverEvent
from nsqctl.protocol import MSG_ID_LENGTH

NOTE_INTERVAL = 5.0  # seconds between "waiting for a leader" notes of one partition
FIN_WINDOW = 8192  # FINed ids remembered per partition


class PartitionWatch:
    """Per partition: since when it has no connection, and what to say about it."""

    def __init__(self, topic: str, window: float, note_interval: float = NOTE_INTERVAL) -> None:
        self.topic = topic
        self.window = window
        self.note_interval = note_interval
        self._lost: dict[int | None, float] = {}
        self._noted: dict[int | None, float] = {}

    @property
    def waiting(self) -> bool:
        return bool(self._lost)

    def lost_partitions(self) -> list[int | None]:
        """The partitions without a connection, in the order they were lost."""
        return list(self._lost)

    def lost(self, partition: int | None, now: float) -> None:
        self._lost.setdefault(partition, now)
        self._noted.setdefault(partition, now)

    def forget(self, partition: int | None) -> None:
        """The partition is no longer read (it left the topic)."""
        self._lost.pop(partition, None)
        self._noted.pop(partition, None)

    def resumed(self, partition: int | None, nsqd: str, now: float) -> FailoverEvent | None:
        since = self._lost.pop(partition, None)
        self._noted.pop(partition, None)
        if since is None:
            return None
        return FailoverEvent(
            "resumed", "consume", self.topic, partition, now - since, self.window, nsqd
        )

    def tick(self, now: float) -> tuple[list[FailoverEvent], FailoverTimeoutError | None]:
        """Notes due at ``now``, and the error when a partition waited past the window."""
        notes: list[FailoverEvent] = []
        for partition, since in self._lost.items():
            waited = now - since
            if waited > self.window:  # 0: give up at once, as for a publish
                where = self.topic if partition is None else f"{self.topic}/{partition}"
                return notes, FailoverTimeoutError(
                    f"no leader for {where} within the failover window of {self.window:g}s: "
                    "the cluster elected none (check its nsqlookupd and nsqd), or the window "
                    "is shorter than an election",
                    partition,
                    setting="failover_window",
                )
            if now - self._noted[partition] >= self.note_interval:
                self._noted[partition] = now
                notes.append(
                    FailoverEvent("waiting", "consume", self.topic, partition, waited, self.window)
                )
        return notes, None


class FinWindow:
    """FINed message ids of each source, at least the last ``size`` (at most that plus a
    chunk and a batch): a later copy of one from the same source is a duplicate.

    A source is a partition on the redesign (its ids continue across leaders, so a new
    leader's resend is caught) and an nsqd on the original family, whose ids are unique
    only per nsqd: two nsqds can issue the same id, and that is no duplicate. Callers
    that do not name the nsqd (``nsqd=None``) share one source per partition.

    Every FIN adds to the window, but it is only read for a partition that just rejoined
    after a failover. So the ids are kept joined in chunks of :data:`CHUNK_IDS`
    (:data:`~nsqctl.protocol.MSG_ID_LENGTH` bytes each): no hashing on the consumer's hot
    path, and about a sixth of the memory of a set of the ids (one object and one table
    slot per id), which was most of what a long ``tail`` grew by. The set a lookup needs
    is built on the first lookup and kept up to date until the oldest chunk is dropped,
    then built again only if lookups go on.
    """

    def __init__(self, size: int = FIN_WINDOW) -> None:
        self.size = size
        self._ids: dict[Hashable, _Chunks] = {}

    def add_many(
        self, partition: int | None, msg_ids: Sequence[bytes], nsqd: str | None = None
    ) -> None:
        key = source_key(partition, nsqd)
        chunks = self._ids.get(key)
        if chunks is None:
            chunks = self._ids[key] = _Chunks()
        chunks.add(msg_ids, self.size)

    def seen(self, partition: int | None, msg_id: bytes, nsqd: str | None = None) -> bool:
        chunks = self._ids.get(source_key(partition, nsqd))
        return chunks is not None and msg_id in chunks.index()


# FINed ids gathered before they are sealed into one bytes object: a tail --ordered FINs
# one message at a time, and a bytes object per id would cost what a set entry did.
CHUNK_IDS = 256


class _Chunks:
    """One source's FINed ids: sealed chunks of joined ids, oldest first, and the chunk
    still being filled."""

    __slots__ = ("count", "filling", "looked_up", "sealed")

    def __init__(self) -> None:
        self.sealed: deque[bytes] = deque()
        self.filling = bytearray()
        self.count = 0
        self.looked_up: set[bytes] | None = None

    def add(self, msg_ids: Sequence[bytes], size: int) -> None:
        filling = self.filling
        filling += b"".join(msg_ids)
        self.count += len(msg_ids)
        if self.looked_up is not None:
            self.looked_up.update(msg_ids)
        if len(filling) < CHUNK_IDS * MSG_ID_LENGTH:
            return
        self.sealed.append(bytes(filling))
        filling.clear()
        sealed = self.sealed
        while len(sealed) > 1 and self.count - len(sealed[0]) // MSG_ID_LENGTH >= size:
            self.count -= len(sealed.popleft()) // MSG_ID_LENGTH
            self.looked_up = None

    def index(self) -> set[bytes]:
        if self.looked_up is None:
            step = MSG_ID_LENGTH
            chunks = [*self.sealed, bytes(self.filling)]
            self.looked_up = {
                chunk[i : i + step] for chunk in chunks for i in range(0, len(chunk), step)
            }
        return self.looked_up


def source_key(partition: int | None, nsqd: str | None) -> Hashable:
    """Where a message id is unique: its partition (redesign), else its nsqd (original)."""
    return partition if partition is not None else nsqd
