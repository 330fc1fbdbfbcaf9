"""Producer options: :class:`ProducerOptions`, the one place a producer's settings are
given, in the same style as the consumer's :class:`nsqctl.consumer.ConsumerOptions`
(go-nsq's ``Config``): frozen, each numeric field's accepted values declared once in
:data:`PRODUCER_BOUNDS`, every value checked once, when the options are made.

How a publish retries (the ``max_attempts``/``retry_timeout``/``backoff``/
``max_backoff``/``failover_window`` fields) is decided in :mod:`nsqctl.producer.retry_clock`.
"""

from __future__ import annotations

from dataclasses import dataclass

from nsqctl.bounds import Bound, check_at_least, check_bounds
from nsqctl.errors import ConfigError
from nsqctl.failover import DEFAULT_FAILOVER_WINDOW
from nsqctl.sharding import DEFAULT_HASH, PARTITIONERS

__all__ = ["DEFAULT_MAX_BODY_SIZE", "PRODUCER_BOUNDS", "ProducerOptions"]

#: nsqd's default --max-body-size (MPUB bodies are split to stay under it).
DEFAULT_MAX_BODY_SIZE = 5 * 1024 * 1024

_SECONDS = Bound(0, integer=False, unit="seconds")
#: Each numeric field's accepted values. Zero seconds is meaningful for the retry fields
#: (give up at the first failure, retry at once, no failover wait); fewer than one
#: attempt would give up before trying.
PRODUCER_BOUNDS: dict[str, Bound] = {
    "max_attempts": Bound(1),
    "retry_timeout": _SECONDS,
    "backoff": _SECONDS,
    "max_backoff": _SECONDS,
    "failover_window": _SECONDS,
    "lookup_interval": Bound(0, integer=False, above=True, unit="seconds"),
    "max_body_size": Bound(1, unit="bytes", up_to="nsqd's max_body_size"),
}


@dataclass(frozen=True)
class ProducerOptions:
    """How a :class:`nsqctl.producer.Producer` publishes: ``Producer(..., options=
    ProducerOptions(max_attempts=2))``. Every value is checked when the options are made.

    Until a topic took a publish from this producer, a failed publish gives up after
    ``max_attempts`` tries within ``retry_timeout`` seconds (a typo in an address or a
    topic should fail fast); once it did, losing the leader is an event of the cluster and
    the publish waits up to ``failover_window`` seconds for a new one. Between tries it
    waits ``backoff`` seconds, doubled each time up to ``max_backoff``.
    """

    max_attempts: int = 6
    retry_timeout: float = 30.0
    backoff: float = 0.1
    max_backoff: float = 2.0
    #: seconds a publish to an already written topic waits for a new leader (0: off)
    failover_window: float = DEFAULT_FAILOVER_WINDOW
    #: how a ``shard_key`` picks its partition: as go-nsq ("murmur3") or nsqJavaSDK ("java")
    hash: str = DEFAULT_HASH
    #: the largest MPUB body sent: bigger batches are split (nsqd's --max-body-size)
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    #: seconds a topic's lookup is reused before it is fetched again
    lookup_interval: float = 60.0

    def __post_init__(self) -> None:
        """Raise :class:`ConfigError` (``setting`` = the field) for a value that cannot work."""
        check_bounds(self, PRODUCER_BOUNDS)
        check_at_least(self, "max_backoff", "backoff")
        if self.hash not in PARTITIONERS:
            raise ConfigError(
                f"bad hash {self.hash!r}: choose one of {', '.join(sorted(PARTITIONERS))}",
                setting="hash",
            )
