"""The Consumer's part in a partition leader failover: which partitions ride through one,
which partitions came back after a loss, the copies a new leader sends of messages already
FINed, and the tick that reports (or gives up on) partitions waiting for a leader.

:class:`LeaderWatch` owns that state; the sans-IO clocks it drives are in
:mod:`.failover`. It reaches out only through the callbacks it is given (the lookup
refresh, the ``on_failover`` hook, the fatal-error sink), so it is tested without sockets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import replace

from nsqctl.consumer.order import OrderChecker
from nsqctl.consumer.partition_watch import FinWindow, PartitionWatch, source_key
from nsqctl.consumer.stats import ConsumerStats
from nsqctl.failover import FailoverEvent, FailoverHook
from nsqctl.protocol.raw_message import RawMessage

log = logging.getLogger("nsqctl.consumer")


class LeaderWatch:
    """Failover bookkeeping of one consumer.

    ``refresh`` asks the lookup for a new topology (None without a lookupd: then no
    partition rides through a failover, a lost nsqd is simply reconnected);
    ``on_fatal`` receives the :class:`~nsqctl.errors.FailoverTimeoutError` when a
    partition waited past the window.
    """

    def __init__(
        self,
        topic: str,
        window: float,
        stats: ConsumerStats,
        *,
        refresh: Callable[[], None] | None,
        on_failover: FailoverHook | None,
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        self.watch = PartitionWatch(topic, window)
        self.fins = FinWindow()
        self.order = OrderChecker(topic)
        # Partitions connected again after a loss: their reads are checked for duplicates.
        self.rejoined: set[int | None] = set()
        self._ever: set[Hashable] = set()  # sources (see source_key) connected at least once
        self._stats = stats
        self._refresh = refresh
        self._on_failover = on_failover
        self._on_fatal = on_fatal
        self._failed = False

    def rides(self, partition: int | None) -> bool:
        """Partitions of the redesign found through a lookupd ride through a failover."""
        return self._refresh is not None and partition is not None

    def waiting_for_leader(self, partition: int | None) -> bool:
        """True when a reconnect of ``partition`` should rather ask the lookup again: the
        dead address is not worth a long backoff while a new leader is being elected."""
        if self._refresh is None or partition is None or not self.watch.waiting:
            return False
        self._refresh()
        return True

    def joined(self, partition: int | None, address: str, now: float, reason: str = "") -> None:
        """``partition`` is subscribed on ``address``; ``reason`` tells a resumed event
        how (e.g. :data:`~nsqctl.failover.RESUMED_FROM_CONFIRMED`)."""
        # Back means the same source again: on the original family every nsqd is
        # partition None, and a second nsqd's first connection is no reconnect.
        source = source_key(partition, address)
        if source in self._ever:
            self.rejoined.add(partition)
            self.order.reconnected(partition)
        self._ever.add(source)
        event = self.watch.resumed(partition, address, now)
        if reason:
            if event is None:  # a reconnect that did not wait for a leader
                watch = self.watch
                event = FailoverEvent(
                    "resumed", "consume", watch.topic, partition, 0.0, watch.window, address
                )
            event = replace(event, reason=reason)
        self._report(event)

    def lost(self, partition: int | None, now: float) -> None:
        if self.rides(partition):
            self.watch.lost(partition, now)

    def count_duplicates(
        self, partition: int | None, raws: list[RawMessage], nsqd: str | None = None
    ) -> None:
        """Copies of FINed messages in a read of a partition (of ``nsqd``) that came back."""
        seen = self.fins.seen
        stats = self._stats
        for raw in raws:
            if seen(partition, raw.id, nsqd):
                stats.duplicates += 1
        stats.order_redeliveries = self.order.redeliveries

    def tick(self, now: float) -> None:
        if not self.watch.waiting or self._failed:
            return
        if self._refresh is not None:
            # Ask again every tick (about a second) until the new leader is listed: once a
            # consistent lookup dropped the dead leader there is no reconnect left to ask,
            # and the next poll would be up to a minute away.
            self._refresh()
        notes, error = self.watch.tick(now)
        for note in notes:
            self._report(note)
        if error is not None:
            self._failed = True
            self._on_fatal(error)

    def _report(self, event: FailoverEvent | None) -> None:
        if event is None:
            return
        log.info("%s", event.describe())
        if self._on_failover is not None:
            self._on_failover(event)
