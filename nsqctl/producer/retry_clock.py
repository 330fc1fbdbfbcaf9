"""How long a publish keeps trying, when it rides through a leader failover, and which
failover events it reports.

Two regimes. Until a topic has taken a publish from this producer, a failure is most
likely a mistake (wrong address, missing topic, no such partition) and the publish gives
up after a few quick attempts (``max_attempts`` within ``retry_timeout`` of the
:class:`~nsqctl.producer.options.ProducerOptions`): a typo should fail fast. Once the
topic has been written, losing its leader is an event of the cluster, not of the input:
the publish keeps its message, refreshes the topology with backoff and waits up to its
``failover_window`` for a new leader (the default is
:data:`nsqctl.failover.DEFAULT_FAILOVER_WINDOW`, sized for youzan's slowest election).

Everything here is the decision alone (no IO, no clock read: ``now`` is passed in), so it
is tested without servers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from nsqctl.failover import FailoverEvent

if TYPE_CHECKING:
    from nsqctl.producer.options import ProducerOptions

__all__ = ["WAIT_NOTE_INTERVAL", "FailoverNotes", "RetryClock"]

#: seconds between two "waiting for a leader" events of one topic/partition
WAIT_NOTE_INTERVAL = 5.0


class RetryClock:
    """After each failure of one publish call: the delay before the next try, or None."""

    def __init__(self, options: ProducerOptions, now: float, may_ride: bool) -> None:
        self.options = options
        self.started = now
        self.may_ride = may_ride and options.failover_window > 0
        self.attempts = 0
        self.first_failure: float | None = None
        self.riding = False
        self._delay = options.backoff

    def failed(self, now: float, leader_lost: bool) -> float | None:
        """Record a failure at ``now``; the delay before trying again, None to give up."""
        self.attempts += 1
        if self.first_failure is None:
            self.first_failure = now
        delay = self._delay
        self._delay = min(self._delay * 2, self.options.max_backoff)
        if leader_lost and self.may_ride:
            self.riding = True
            if now + delay > self.first_failure + self.options.failover_window:
                return None
            return delay
        if self.attempts >= self.options.max_attempts:
            return None
        if now + delay > self.started + self.options.retry_timeout:
            return None
        return delay

    def waited(self, now: float) -> float:
        return 0.0 if self.first_failure is None else now - self.first_failure


class FailoverNotes:
    """Which failover events a producer reports.

    Many publishes in flight wait for the same leader at once; each would report its own
    wait and its own resumption. So "waiting" is reported at most every ``interval``
    seconds per topic/partition, and "resumed" once, by the first publish that goes on
    after a reported wait. The time waited is the topic/partition's, counted from the
    first failure of any publish waiting for it: each publish's own clock starts at its
    own first failure, and a batch sent later would report a shorter wait, so the
    operator's counter ran backwards.
    """

    def __init__(self, window: float, interval: float = WAIT_NOTE_INTERVAL) -> None:
        self.window = window
        self.interval = interval
        self._noted: dict[str, float] = {}  # where -> when its last waiting event was
        self._since: dict[str, float] = {}  # where -> when the first publish waiting failed

    def waiting(
        self,
        topic: str,
        partition: int | None,
        waited: float,
        reason: str,
        now: float,
        leaderless: bool = False,
    ) -> FailoverEvent | None:
        """The event to report for a publish that waits, or None (one was just reported).
        ``leaderless``: an original-family topic (see :attr:`FailoverEvent.leaderless`)."""
        event = FailoverEvent(
            "waiting", "publish", topic, partition, 0.0, self.window, leaderless=leaderless
        )
        where = event.where
        since = now - waited
        earlier = self._since.get(where)
        # a start older than any publish may wait belongs to a wait that ended in giving up
        if earlier is not None and now - earlier <= self.window + self.interval:
            since = min(since, earlier)
        self._since[where] = since
        last = self._noted.get(where)
        if last is not None and now - last < self.interval:
            return None
        self._noted[where] = now
        return replace(event, waited=max(waited, now - since), reason=reason)

    def resumed(
        self, topic: str, partition: int | None, waited: float, nsqd: str
    ) -> FailoverEvent | None:
        """The event to report for a publish that went on after waiting, or None (another
        publish already reported it, or no wait was reported)."""
        event = FailoverEvent("resumed", "publish", topic, partition, waited, self.window, nsqd)
        self._since.pop(event.where, None)
        if self._noted.pop(event.where, None) is None:
            return None
        return event
