"""Consumer package: the client (:mod:`.client`, built in layers from :mod:`.connections`,
:mod:`.delivery`, :mod:`.rdy` and :mod:`.leaders`), its options and counters
(:mod:`.options`), the ordered-partition checker (:mod:`.order`) and the leader
failover bookkeeping (:mod:`.failover`).

``nsqctl.consumer`` keeps exporting every name it had as a single module, so callers
import from here unchanged.
"""

from nsqctl.consumer.client import (
    Consumer,
    FailoverHook,
    GiveUpHook,
    Handler,
    OrderEventHook,
)
from nsqctl.consumer.failover import LeaderWait
from nsqctl.consumer.options import ConsumerOptions, ConsumerStats
from nsqctl.consumer.order import OrderChecker, OrderViolation
from nsqctl.deadletter import DeadLetterFile, dead_letter_path
from nsqctl.errors import FailoverTimeoutError, NoConnectionError

__all__ = [
    "Consumer",
    "ConsumerOptions",
    "ConsumerStats",
    "DeadLetterFile",
    "FailoverHook",
    "FailoverTimeoutError",
    "GiveUpHook",
    "Handler",
    "LeaderWait",
    "NoConnectionError",
    "OrderChecker",
    "OrderEventHook",
    "OrderViolation",
    "dead_letter_path",
]
