"""Consumer options.

:class:`ConsumerOptions` is the one place a consumer's settings are given, go-nsq's
``Config`` style: frozen (one options object may be shared by many consumers and is never
changed behind its owner's back), each numeric field's accepted values declared once in
:data:`CONSUMER_BOUNDS`, and every value checked once, when the options are made, so a
bad one is a :class:`ConfigError` naming the field before anything connects. A variant
is ``dataclasses.replace(options, max_in_flight=50)``, which checks again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nsqctl.bounds import Bound, check_at_least, check_bounds
from nsqctl.errors import ConfigError
from nsqctl.failover import DEFAULT_FAILOVER_WINDOW

#: youzan's SUB_ORDERED takes no start position and SUB_ADVANCED is never ordered, so an
#: ordered reader starts where the channel is: its offset is moved beforehand.
ORDERED_START = (
    "ordered subscriptions take no start position (youzan's SUB_ORDERED has none): move "
    "the channel's offset first (`channel_setoffset(TOPIC, CHANNEL, partition=P)`, nsqd's "
    "/channel/setoffset), then subscribe ordered without a start position"
)
"""Says how in its own text (the CLI renders the action as its command): the hint for
the setting ``start`` is shared with the original family's refusal of a start position,
which has no ordered channels to move."""


#: seconds, where zero would make a timer spin or a wait meaningless
_POSITIVE_SECONDS = Bound(0, integer=False, above=True, unit="seconds")
#: seconds, where zero means "at once" (no delay, no wait)
_SECONDS = Bound(0, integer=False, unit="seconds")

#: Each numeric field's accepted values (None is accepted where ``optional``: see the
#: field). Checked by :meth:`ConsumerOptions.__post_init__`; the non-numeric fields and
#: the checks across fields are there.
CONSUMER_BOUNDS: dict[str, Bound] = {
    "max_in_flight": Bound(0),
    "max_attempts": Bound(1, special=((0, "unlimited"),)),
    "backoff_multiplier": _POSITIVE_SECONDS,
    "max_backoff": _POSITIVE_SECONDS,
    "default_requeue_delay": _SECONDS,
    "max_requeue_delay": _SECONDS,
    "max_rate": Bound(0, integer=False, above=True, unit="messages/s", optional=True),
    "rdy_redistribute_interval": _POSITIVE_SECONDS,
    "low_rdy_idle_timeout": _POSITIVE_SECONDS,
    "low_rdy_timeout": _POSITIVE_SECONDS,
    "rdy_idle_turn": _POSITIVE_SECONDS,
    "lookup_interval": _POSITIVE_SECONDS,
    "lookup_jitter": Bound(0, 1, integer=False),
    "reconnect_initial": _POSITIVE_SECONDS,
    "reconnect_max": _POSITIVE_SECONDS,
    "connect_timeout": Bound(0, integer=False, above=True, unit="seconds", optional=True),
    "stop_timeout": _SECONDS,
    "failover_window": _SECONDS,
    "concurrency": Bound(1, optional=True),
}


@dataclass(frozen=True)
class ConsumerOptions:
    """How a :class:`nsqctl.consumer.Consumer` reads: ``Consumer(..., options=ConsumerOptions(
    max_in_flight=50))``. Every value is checked when the options are made.

    How long nsqd may buffer messages for the consumer is the connection's setting
    (:class:`nsqctl.connection.ConnectionConfig`'s ``output_buffer_size``): a consumer of
    a durable channel on original nsqds that may be killed wants it unbuffered (-1)."""

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
    # max_in_flight below the connection count (RDY rotates): seconds a connection handed
    # RDY may stay quiet (nothing in flight, no message) before RDY moves to the next one.
    # Costs at most two RDY commands per this interval on an idle consumer.
    rdy_idle_turn: float = 0.25
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
    # consumer fails (FailoverTimeoutError); 0 gives up at once, as a publish does.
    failover_window: float = DEFAULT_FAILOVER_WINDOW
    seed: int | None = None
    # How many handlers may run at once. None: an async handler runs for every message in
    # flight (up to max_in_flight at once), a plain function one message at a time on the
    # event loop. N: at most N at once (async handlers, or threads=True).
    concurrency: int | None = None
    # A plain-function handler runs in a pool of ``concurrency`` threads instead of on the
    # event loop (a blocking handler then neither stalls the connections nor the others).
    threads: bool = False
    # TOUCH every message a handler holds before its message timeout (the one nsqd
    # negotiated in IDENTIFY) runs out, until it is answered or given back.
    auto_touch: bool = False

    def __post_init__(self) -> None:
        """Raise :class:`ConfigError` (``setting`` = the field) for a value that cannot work."""
        check_bounds(self, CONSUMER_BOUNDS)
        check_at_least(self, "reconnect_max", "reconnect_initial")
        if self.partitions is not None and (
            isinstance(self.partitions, str | bytes)
            or not isinstance(self.partitions, Sequence)
            or any(isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in self.partitions)
        ):
            raise ConfigError(
                f"bad partitions {self.partitions!r}: give a list of partition numbers "
                "(integers >= 0), or None for all",
                setting="partitions",
            )
        if self.ordered and self.start is not None:
            raise ConfigError(ORDERED_START, setting="start")
        for name in ("ordered", "threads", "auto_touch"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ConfigError(f"bad {name} {value!r}: give True or False", setting=name)
        if self.threads and self.concurrency is None:
            raise ConfigError(
                "threads=True needs concurrency=N: the number of handler threads",
                setting="concurrency",
            )
