"""The stages of connecting one target of a consumer, sans-IO: which subscription comes
next after the last one was refused or found a gap.

A target is normally subscribed once, at the start asked for. On the redesign a
partition whose commit log is empty refuses a start position
(:attr:`~nsqctl.protocol.SubscribeRefusal.PARTITION_EMPTY`): it is then subscribed from
its end, and, because a message published between the refusal and that subscription
would lie before the end and never be read, the consumer checks for one once and, if
there is one, subscribes at the start asked for again. Should that be refused as empty
again, the end is taken without another check, so a target is never subscribed round
and round. :class:`Attempt` names those four subscriptions and :func:`after_refusal`
/ :func:`after_gap` are the transitions between them; the
:class:`~nsqctl.consumer.connections.ConnectionSet` carries them out in a loop.
"""

from __future__ import annotations

import enum

from nsqctl.protocol.subscribe import SubscribeRefusal

__all__ = ["Attempt", "Verdict", "after_gap", "after_refusal"]


class Attempt(enum.Enum):
    """One subscription of a target, and why it is made."""

    #: The start asked for (the options', or the position a failover resumes from).
    ASKED = "asked"
    #: From the end: the start asked for found the partition's log empty; a gap check
    #: follows the subscription.
    FROM_END = "from_end"
    #: The start asked for again: a message was published in the gap.
    ASKED_AGAIN = "asked_again"
    #: From the end again, without a gap check: the start was refused a second time.
    FROM_END_AGAIN = "from_end_again"

    @property
    def at_end(self) -> bool:
        """Subscribes from the partition's end rather than the start asked for."""
        return self in (Attempt.FROM_END, Attempt.FROM_END_AGAIN)

    @property
    def checks_gap(self) -> bool:
        """Once subscribed, asks whether a message came between the refusal and it."""
        return self is Attempt.FROM_END


class Verdict(enum.Enum):
    """How the connecting of a target ends when no further subscription is made."""

    #: No reconnect cures it: the consumer stops with the error.
    FATAL = "fatal"
    #: Close, and reconnect after the backoff.
    RETRY_LATER = "retry_later"


_FROM_END = {Attempt.ASKED: Attempt.FROM_END, Attempt.ASKED_AGAIN: Attempt.FROM_END_AGAIN}


def after_refusal(attempt: Attempt, refusal: SubscribeRefusal) -> Attempt | Verdict:
    """What follows ``attempt`` refused with ``refusal``: the next subscription, or the
    end of this connecting."""
    if refusal.fatal:
        return Verdict.FATAL
    if refusal is SubscribeRefusal.PARTITION_EMPTY:
        # a partition's end refused too leaves no other start to try: later, as any refusal
        return _FROM_END.get(attempt, Verdict.RETRY_LATER)
    return Verdict.RETRY_LATER


def after_gap(attempt: Attempt) -> Attempt:
    """What follows ``attempt`` when its gap check found a message published before it."""
    if not attempt.checks_gap:
        raise ValueError(f"{attempt} makes no gap check")
    return Attempt.ASKED_AGAIN
