"""Consumer options and counters.

:class:`ConsumerOptions` is frozen: a consumer builds its own copy with
``dataclasses.replace`` from the options and keyword overrides it is given, so an options
object can be shared by many consumers and is never changed behind its owner's back.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, fields

from nsqctl.errors import ConfigError
from nsqctl.failover import DEFAULT_FAILOVER_WINDOW

#: youzan's SUB_ORDERED takes no start position and SUB_ADVANCED is never ordered, so an
#: ordered reader starts where the channel is: its offset is moved beforehand.
ORDERED_START = (
    "ordered subscriptions take no start position (youzan's SUB_ORDERED has none): move "
    "the channel's offset first (the admin channel setoffset action, nsqd's "
    "/channel/setoffset), then subscribe ordered without start="
)


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
    # auto_touch: TOUCH commands sent for messages held by a handler past half their
    # message timeout.
    touched: int = 0


@dataclass(frozen=True)
class ConsumerOptions:
    """How a :class:`nsqctl.consumer.Consumer` reads; :meth:`validate` checks the values."""

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

    def validate(self) -> None:
        """Raise :class:`ConfigError` (``setting`` = the option) for a value that cannot work."""
        for name in ("max_in_flight", "max_attempts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}", setting=name)
        for name in (
            "backoff_multiplier",
            "max_backoff",
            "rdy_redistribute_interval",
            "low_rdy_idle_timeout",
            "low_rdy_timeout",
            "rdy_idle_turn",
            "lookup_interval",
            "reconnect_initial",
            "reconnect_max",
        ):
            _check_number(name, getattr(self, name), positive=True)
        for name in (
            "default_requeue_delay",
            "max_requeue_delay",
            "stop_timeout",
            "failover_window",
        ):
            _check_number(name, getattr(self, name), positive=False)
        for name in ("max_rate", "connect_timeout"):
            value = getattr(self, name)
            if value is not None:
                _check_number(name, value, positive=True)
        if not 0 <= self.lookup_jitter <= 1:
            raise ConfigError(
                f"lookup_jitter must be within 0..1, got {self.lookup_jitter!r}",
                setting="lookup_jitter",
            )
        if self.reconnect_max < self.reconnect_initial:
            raise ConfigError(
                f"reconnect_max ({self.reconnect_max:g}) must be >= reconnect_initial "
                f"({self.reconnect_initial:g})",
                setting="reconnect_max",
            )
        if self.partitions is not None and any(
            isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in self.partitions
        ):
            raise ConfigError(
                f"partitions must be integers >= 0, got {list(self.partitions)!r}",
                setting="partitions",
            )
        if self.ordered and self.start is not None:
            raise ConfigError(ORDERED_START, setting="start")
        concurrency = self.concurrency
        if concurrency is not None and (
            isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
        ):
            raise ConfigError(
                f"concurrency must be an integer >= 1 (or None), got {concurrency!r}",
                setting="concurrency",
            )
        for name in ("threads", "auto_touch"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ConfigError(f"{name} must be True or False, got {value!r}", setting=name)
        if self.threads and concurrency is None:
            raise ConfigError(
                "threads=True needs concurrency=N: the number of handler threads",
                setting="concurrency",
            )


class NotGiven(enum.Enum):
    """The default of a Consumer's option keywords: "not given", so that an explicit
    value (even ``None``) overrides ``options=`` and an absent one does not."""

    NOT_GIVEN = "not given"

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = NotGiven.NOT_GIVEN

#: The names a Consumer accepts as keyword overrides of :class:`ConsumerOptions`.
OPTION_NAMES = frozenset(f.name for f in fields(ConsumerOptions))


def _check_number(name: str, value: object, *, positive: bool) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and (value > 0 if positive else value >= 0):  # type: ignore[operator]
        return
    bound = "> 0" if positive else ">= 0"
    raise ConfigError(f"{name} must be a number {bound}, got {value!r}", setting=name)
