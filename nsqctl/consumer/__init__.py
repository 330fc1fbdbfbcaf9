"""Consumer package: the client (:mod:`.client`), composed of its connection set
(:mod:`.connections`), delivery path (:mod:`.delivery`), flow control
(:mod:`.flow_control`) and leader watch (:mod:`.leaders`); its options (:mod:`.options`)
and counters (:mod:`.stats`), the ordered-partition checker (:mod:`.order`) and the
sans-IO failover bookkeeping (:mod:`.partition_watch`).
"""

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
from nsqctl.deadletter import DeadLetterFile, dead_letter_path
from nsqctl.errors import FailoverTimeoutError, NoConnectionError
from nsqctl.failover import FailoverEvent

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
