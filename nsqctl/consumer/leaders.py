"""The Consumer's part in a partition leader failover: which partitions ride through one,
a partition connected again, the copies a new leader sends of messages already FINed, and
the tick that notes (or gives up on) partitions waiting for a leader.

Its own module because it is one concern of the Consumer, cut from
:mod:`nsqctl.consumer.client` along its sections; the sans-IO bookkeeping it drives is
:mod:`nsqctl.consumer.failover`. The lowest of the Consumer's layers: it calls none of
the others.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nsqctl.consumer.failover import LeaderWait

if TYPE_CHECKING:
    import asyncio

    from nsqctl.consumer.failover import FinWindow, PartitionWatch
    from nsqctl.consumer.options import ConsumerStats
    from nsqctl.consumer.order import OrderChecker
    from nsqctl.lookup.client import LookupClient
    from nsqctl.protocol.message import RawMessage

log = logging.getLogger("nsqctl.consumer")

FailoverHook = Callable[[LeaderWait], Any]


class _LeadersMixin:
    """Failover handling of :class:`nsqctl.consumer.Consumer` (its attributes are set in
    ``Consumer.__init__``)."""

    stats: ConsumerStats
    failed: asyncio.Event
    error: BaseException | None
    _fatal: BaseException | None
    _lookup: LookupClient | None
    _watch: PartitionWatch
    _fins: FinWindow
    _order: OrderChecker
    _rejoined: set[int | None]
    _ever: set[int | None]
    _on_failover: FailoverHook | None

    def _rides(self, partition: int | None) -> bool:
        """Partitions of the redesign found through a lookupd ride through a failover."""
        return self._lookup is not None and partition is not None

    def _joined(self, partition: int | None, address: str) -> None:
        if partition in self._ever:
            self._rejoined.add(partition)
            self._order.reconnected(partition)
        self._ever.add(partition)
        event = self._watch.resumed(partition, address, time.monotonic())
        if event is not None:
            log.info("%s", event.describe())
            if self._on_failover is not None:
                self._on_failover(event)

    def _count_duplicates(self, partition: int | None, raws: list[RawMessage]) -> None:
        fins = self._fins
        for raw in raws:
            if fins.seen(partition, raw.id):
                self.stats.duplicates += 1
        self.stats.order_redeliveries = self._order.redeliveries

    def _tick_failover(self, now: float) -> None:
        if not self._watch.waiting or self.error is not None:
            return
        if self._lookup is not None:
            # Ask again every tick (about a second) until the new leader is listed: once a
            # consistent lookup dropped the dead leader there is no reconnect left to ask,
            # and the next poll would be up to a minute away.
            self._lookup.request_refresh()
        notes, error = self._watch.tick(now)
        for note in notes:
            log.info("%s", note.describe())
            if self._on_failover is not None:
                self._on_failover(note)
        if error is not None:
            self.error = self._fatal = error
            self.failed.set()
