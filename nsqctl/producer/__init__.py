"""Partition-aware producer for both NSQ families (see :mod:`nsqctl.producer.client`)."""

from nsqctl.errors import NoSuchPartitionError, PartitionUnavailableError, PublishError
from nsqctl.producer.client import DEFAULT_MAX_BODY_SIZE, Producer, PublishHook, Receipt
from nsqctl.producer.failover import RetryPolicy

__all__ = [
    "DEFAULT_MAX_BODY_SIZE",
    "NoSuchPartitionError",
    "PartitionUnavailableError",
    "Producer",
    "PublishError",
    "PublishHook",
    "Receipt",
    "RetryPolicy",
]
