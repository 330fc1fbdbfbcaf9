"""Consumer package: the client (:mod:`.client`), its options and counters
(:mod:`.options`) and the ordered-partition checker (:mod:`.order`).

``nsqctl.consumer`` keeps exporting every name it had as a single module, so callers
import from here unchanged.
"""

from nsqctl.consumer.client import (
    Consumer,
    GiveUpHook,
    Handler,
    OrderEventHook,
)
from nsqctl.consumer.options import ConsumerOptions, ConsumerStats, NoConnectionError
from nsqctl.consumer.order import OrderChecker, OrderViolation
from nsqctl.deadletter import DeadLetterFile, dead_letter_path

__all__ = [
    "Consumer",
    "ConsumerOptions",
    "ConsumerStats",
    "DeadLetterFile",
    "GiveUpHook",
    "Handler",
    "NoConnectionError",
    "OrderChecker",
    "OrderEventHook",
    "OrderViolation",
    "dead_letter_path",
]
