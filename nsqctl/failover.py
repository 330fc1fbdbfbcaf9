"""What nsqctl's clients share about a redesign partition's leader failover: how long they
wait for a new leader, and the event they report while they wait.

Shared by the producer and the consumer, which must not import each other (``tail`` does
not load the producer). The default window covers youzan's slowest election path (an
emergency migration that waits for nsqlookupd's next topic check; bench/README.md has
the measured times) with margin; past it, a client gives up with one error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

#: seconds a publish or a consumer waits for a partition's new leader (0: give up at once)
DEFAULT_FAILOVER_WINDOW = 180.0

#: :attr:`FailoverEvent.reason` of a consumer's ``resumed`` event when the new leader's
#: channel was missing or past what the consumer had confirmed: the consumer moved the
#: channel back to its confirmed position, so nothing in between is skipped.
RESUMED_FROM_CONFIRMED = "resumed from the confirmed position"


@dataclass(frozen=True)
class FailoverEvent:
    """A publish or a consumer waiting for a partition's leader, or going on after it
    waited. Both clients report the same event to their ``on_failover`` hook."""

    kind: Literal["waiting", "resumed"]
    role: Literal["publish", "consume"]
    topic: str
    partition: int | None  # None: not known yet, or the original family
    waited: float  # seconds since the partition was lost (or the publish first failed)
    window: float  # the failover window in force (0: none)
    nsqd: str = ""  # resumed: the nsqd it goes on with
    reason: str = ""  # waiting: the last error; resumed: e.g. RESUMED_FROM_CONFIRMED
    # True for an original-family topic: it has no partition leaders, so what the client
    # waits for is one of the topic's nsqds taking its traffic again (the same nsqd
    # reconnected, or another one nsqlookupd names): a line naming a leader would mislead.
    leaderless: bool = False

    @property
    def where(self) -> str:
        return self.topic if self.partition is None else f"{self.topic}/{self.partition}"

    def describe(self) -> str:
        """One line for a log or a terminal."""
        if self.kind == "resumed":
            verb = "publishing" if self.role == "publish" else "consuming"
            text = f"{self.where}: {verb} again on {self.nsqd} after {self.waited:.1f}s"
            return f"{text}, {self.reason}" if self.reason else text
        if self.leaderless:
            verb = "take publishes" if self.role == "publish" else "deliver"
            waiting = f"waiting for an nsqd of {self.topic} to {verb} again"
        else:
            waiting = f"waiting for a leader for {self.where}"
        text = f"{waiting} ({self.waited:.0f}s of {self.window:.0f}s)"
        return f"{text}: {self.reason}" if self.reason else text


#: Called with each :class:`FailoverEvent` of a client (its return value is ignored).
FailoverHook = Callable[[FailoverEvent], object]
