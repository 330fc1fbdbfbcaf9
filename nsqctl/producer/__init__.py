"""Partition-aware producer for both NSQ families (see :mod:`nsqctl.producer.client`)."""

from nsqctl.errors import NoSuchPartitionError, PartitionUnavailableError, PublishError
from nsqctl.producer.client import DEFAULT_MAX_BODY_SIZE, Producer, PublishHook, Receipt
from nsqctl.producer.failover import DEFAULT_FAILOVER_WINDOW, FailoverEvent, RetryPolicy

__all__ = [
    "DEFAULT_FAILOVER_WINDOW",
    "DEFAULT_MAX_BODY_SIZE",
    "FailoverEvent",
    "NoSuchPartitionError",
    "PartitionUnavailableError",
    "Producer",
    "PublishError",
    "PublishHook",
    "Receipt",
    "RetryPolicy",
]
