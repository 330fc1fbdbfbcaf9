"""The one exception tree of nsqctl: every error it raises on purpose is a
:class:`NsqctlError`, and every one is also of exactly one *kind* a caller can catch.

The kinds::

    NsqctlError
    ├── ConfigError              bad input: an address, a name, an option combination
    ├── TransportError           a connection could not be made, or it ended
    │   ├── ConnectError           ...could not be opened or set up (TLS, AUTH, handshake)
    │   │   ├── HandshakeTimeoutError  ...the handshake did not finish in time (a timeout too)
    │   │   └── NoConnectionError    ...to any nsqd of a topic, at start
    │   ├── ConnectionClosedError  ...ended (server closed, network error, we closed it)
    │   └── LookupUnavailableError no nsqlookupd answered
    ├── ProtocolError            a server sent bytes that are not the protocol
    │                            (decode errors live in :mod:`nsqctl.protocol.errors`)
    ├── ServerError              nsqd answered a command with an ``E_*`` error frame
    │                            (defined with one subclass per code in
    │                            :mod:`nsqctl.protocol.errors`, where frames are decoded)
    ├── NsqctlTimeoutError       a deadline passed
    ├── LeaderUnavailableError   a partition has no writable/reachable leader (redesign)
    │   ├── PartitionUnavailableError  a publish's partition had none within the budget
    │   └── FailoverTimeoutError       a consumer's partition had none within the window
    ├── NotFoundError            a topic, channel, partition or message does not exist
    ├── PublishError             a publish got no OK: nothing was acknowledged
    ├── UsageError               the library was used out of order (answered twice, ...)
    └── ...                      admin, archive and sandbox errors, each under NsqctlError

Some errors are of two kinds (``NoSuchPartitionError`` is a ``NotFoundError`` and a
``PartitionUnavailableError``; nsqd's ``E_TOPIC_NOT_EXIST`` is a ``ServerError`` and a
``NotFoundError``).

Messages speak of the library: where a setting would fix the error, ``err.setting``
names it (the keyword argument, e.g. ``"failover_window"``), and front ends such as the
CLI turn that into their own advice (a flag). Secrets never go into a message.
"""

from __future__ import annotations

__all__ = [
    "AdminError",
    "AlreadyRespondedError",
    "ArchiveWriteError",
    "ConfigError",
    "ConnectError",
    "ConnectionClosedError",
    "FailoverTimeoutError",
    "HandshakeTimeoutError",
    "LeaderUnavailableError",
    "LookupUnavailableError",
    "MessageNotFoundError",
    "NoConnectionError",
    "NoSuchPartitionError",
    "NotFoundError",
    "NsqctlError",
    "NsqctlTimeoutError",
    "PartitionUnavailableError",
    "ProtocolError",
    "PublishError",
    "ServerSetupError",
    "TopicNotFoundError",
    "TransportError",
    "UsageError",
    "describe_exception",
]


class NsqctlError(Exception):
    """Base of every error nsqctl raises on purpose.

    ``setting``: the library setting (keyword argument) that would change the outcome,
    when there is one; front ends map it to their own spelling (the CLI to a flag).
    """

    setting: str | None = None

    def __init__(self, *args: object, setting: str | None = None) -> None:
        super().__init__(*args)
        if setting is not None:
            self.setting = setting


# --------------------------------------------------------------------------- kinds


class ConfigError(NsqctlError):
    """Bad input from the caller: an address, a name, an option combination."""


class TransportError(NsqctlError):
    """A connection to a server could not be made, or it ended."""


class ProtocolError(NsqctlError):
    """Bytes from a server could not be decoded; the stream cannot be trusted."""


class NsqctlTimeoutError(NsqctlError):
    """A deadline passed: no reply, no handshake, nothing to wait for any more."""


class LeaderUnavailableError(NsqctlError):
    """A partition of a redesign topic has no writable (or reachable) leader."""

    def __init__(
        self, message: str, partition: int | None = None, *, setting: str | None = None
    ) -> None:
        super().__init__(message, setting=setting)
        self.partition = partition


class NotFoundError(NsqctlError):
    """A topic, channel, partition or message does not exist where it was looked for."""


class PublishError(NsqctlError):
    """A publish did not get an OK within the retry budget; nothing was acknowledged."""


class UsageError(NsqctlError):
    """The library was used out of order (a message answered twice, a closed client used)."""


# --------------------------------------------------------------------------- transport


class ConnectError(TransportError):
    """Could not open or set up a connection to nsqd (refused, TLS, AUTH, handshake)."""


class HandshakeTimeoutError(ConnectError, NsqctlTimeoutError):
    """nsqd accepted the connection but did not finish the handshake in time: a failure
    to connect, and a deadline that passed."""


class NoConnectionError(ConnectError):
    """No nsqd of the topic could be reached at start, within the connect timeout; or a
    source lost later stayed out of reach for the whole time a caller waits for it."""


class ConnectionClosedError(TransportError):
    """The connection ended (server closed, network error, or we closed it)."""

    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        self.reason = reason
        super().__init__(f"connection to nsqd {address} closed: {reason}")


class LookupUnavailableError(TransportError):
    """No nsqlookupd answered and no earlier answer exists to fall back on."""


# --------------------------------------------------------------------------- leaders


class PartitionUnavailableError(LeaderUnavailableError, PublishError):
    """The partition a publish must go to (explicit or by shard key) has no writable
    leader within the retry budget."""


class NoSuchPartitionError(PartitionUnavailableError, NotFoundError):
    """The partition asked for is beyond the topic's partition count: waiting cannot help."""


class FailoverTimeoutError(LeaderUnavailableError, NsqctlTimeoutError):
    """A consumer's partition had no reachable leader within the failover window."""


# --------------------------------------------------------------------------- not found


class AdminError(NsqctlError):
    """An admin request was refused or could not be made."""


class TopicNotFoundError(NotFoundError, AdminError):
    """No lookupd or nsqd knows the topic."""


class MessageNotFoundError(NotFoundError):
    """A message id appears in none of the sources searched (trace)."""


# --------------------------------------------------------------------------- usage


class AlreadyRespondedError(UsageError):
    """finish()/requeue() called twice on one message."""


# --------------------------------------------------------------------------- tools


class ArchiveWriteError(NsqctlError):
    """A batch could not be written durably; its messages were not acknowledged."""


class ServerSetupError(NsqctlError):
    """A local server could not be built or started (sandbox and test fixtures)."""


def describe_exception(err: BaseException) -> str:
    """An unexpected failure in one short phrase for an error line: its type and its text
    (the type alone when it has none)."""
    text = str(err).strip()
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
