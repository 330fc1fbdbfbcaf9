"""Consumer package: the client (:mod:`.client`), composed of its connection set
(:mod:`.connections`), delivery path (:mod:`.delivery`), flow control
(:mod:`.flow_control`) and leader watch (:mod:`.leaders`); its options (:mod:`.options`)
and counters (:mod:`.stats`), the ordered-partition checker (:mod:`.order`) and the
sans-IO failover bookkeeping (:mod:`.partition_watch`).

The dead-letter file's names load on first use (:func:`__getattr__`): a consumer that
never gives up on a message, ``nsqctl tail`` among them, need not import it.
"""

from typing import TYPE_CHECKING, Any

from nsqctl.consumer.client import (
    Consumer,
    FailoverHook,
    GiveUpHook,
    Handler,
    OrderEventHook,
)
from nsqctl.consumer.options import ConsumerOptions
from nsqctl.consumer.order import OrderChecker, OrderViolation
from nsqctl.consumer.stats import ConsumerStats
from nsqctl.errors import FailoverTimeoutError, NoConnectionError
from nsqctl.failover import FailoverEvent

if TYPE_CHECKING:
    from nsqctl.deadletter import DeadLetterFile, dead_letter_path

__all__ = [
    "Consumer",
    "ConsumerOptions",
    "ConsumerStats",
    "DeadLetterFile",
    "FailoverEvent",
    "FailoverHook",
    "FailoverTimeoutError",
    "GiveUpHook",
    "Handler",
    "NoConnectionError",
    "OrderChecker",
    "OrderEventHook",
    "OrderViolation",
    "dead_letter_path",
]


def __getattr__(name: str) -> Any:
    if name in ("DeadLetterFile", "dead_letter_path"):
        from nsqctl import deadletter

        return getattr(deadletter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
