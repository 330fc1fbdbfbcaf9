"""How long a publish keeps trying, and when it rides through a leader failover.

Two regimes. Until a topic has taken a publish from this producer, a failure is most
likely a mistake (wrong address, missing topic, no such partition) and the publish gives
up after a few quick attempts (:attr:`RetryPolicy.attempts` within
:attr:`RetryPolicy.timeout`). Once the topic has been written, losing its leader is an
event of the cluster, not of the input: the publish keeps its message, refreshes the
topology with backoff and waits up to :attr:`RetryPolicy.failover_window` for a new
leader. Measured here (youzan v0.3.7-HA.1.12.7, 3 nsqd): a new writable leader 22 s after
kill -9 with replicas 3, about 108 s with replicas 2 (nsqlookupd's emergency migration
waits for its next topic check), hence the 180 s default.

:class:`RetryClock` is the decision alone (no IO), so it is tested without servers.
"""

from __future__ import annotations

from dataclasses import dataclass

from nsqctl.failover import DEFAULT_FAILOVER_WINDOW as DEFAULT_FAILOVER_WINDOW


@dataclass(frozen=True)
class RetryPolicy:
    """How hard a publish tries before it reports failure."""

    attempts: int = 6
    timeout: float = 30.0
    backoff: float = 0.1
    max_backoff: float = 2.0
    #: seconds a publish to an already written topic waits for a new leader (0: off)
    failover_window: float = DEFAULT_FAILOVER_WINDOW


@dataclass(frozen=True)
class FailoverEvent:
    """A publish waiting for a leader, or resuming after it waited."""

    kind: str  # "waiting" | "resumed"
    topic: str
    partition: int | None  # None: not known yet, or the original family
    waited: float  # seconds since this publish first failed
    reason: str  # the last error (waiting) or the nsqd it resumed on (resumed)

    @property
    def where(self) -> str:
        return self.topic if self.partition is None else f"{self.topic}/{self.partition}"

    def describe(self, window: float) -> str:
        if self.kind == "resumed":
            return f"{self.where}: publishing again on {self.reason} after {self.waited:.1f}s"
        return (
            f"waiting for a leader for {self.where} ({self.waited:.0f}s of {window:.0f}s): "
            f"{self.reason}"
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
