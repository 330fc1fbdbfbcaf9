"""A consumer's counters, :class:`ConsumerStats` (``Consumer.stats``): the connection set,
the delivery path, the handler runner and the leader watch each count what they did here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ConsumerStats:
    """What one consumer has done so far (``Consumer.stats``): counts only, kept by its
    parts as they act, read by programs (the archiver watches ``received``)."""

    received: int = 0
    finished: int = 0
    requeued: int = 0
    given_up: int = 0
    connections: int = 0
    order_regressions: int = 0
    order_gaps: int = 0
    # Ordered: a message already handled and FINed came again (the server reset the
    # channel's reader before our FIN landed); it was FINed again, not handled twice.
    redelivered: int = 0
    # A message FINed before came again after a reconnect or a leader change (the new
    # leader resends from its synced position: at-least-once) and was handled again.
    duplicates: int = 0
    # Ordered: of those, the ones the order check saw as a resend, not a regression.
    order_redeliveries: int = 0
    reconnects: int = 0
    backoff_level: int = 0
    # auto_touch: TOUCH commands sent for messages held by a handler past half their
    # message timeout.
    touched: int = 0
