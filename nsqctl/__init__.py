"""nsqctl: an NSQ client library, operator CLI and dashboard for both NSQ families (the
original nsqio/nsq and youzan's partitioned, replicated redesign).

The library's whole public API is here, at ``nsqctl.X``::

    import nsqctl

    async with nsqctl.Producer(lookupd_http="127.0.0.1:4161") as producer:
        await producer.publish("orders", b"hello")

    async with nsqctl.Consumer("orders", "audit", handle, lookupd_http="127.0.0.1:4161"):
        ...

Everything below the top level (``nsqctl.consumer``, ``nsqctl.connection``, ...) is the
implementation: importable, but not a promise. Names are loaded on first use, so that
``import nsqctl`` (and every CLI command, which imports it) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # clients
    "Producer": "nsqctl.producer",
    "Receipt": "nsqctl.producer",
    "RetryPolicy": "nsqctl.producer",
    "Consumer": "nsqctl.consumer",
    "ConsumerOptions": "nsqctl.consumer",
    "ConsumerStats": "nsqctl.consumer",
    "OrderViolation": "nsqctl.consumer",
    "Message": "nsqctl.message",
    "finish_all": "nsqctl.message",
    "DeadLetterFile": "nsqctl.deadletter",
    "FailoverEvent": "nsqctl.failover",
    "DEFAULT_FAILOVER_WINDOW": "nsqctl.failover",
    # connection settings
    "ConnectionConfig": "nsqctl.connection",
    "TLSSettings": "nsqctl.connection",
    "Secret": "nsqctl.secrets",
    "TraceLog": "nsqctl.tracelog",
    # discovery
    "LookupClient": "nsqctl.lookup",
    "Topology": "nsqctl.lookup",
    # errors: the kinds, then the ones worth catching by name
    "NsqctlError": "nsqctl.errors",
    "ConfigError": "nsqctl.errors",
    "TransportError": "nsqctl.errors",
    "ConnectError": "nsqctl.errors",
    "NoConnectionError": "nsqctl.errors",
    "HandshakeTimeoutError": "nsqctl.errors",
    "ConnectionClosedError": "nsqctl.errors",
    "LookupUnavailableError": "nsqctl.errors",
    "ProtocolError": "nsqctl.errors",
    "ServerError": "nsqctl.protocol.errors",
    "NsqctlTimeoutError": "nsqctl.errors",
    "LeaderUnavailableError": "nsqctl.errors",
    "PartitionUnavailableError": "nsqctl.errors",
    "NoSuchPartitionError": "nsqctl.errors",
    "FailoverTimeoutError": "nsqctl.errors",
    "NotFoundError": "nsqctl.errors",
    "TopicNotFoundError": "nsqctl.errors",
    "MessageNotFoundError": "nsqctl.errors",
    "PublishError": "nsqctl.errors",
    "UsageError": "nsqctl.errors",
    "AlreadyRespondedError": "nsqctl.errors",
    "AdminError": "nsqctl.errors",
    "ArchiveWriteError": "nsqctl.errors",
    "ServerSetupError": "nsqctl.errors",
}

# a literal list, so that linters and type checkers read it
__all__ = [
    "DEFAULT_FAILOVER_WINDOW",
    "AdminError",
    "AlreadyRespondedError",
    "ArchiveWriteError",
    "ConfigError",
    "ConnectError",
    "ConnectionClosedError",
    "ConnectionConfig",
    "Consumer",
    "ConsumerOptions",
    "ConsumerStats",
    "DeadLetterFile",
    "FailoverEvent",
    "FailoverTimeoutError",
    "HandshakeTimeoutError",
    "LeaderUnavailableError",
    "LookupClient",
    "LookupUnavailableError",
    "Message",
    "MessageNotFoundError",
    "NoConnectionError",
    "NoSuchPartitionError",
    "NotFoundError",
    "NsqctlError",
    "NsqctlTimeoutError",
    "OrderViolation",
    "PartitionUnavailableError",
    "Producer",
    "ProtocolError",
    "PublishError",
    "Receipt",
    "RetryPolicy",
    "Secret",
    "ServerError",
    "ServerSetupError",
    "TLSSettings",
    "TopicNotFoundError",
    "Topology",
    "TraceLog",
    "TransportError",
    "UsageError",
    "__version__",
    "finish_all",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'nsqctl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # what a type checker and an IDE see: the same names, eagerly
    from nsqctl.connection import ConnectionConfig, TLSSettings
    from nsqctl.consumer import Consumer, ConsumerOptions, ConsumerStats, OrderViolation
    from nsqctl.deadletter import DeadLetterFile
    from nsqctl.errors import (
        AdminError,
        AlreadyRespondedError,
        ArchiveWriteError,
        ConfigError,
        ConnectError,
        ConnectionClosedError,
        FailoverTimeoutError,
        HandshakeTimeoutError,
        LeaderUnavailableError,
        LookupUnavailableError,
        MessageNotFoundError,
        NoConnectionError,
        NoSuchPartitionError,
        NotFoundError,
        NsqctlError,
        NsqctlTimeoutError,
        PartitionUnavailableError,
        ProtocolError,
        PublishError,
        ServerSetupError,
        TopicNotFoundError,
        TransportError,
        UsageError,
    )
    from nsqctl.failover import DEFAULT_FAILOVER_WINDOW, FailoverEvent
    from nsqctl.lookup import LookupClient, Topology
    from nsqctl.message import Message, finish_all
    from nsqctl.producer import Producer, Receipt, RetryPolicy
    from nsqctl.protocol.errors import ServerError
    from nsqctl.secrets import Secret
    from nsqctl.tracelog import TraceLog
