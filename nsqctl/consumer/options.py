"""Consumer options, counters and the start-up errors a caller can catch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nsqctl.consumer.failover import DEFAULT_FAILOVER_WINDOW


@dataclass
class ConsumerStats:
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


@dataclass
class ConsumerOptions:
    max_in_flight: int = 1
    max_attempts: int = 0  # 0: unlimited
    partitions: Sequence[int] | None = None
    ordered: bool = False
    start: str | None = None  # SUB_ADVANCED start (redesign)
    backoff_multiplier: float = 1.0
    max_backoff: float = 128.0
    default_requeue_delay: float = 90.0
    max_requeue_delay: float = 900.0
    max_rate: float | None = None
    rdy_redistribute_interval: float = 5.0
    low_rdy_idle_timeout: float = 10.0
    low_rdy_timeout: float = 30.0
    lookup_interval: float = 60.0
    lookup_jitter: float = 0.3
    reconnect_initial: float = 0.5
    reconnect_max: float = 60.0
    # At start, when nsqds are known but none could be connected within this many seconds,
    # start() fails (NoConnectionError) instead of retrying forever; None waits forever.
    # Once a connection was made, a lost one is always retried.
    connect_timeout: float | None = 5.0
    stop_timeout: float = 30.0
    # Redesign with a lookupd: seconds a partition may go without a leader before the
    # consumer fails (FailoverTimeoutError); 0 waits forever.
    failover_window: float = DEFAULT_FAILOVER_WINDOW
    seed: int | None = None


# youzan's SUB_ORDERED takes no start position and SUB_ADVANCED is never ordered.
_ORDERED_START = (
    "ordered subscriptions have no start position on youzan's servers (SUB_ORDERED takes "
    "none): move the channel first with `nsqctl channel setoffset TOPIC CHANNEL --partition "
    "P --timestamp|--virtual-offset|--msgcount`, then `nsqctl tail TOPIC --ordered -c CHANNEL`"
)
