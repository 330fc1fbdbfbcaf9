"""Consumer package: the client (:mod:`.client`), composed of its connection set
(:mod:`.connections`), delivery path (:mod:`.delivery`), flow control (:mod:`.rdy`) and
leader watch (:mod:`.leaders`); its options and counters (:mod:`.options`), the
ordered-partition checker (:mod:`.order`) and the sans-IO failover clocks (:mod:`.failover`).
"""

from nsqctl.consumer.client import (
    Consumer,
    FailoverHook,
    GiveUpHook,
    Handler,
    OrderEventHook,
)
from nsqctl.consumer.options import ConsumerOptions, ConsumerStats
from nsqctl.consumer.order import OrderChecker, OrderViolation
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
