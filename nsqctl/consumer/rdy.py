"""RDY going out: the updates the flow machines of :mod:`nsqctl.flow` return are sent on
their connections, and one loop runs those machines' timers (RDY rotation, backoff
windows, rate refills) and the failover tick.

Its own module because it is the one place RDY is sent from, cut from
:mod:`nsqctl.consumer.client` along its sections. Layer: above :mod:`.leaders` (the loop
ticks the failover watch), below everything that changes RDY.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nsqctl.consumer.leaders import _LeadersMixin

if TYPE_CHECKING:
    from nsqctl.connection import Connection
    from nsqctl.flow import BackoffController, RateLimiter, RdyController

_Target = tuple[str, int | None]  # (nsqd tcp address, partition)


class _RdyMixin(_LeadersMixin):
    """RDY and flow timers of :class:`nsqctl.consumer.Consumer`."""

    _conns: dict[_Target, Connection]
    _rdy: RdyController
    _backoff: BackoffController
    _limiter: RateLimiter | None
    _wake: asyncio.Event
    _stopping: bool

    def _apply(self, updates: Sequence[Any]) -> None:
        by_id = {id(c): c for c in self._conns.values()}
        for update in updates:
            conn = by_id.get(update.conn_id)
            if conn is not None and conn.is_open:
                conn.rdy(update.count)
        if updates:
            self._wake.set()

    async def _flow_loop(self) -> None:
        """Timers of the flow machines: RDY rotation, backoff windows, rate refills."""
        while not self._stopping:
            now = time.monotonic()
            deadlines = [
                d
                for d in (
                    self._rdy.next_deadline(),
                    self._backoff.next_deadline(),
                    self._limiter.next_deadline() if self._limiter else None,
                )
                if d is not None
            ]
            delay = min(deadlines) - now if deadlines else 1.0
            self._wake.clear()
            if delay > 0:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that
                # lands just after the event is set (CPython gh-86296), hanging stop().
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(delay, 1.0)):
                        await self._wake.wait()
            now = time.monotonic()
            self._tick_failover(now)
            action = self._backoff.tick(now)
            if action is not None:
                self._apply(self._rdy.apply_backoff(action, now))
            if self._limiter is not None:
                self._apply(self._rdy.set_rate_cap(self._limiter.allowance(now), now))
            self._apply(self._rdy.tick(now))
