"""The one exception tree of nsqctl: every error it raises on purpose is a
:class:`NsqctlError`, and every one is also of at least one *kind* a caller can catch.
Every class below, and every subclass defined elsewhere, is also at ``nsqctl.X``.

The tree: a class of two kinds is drawn under one, and ``+Kind`` names the other
(``tests/unit/test_public_api.py`` checks this drawing against the classes)::

    NsqctlError
    ├── ConfigError              bad input: an address, a name, an option combination
    ├── TransportError           a connection could not be made, or it ended
    │   ├── ConnectError           ...could not be opened or set up (TLS, AUTH, handshake)
    │   │   ├── ConnectTimeoutError    +NsqctlTimeoutError: not opened within the timeout
    │   │   │   └── HandshakeTimeoutError  ...opened, but the handshake did not finish
    │   │   ├── NoConnectionError      ...to any nsqd of a topic, at start
    │   │   │   └── NoConnectionTimeoutError  +NsqctlTimeoutError: none refused, all silent
    │   │   ├── PublishConnectError    +PublishTransportError: a publish could not connect
    │   │   │   └── PublishConnectTimeoutError  +PublishTimeoutError: ...every try timed out
    │   │   └── TLSError               TLS could not be set up: its handshake failed, or
    │   │       │                          one side wants TLS and the other has none
    │   │       └── TLSCertificateError    ...a certificate was not accepted: nsqd's did
    │   │                                  not verify, or nsqd rejected ours
    │   ├── PublishTransportError  +PublishError: a publish's connections kept failing
    │   │   └── PublishTimeoutError    +NsqctlTimeoutError: ...every attempt timed out
    │   ├── ConnectionClosedError  ...ended (server closed, network error, we closed it)
    │   │   └── ReplyTimeoutError      +NsqctlTimeoutError: ...by us, nsqd silent too long
    │   └── LookupUnavailableError no nsqlookupd answered
    ├── ProtocolError            a server sent bytes that are not the protocol
    │   └── AnswerDecodeError      an HTTP answer of the wrong shape (names server, field)
    ├── ServerError              a server refused the request: nsqd's ``E_*`` error frame
    │   │                        (``err.code``; one subclass per code, defined where
    │   │                        frames are decoded: :mod:`nsqctl.protocol.errors`)
    │   └── TopicNotFoundError     +NotFoundError +AdminError: no such topic (nsqd's
    │                              ``E_TOPIC_NOT_EXIST``, or no lookupd/nsqd knows it)
    ├── NsqctlTimeoutError       a deadline passed
    ├── LeaderUnavailableError   a partition has no writable/reachable leader (redesign)
    │   ├── PartitionUnavailableError  +PublishError: a publish's partition had none
    │   │   ├── NoSuchPartitionError     +NotFoundError +ConfigError: beyond the count
    │   │   └── PartitionTimeoutError    +NsqctlTimeoutError: ...every attempt timed out
    │   └── FailoverTimeoutError       +NsqctlTimeoutError: a consumer's had none in time
    ├── NotFoundError            a topic, channel, partition or message does not exist
    │   └── MessageNotFoundError   a message id is in none of the sources searched
    ├── PublishError             a publish got no OK: nothing was acknowledged
    ├── UsageError               the library was used out of order
    │   ├── AlreadyRespondedError  a message answered twice
    │   └── ProducerClosedError    +PublishError: a publish on, or ended by, close()
    ├── AdminError               an admin request was refused or could not be made
    ├── ArchiveWriteError        a batch could not be written durably
    ├── TraceLogWriteError       the trace log could not be written (full disk, I/O)
    ├── MissingExtraError        an optional package (an extra: archive, serve...) is missing
    ├── ExecutorError            Spark executors lack what an nsqctl job needs
    └── ServerSetupError         a local server could not be built or started

Other modules' errors subclass these kinds: decode errors are ``ProtocolError``
subclasses, bad names ``ConfigError`` ones, and so on.

A publish that gives up says why by its kind, and chains the last failure as
``__cause__``: :class:`PublishConnectError` when no nsqd could be connected to,
:class:`PublishTransportError` when its connections ended (each of them also an
:class:`NsqctlTimeoutError`, :class:`PublishConnectTimeoutError` and
:class:`PublishTimeoutError`, when every attempt failed by a deadline), :class:`TopicNotFoundError`
when the topic does not exist, :class:`PartitionUnavailableError` when a partition had no
leader (:class:`PartitionTimeoutError` when every attempt failed by a deadline); a plain
:class:`PublishError` otherwise. An error the server will give again
(a bad message, a bad topic name) is raised as that :class:`ServerError` at once.

Messages speak of the library: where a setting would fix the error, ``err.setting``
names it (the keyword argument, e.g. ``"failover_window"``), and front ends such as the
CLI turn that into their own advice (a flag). A message that names a setting in its text
writes it in backquotes (`sync_every`), and an action to take as a call in the admin
actions' words (`topic_list()`, `lookup(orders)`,
`channel_setoffset(orders, billing, partition=2, virtual_offset=0)`): the CLI shows
each as its flag or command. Secrets never go into a message.
"""

from __future__ import annotations

import socket

__all__ = [
    "AdminError",
    "AlreadyRespondedError",
    "AnswerDecodeError",
    "ArchiveWriteError",
    "ConfigError",
    "ConnectError",
    "ConnectTimeoutError",
    "ConnectionClosedError",
    "FailoverTimeoutError",
    "HandshakeTimeoutError",
    "LeaderUnavailableError",
    "LookupUnavailableError",
    "MessageNotFoundError",
    "NoConnectionError",
    "NoConnectionTimeoutError",
    "NoSuchPartitionError",
    "NotFoundError",
    "NsqctlError",
    "NsqctlTimeoutError",
    "PartitionTimeoutError",
    "PartitionUnavailableError",
    "ProducerClosedError",
    "ProtocolError",
    "PublishConnectError",
    "PublishConnectTimeoutError",
    "PublishError",
    "PublishTimeoutError",
    "PublishTransportError",
    "ReplyTimeoutError",
    "ServerError",
    "ServerSetupError",
    "TLSCertificateError",
    "TLSError",
    "TopicNotFoundError",
    "TransportError",
    "UsageError",
    "describe_connect_failure",
    "describe_exception",
]


class NsqctlError(Exception):
    """Base of every error nsqctl raises on purpose.

    ``setting``: the library setting (keyword argument) that would change the outcome,
    when there is one; front ends map it to their own spelling (the CLI to a flag).
    """

    setting: str | None = None
    #: On the error a publish call ends with: True when none of its attempts wrote the
    #: message to an nsqd (the lookup failed, no nsqd leads it or could be reached) or
    #: nsqd answered each one that did that it stored nothing (see
    #: nsqctl.producer.retry.stored_nothing), so it cannot have been stored and
    #: publishing it again cannot make a copy; False when it may have been; None when not
    #: said (not a publish's error).
    unsent: bool | None = None

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


class AnswerDecodeError(ProtocolError):
    """A server answered an HTTP request with JSON of the wrong shape (or with no JSON);
    ``str()`` names the server, the endpoint and the field (``$.producers[0].tcp_port``)."""


class ServerError(NsqctlError):
    """A server refused the request: mostly an error frame sent by nsqd,
    ``E_CODE description`` (each code's subclass is in :mod:`nsqctl.protocol.errors`).

    ``message``, when given, is the whole text (for the same condition found another
    way than by an error frame, e.g. a lookupd's "not found"). ``context`` is the
    lower-case command the error answers ("pub", "sub", "fin", ...),
    when the caller knows it; it decides fatality for the mixed codes. ``topic`` only
    makes the message more helpful.
    """

    #: Codes handled by this class (the registry maps each one here).
    codes: tuple[str, ...] = ()
    #: Whether the server closes the connection after this error.
    default_fatal: bool = True
    #: Whether a publish that got this error may be sent again.
    default_retryable_on_publish: bool = False
    #: Whether the error means "this partition moved": refresh the lookup first.
    needs_lookup_refresh: bool = False
    #: What the user should do; ``{topic}`` is filled in when known.
    hint: str = ""

    def __init__(
        self,
        code: str = "",
        description: str = "",
        *,
        context: str | None = None,
        topic: str | None = None,
        message: str | None = None,
    ) -> None:
        self.code = code
        self.description = description
        self.context = context
        self.topic = topic
        self.message = message
        super().__init__(self._format())

    @property
    def fatal(self) -> bool:
        """True when nsqd closes the connection after sending this error."""
        return self.default_fatal

    @property
    def retryable_on_publish(self) -> bool:
        """True when publishing the same message again can succeed."""
        return self.default_retryable_on_publish

    def __str__(self) -> str:
        return self._format()  # recomputed: callers may set ``topic`` after construction

    def hint_text(self) -> str:
        """The hint shown with the server's words: the class's, unless a code whose
        conditions nsqd tells apart only in its text picks one by that text."""
        return self.hint

    def _format(self) -> str:
        if self.message is not None:  # said by the library, not by an error frame
            return self.message
        server = f"{self.code}: {self.description}" if self.description else self.code
        if not server:
            server = "(empty error frame)"
        hint = self.hint_text()
        if not hint:
            return f"server error {server}"
        if self.topic:
            text = hint.format(topic=repr(self.topic))
        else:  # "topic {topic}" must not read "topic the topic"
            text = hint.replace("topic {topic}", "{topic}").format(topic="the topic")
        return f"{text} [server said {server}]"


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
    """A publish did not get an OK within the retry budget; nothing was acknowledged
    (``unsent`` says whether it may have been stored all the same)."""


class UsageError(NsqctlError):
    """The library was used out of order (a message answered twice, a closed client used)."""


# --------------------------------------------------------------------------- transport


class ConnectError(TransportError):
    """Could not open or set up a connection to nsqd (refused, TLS, AUTH, handshake)."""


class ConnectTimeoutError(ConnectError, NsqctlTimeoutError):
    """A connection to nsqd could not be opened within the connect timeout: a failure to
    connect, and a deadline that passed."""


class HandshakeTimeoutError(ConnectTimeoutError):
    """nsqd accepted the connection but did not finish the handshake in time."""


class NoConnectionError(ConnectError):
    """No nsqd of the topic could be reached at start, within the connect timeout; or a
    source lost later stayed out of reach for the whole time a caller waits for it."""


class NoConnectionTimeoutError(NoConnectionError, NsqctlTimeoutError):
    """No nsqd of the topic could be reached at start (or, for an archive, the sources
    lost later stayed out of reach for the failover window), and none refused: each one
    let a deadline pass (did not accept, did not finish the handshake, or did not answer
    within the connect timeout), as a hung nsqd does. A deadline that passed, as well as the
    :class:`NoConnectionError` it was before timeouts had a kind of their own."""


class PublishTransportError(TransportError, PublishError):
    """A publish gave up because its connections kept failing (closed by the server or
    the network) within the retry budget; nothing was acknowledged. The last failure is
    its ``__cause__``."""


class PublishConnectError(ConnectError, PublishTransportError):
    """A publish gave up because no nsqd it could go to could be connected to (refused,
    unresolvable, TLS, AUTH, handshake); nothing was acknowledged. The last failure is
    its ``__cause__``."""


class PublishTimeoutError(PublishTransportError, NsqctlTimeoutError):
    """A publish gave up and every one of its attempts had failed by a deadline (nsqd
    did not reply, or did not accept or set up a connection, in time): a hung or
    overloaded nsqd rather than a refusal. Nothing was acknowledged; the last failure is
    its ``__cause__``."""


class PublishConnectTimeoutError(PublishConnectError, PublishTimeoutError):
    """A :class:`PublishTimeoutError` whose last attempt could not connect in time: also a
    :class:`PublishConnectError`, what it was before a timeout had a kind of its own."""


class TLSError(ConnectError):
    """TLS towards nsqd could not be set up: the TLS handshake failed (nsqd's certificate
    did not verify, or nsqd refused ours), or the two sides disagree (TLS asked for and
    nsqd offers none; nsqd requires it and none was asked for). ``setting`` names the TLS
    setting to change; the TLS library's own failure, when there is one, is its
    ``__cause__``. A :class:`ConnectError`, as every TLS failure was before it had a class
    of its own. Never shows a key or a passphrase."""


class TLSCertificateError(TLSError):
    """A certificate was not accepted in the TLS handshake: nsqd's did not verify against
    the CA given (or names another host), or nsqd rejected ours (none, or not signed by a
    CA it trusts). A mismatch of settings that no retry of that nsqd changes, like TLS
    asked of an nsqd that offers none: a consumer's start fails with it at once, a keyed
    publish fails with it at its first attempt, and an unkeyed one goes on to its topic's
    other nsqds and fails with it once every one of them refused. ``setting`` is
    ``"tls_ca"`` (nsqd's certificate) or ``"tls_cert"`` (ours)."""


class ConnectionClosedError(TransportError):
    """The connection ended (server closed, network error, or we closed it)."""

    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        self.reason = reason
        super().__init__(f"connection to nsqd {address} closed: {reason}")


class ReplyTimeoutError(ConnectionClosedError, NsqctlTimeoutError):
    """We closed the connection because nsqd stayed silent past a deadline: no reply to a
    request within ``request_timeout``, or nothing at all (not even a heartbeat) for the
    idle deadline. A hung nsqd (stopped, stalled on its disk) keeps its sockets open, so a
    deadline is the only sign of it."""


class LookupUnavailableError(TransportError):
    """No nsqlookupd answered and no earlier answer exists to fall back on."""


# --------------------------------------------------------------------------- leaders


class PartitionUnavailableError(LeaderUnavailableError, PublishError):
    """The partition a publish must go to (explicit or by shard key) has no writable
    leader within the retry budget."""


class NoSuchPartitionError(PartitionUnavailableError, NotFoundError, ConfigError):
    """The partition asked for is beyond the topic's partition count: waiting cannot help.
    Bad input (a :class:`ConfigError`), as the same partition given to a consumer is: the
    CLI exits 2 for it whichever command was given it."""


class PartitionTimeoutError(PartitionUnavailableError, NsqctlTimeoutError):
    """A publish's partition had no leader that answered within the failover window, and
    every attempt failed by a deadline: its leader is hung (stopped, stalled), not gone,
    since the lookup kept naming it."""


class FailoverTimeoutError(LeaderUnavailableError, NsqctlTimeoutError):
    """A consumer's partition had no reachable leader within the failover window."""


# --------------------------------------------------------------------------- not found


class AdminError(NsqctlError):
    """An admin request was refused or could not be made."""


class TopicNotFoundError(ServerError, NotFoundError, AdminError):
    """The topic (or that partition of it) does not exist: nsqd answered
    ``E_TOPIC_NOT_EXIST``, or no lookupd or nsqd knows it (then ``message`` says where it
    was looked for, and ``code`` is empty). One class for both, so that one ``except``
    catches it whichever way it was found; an :class:`AdminError` as well, since the
    admin functions raise it."""

    codes = ("E_TOPIC_NOT_EXIST",)
    # a topic just created may not have reached every nsqd and lookupd yet
    default_retryable_on_publish = True
    needs_lookup_refresh = True
    hint = (
        "topic {topic} (or that partition) does not exist on this nsqd: refresh the "
        "lookup, or create it on the lookupd leader (/topic/create)"
    )


class MessageNotFoundError(NotFoundError):
    """A message id appears in none of the sources searched (trace)."""


# --------------------------------------------------------------------------- usage


class AlreadyRespondedError(UsageError):
    """finish()/requeue() called twice on one message."""


class ProducerClosedError(UsageError, PublishError):
    """A publish called on a Producer after its ``close()``, or ended by it: begun before
    it but not yet run (a batch of ``publish_many``), or waiting to retry when it came. A
    mistake in the calling code (publishing on, or closing under, a producer in use), and a
    :class:`PublishError` as well (what it was before it had a class), so that code
    catching failed publishes keeps catching it. Nothing was sent (``unsent`` is True)
    unless an earlier attempt of a publish waiting to retry wrote it (``unsent`` False:
    its reply timed out, say, and it may have been stored)."""

    unsent = True


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


def describe_connect_failure(err: BaseException) -> str:
    """Why a connection could not be made, in words for an error line: a host name that
    did not resolve (nothing was connected to: the name is wrong, or DNS is down) apart
    from a server that refused or could not be reached. ``err`` may wrap the resolver's
    error, as httpx's ConnectError does."""
    # a chain can loop (an exception raised again while handling one that caused it)
    visited: set[int] = set()
    seen: BaseException | None = err
    while seen is not None and id(seen) not in visited:
        if isinstance(seen, socket.gaierror):
            return f"host name not found: {seen.strerror}"
        visited.add(id(seen))
        seen = seen.__cause__ or seen.__context__
    return "connection refused or host unreachable"
