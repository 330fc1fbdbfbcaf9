"""How long a publish keeps trying, when it rides through a leader failover, and which
failover events it reports.

Two regimes. Until a topic has taken a publish from this producer, a failure is most
likely a mistake (wrong address, missing topic, no such partition) and the publish gives
up after a few quick attempts (:attr:`RetryPolicy.attempts` within
:attr:`RetryPolicy.timeout`): a typo should fail fast. Once the topic has been written,
losing its leader is an event of the cluster, not of the input: the publish keeps its
message, refreshes the topology with backoff and waits up to
:attr:`RetryPolicy.failover_window` for a new leader (the default is
:data:`nsqctl.failover.DEFAULT_FAILOVER_WINDOW`, sized for youzan's slowest election).

Everything here is the decision alone (no IO, no clock read: ``now`` is passed in), so it
is tested without servers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from nsqctl.bounds import Bound, check_bounds
from nsqctl.errors import ConfigError
from nsqctl.failover import DEFAULT_FAILOVER_WINDOW, FailoverEvent

__all__ = ["WAIT_NOTE_INTERVAL", "FailoverNotes", "RetryClock", "RetryPolicy"]

#: seconds between two "waiting for a leader" events of one topic/partition
WAIT_NOTE_INTERVAL = 5.0

_SECONDS = Bound(0, integer=False, unit="seconds")
#: Each field's accepted values. Zero seconds is meaningful everywhere (give up at the
#: first failure, retry at once, no failover wait); fewer than one attempt would give up
#: before trying.
RETRY_BOUNDS: dict[str, Bound] = {
    "attempts": Bound(1),
    "timeout": _SECONDS,
    "backoff": _SECONDS,
    "max_backoff": _SECONDS,
    "failover_window": _SECONDS,
}


@dataclass(frozen=True)
class RetryPolicy:
    """How hard a publish tries before it reports failure."""

    attempts: int = 6
    timeout: float = 30.0
    backoff: float = 0.1
    max_backoff: float = 2.0
    #: seconds a publish to an already written topic waits for a new leader (0: off)
    failover_window: float = DEFAULT_FAILOVER_WINDOW

    def __post_init__(self) -> None:
        check_bounds(self, RETRY_BOUNDS)
        if self.max_backoff < self.backoff:
            raise ConfigError(
                f"bad max_backoff {self.max_backoff!r}: give at least backoff "
                f"({self.backoff!r} seconds)",
                setting="max_backoff",
            )


class RetryClock:
    """After each failure of one publish call: the delay before the next try, or None."""

    def __init__(self, policy: RetryPolicy, now: float, may_ride: bool) -> None:
        self.policy = policy
        self.started = now
        self.may_ride = may_ride and policy.failover_window > 0
        self.attempts = 0
        self.first_failure: float | None = None
        self.riding = False
        self._delay = policy.backoff

    def failed(self, now: float, leader_lost: bool) -> float | None:
        """Record a failure at ``now``; the delay before trying again, None to give up."""
        self.attempts += 1
        if self.first_failure is None:
            self.first_failure = now
        delay = self._delay
        self._delay = min(self._delay * 2, self.policy.max_backoff)
        if leader_lost and self.may_ride:
            self.riding = True
            if now + delay > self.first_failure + self.policy.failover_window:
                return None
            return delay
        if self.attempts >= self.policy.attempts:
            return None
        if now + delay > self.started + self.policy.timeout:
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
        self, topic: str, partition: int | None, waited: float, reason: str, now: float
    ) -> FailoverEvent | None:
        """The event to report for a publish that waits, or None (one was just reported)."""
        event = FailoverEvent("waiting", "publish", topic, partition, 0.0, self.window)
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
