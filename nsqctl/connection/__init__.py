"""Connections to nsqd: :class:`Connection` (:mod:`.tcp`), what it is set up with
(:mod:`.config`) and the asyncio protocol under it (:mod:`.stream`)."""

from nsqctl.connection.config import ConnectionConfig, TLSSettings
from nsqctl.connection.tcp import (
    BatchHandler,
    CloseHandler,
    Connection,
    ErrorHandler,
    MessageHandler,
)
from nsqctl.errors import ConnectError, ConnectionClosedError

__all__ = [
    "BatchHandler",
    "CloseHandler",
    "ConnectError",
    "Connection",
    "ConnectionClosedError",
    "ConnectionConfig",
    "ErrorHandler",
    "MessageHandler",
    "TLSSettings",
]
