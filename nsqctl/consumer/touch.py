"""TOUCH for a message the consumer holds past half its message timeout: one running
handler's with ``auto_touch``, or an ordered requeue held for its delay (see
:meth:`nsqctl.consumer.delivery.DeliveryPath.requeue_message`). Either way nsqd's timeout
runs from when it sent the message, so the first TOUCH counts from the arrival.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nsqctl.connection import Connection
    from nsqctl.consumer.stats import ConsumerStats

__all__ = ["DEFAULT_MSG_TIMEOUT_MS", "TouchTimer", "touch_schedule"]

#: nsqd's default message timeout (``--msg-timeout``), for a connection whose IDENTIFY
#: answer did not say the negotiated one.
DEFAULT_MSG_TIMEOUT_MS = 60_000


def touch_schedule(conn: Connection, received_at: float) -> tuple[float, float]:
    """When to TOUCH a message of ``conn`` first (on the running loop's clock) and how
    often after: at half of nsqd's timeout for it (the connection's, or nsqd's default
    when IDENTIFY did not say), counted from when it arrived (``received_at``, on
    ``time.monotonic()``), since nsqd's timeout runs from when it sent the message, not
    from when the consumer got round to it."""
    identify = conn.identify
    timeout_ms = (identify.msg_timeout if identify is not None else 0) or DEFAULT_MSG_TIMEOUT_MS
    interval = timeout_ms / 2000.0
    # only the time since the arrival is carried over to the loop's clock, so the two
    # clocks need not be the same
    elapsed = max(0.0, time.monotonic() - received_at)
    return asyncio.get_running_loop().time() + max(0.0, interval - elapsed), interval


class TouchTimer:
    """TOUCH message ``msg_id`` on ``conn`` at ``first`` (the loop's clock) and every
    ``interval`` seconds after, counted in ``stats.touched``, until :meth:`cancel`.

    It stops by itself once ``answered()`` says the message was answered, when ``conn``
    has closed (nsqd takes back what a closed connection held: nothing is left to keep),
    and before ``until``: a touch due then or later is not sent, whoever holds the
    message answers it at ``until``."""

    __slots__ = (
        "_answered",
        "_conn",
        "_handle",
        "_interval",
        "_loop",
        "_msg_id",
        "_stats",
        "_until",
    )

    def __init__(
        self,
        conn: Connection,
        msg_id: bytes,
        schedule: tuple[float, float],
        stats: ConsumerStats,
        *,
        answered: Callable[[], bool] | None = None,
        until: float = math.inf,
    ) -> None:
        self._conn = conn
        self._msg_id = msg_id
        self._interval = schedule[1]
        self._stats = stats
        self._answered = answered
        self._until = until
        self._loop = asyncio.get_running_loop()
        self._handle: asyncio.TimerHandle | None = None
        self._schedule(schedule[0])

    def _schedule(self, when: float) -> None:
        if when < self._until:
            self._handle = self._loop.call_at(when, self._touch)

    def _touch(self) -> None:
        self._handle = None
        if (self._answered is not None and self._answered()) or not self._conn.is_open:
            return
        self._conn.touch(self._msg_id)
        self._stats.touched += 1
        self._schedule(self._loop.time() + self._interval)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
