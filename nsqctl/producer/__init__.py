"""Partition-aware producer for both NSQ families (see :mod:`nsqctl.producer.client`)."""

from nsqctl.errors import NoSuchPartitionError, PartitionUnavailableError, PublishError
from nsqctl.producer.client import Producer, PublishHook, Receipt
from nsqctl.producer.options import DEFAULT_MAX_BODY_SIZE, ProducerOptions

__all__ = [
    "DEFAULT_MAX_BODY_SIZE",
    "NoSuchPartitionError",
    "PartitionUnavailableError",
    "Producer",
    "ProducerOptions",
    "PublishError",
    "PublishHook",
    "Receipt",
]
