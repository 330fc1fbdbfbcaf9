"""Errors of the protocol layer.

Two families, kept apart on purpose:

* :class:`ProtocolError` — bytes we could not decode (a broken stream, a truncated
  message, a reply of the wrong shape). Decoders and parsers raise only these, whatever
  the input, so a caller can treat any of them as "this connection is unusable".
* :class:`ServerError` — a well-formed error frame (``E_CODE description``) the server
  sent on purpose. It knows whether the server closes the connection after it
  (:attr:`ServerError.fatal`) and whether a publish that hit it may be retried
  (:attr:`ServerError.retryable_on_publish`). Where one library setting would avoid
  it, the class names that in ``setting``; hints speak of the library (and of server
  flags), never of CLI flags. The base class lives in :mod:`nsqctl.errors`, with
  :class:`~nsqctl.errors.TopicNotFoundError` (``E_TOPIC_NOT_EXIST``, and a topic no
  lookupd knows: one class), so that the tree has one home; the per-code classes and
  the registry are here.

Retry policy (decided from the servers' code, see docs/nsq-protocol.md):

* ``E_FAILED_ON_NOT_LEADER``, ``E_FAILED_ON_NOT_WRITABLE``, ``E_TOPIC_NOT_EXIST``: the
  partition moved or is being re-elected. Retry after refreshing the lookup
  (:attr:`ServerError.needs_lookup_refresh`). ``E_TOPIC_NOT_EXIST``, and
  ``E_FAILED_ON_NOT_LEADER`` to a batch, come before anything is stored; the others can
  come after a write that the partition's replicas kept before the leadership changed,
  so the retry may store the message twice (NSQ delivers at least once;
  :func:`nsqctl.producer.retry.stored_nothing` decides a publish error's ``unsent``).
* ``E_PUB_FAILED``, ``E_MPUB_FAILED``, ``E_DPUB_FAILED``: the server failed to store the
  message (put-queue timeout, nsqd exiting, local write error). Retry with backoff;
  another nsqd may be a better target. Whether a failed write left a copy anywhere is
  not said, so a publish error after it keeps ``unsent`` false.
* ``E_PUB_TOO_MUCH_WAITING``: the server shed load and closed the connection; retry after
  backoff on a new connection.
* Everything else (bad body/message/topic, ext/json/trace-id problems, auth): retrying
  the same bytes fails the same way, so never retry.
"""

from __future__ import annotations

import re

from nsqctl.errors import (
    ConfigError,
    ConnectError,
    ProtocolError,
    ServerError,
    TLSCertificateError,
    TLSError,
    TopicNotFoundError,
)

__all__ = [
    "PUBLISH_CONTEXTS",
    "TLS_REFUSALS",
    "AuthFailedError",
    "AuthRequiredError",
    "BadBodyError",
    "BadChannelError",
    "BadExtError",
    "BadMessageError",
    "BadPartitionError",
    "BadTopicError",
    "CompressionError",
    "CreateTopicFailedError",
    "DPubFailedError",
    "EmptyPartitionError",
    "ExtNotSupportError",
    "FinFailedError",
    "FrameDecodeError",
    "IdentifyFailedError",
    "InvalidCommandError",
    "InvalidError",
    "InvalidJsonHeaderError",
    "InvalidTraceIdError",
    "MPubFailedError",
    "MessageDecodeError",
    "NotLeaderError",
    "NotWritableError",
    "ProtocolError",
    "PubFailedError",
    "PubTooMuchWaitingError",
    "ReplyDecodeError",
    "ReqFailedError",
    "ServerError",
    "SubChannelNotRegisteredError",
    "SubExtendForbiddenError",
    "SubExtendNeedError",
    "SubOrderIsMustError",
    "TLSNotOfferedError",
    "TLSRequiredError",
    "TopicNotExistError",
    "TopicNotFoundError",
    "TouchFailedError",
    "UnauthorizedError",
    "error_from_frame",
]


# --------------------------------------------------------------------------- decoding


class FrameDecodeError(ProtocolError):
    """A frame header was impossible (bad size or unknown frame type)."""


class MessageDecodeError(ProtocolError):
    """A message frame was truncated or did not match the expected layout."""


class ReplyDecodeError(ProtocolError):
    """A response payload (IDENTIFY/AUTH/traced publish reply) had the wrong shape."""


class CompressionError(ProtocolError):
    """The compressed stream (snappy/deflate) was corrupt."""


class InvalidCommandError(ConfigError):
    """A command could not be built from the given arguments (empty body, bad id, ...)."""


# --------------------------------------------------------------------------- server errors

#: Commands after which NOT_LEADER / NOT_WRITABLE are non-fatal (the server keeps the
#: connection open and only this publish failed).
PUBLISH_CONTEXTS = frozenset(
    {"pub", "mpub", "dpub", "pub_trace", "mpub_trace", "pub_ext", "mpub_ext"}
)


_REGISTRY: dict[str, type[ServerError]] = {}


def _register(cls: type[ServerError]) -> type[ServerError]:
    for code in cls.codes:
        _REGISTRY[code] = cls
    return cls


class _MixedFatalityError(ServerError):
    """Non-fatal on publish commands, fatal otherwise (SUB, FIN, unknown context)."""

    default_retryable_on_publish = True
    needs_lookup_refresh = True

    @property
    def fatal(self) -> bool:
        return self.context not in PUBLISH_CONTEXTS


@_register
class NotLeaderError(_MixedFatalityError):
    codes = ("E_FAILED_ON_NOT_LEADER",)
    hint = (
        "this nsqd is not the leader of the partition of {topic}: refresh the lookup "
        "and use the current leader"
    )


@_register
class NotWritableError(_MixedFatalityError):
    codes = ("E_FAILED_ON_NOT_WRITABLE",)
    hint = (
        "the partition of {topic} is not writable right now (leader change or "
        "replicas catching up): refresh the lookup and retry"
    )


_register(TopicNotFoundError)
#: The former name of :class:`~nsqctl.errors.TopicNotFoundError` (one class, one
#: meaning); kept so that code importing it from here goes on working.
TopicNotExistError = TopicNotFoundError


#: E_INVALID covers many conditions, each said precisely by nsqd's text: the hint for
#: one is chosen by that text (the first pattern found in it), so that it never
#: contradicts what the server said; a text matching none gets no hint, only nsqd's own
#: words. Texts of both families' protocol_v2.go.
INVALID_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"\bin current state\b"),
        "nsqd does not take this command in the connection's current state",
    ),
    (
        re.compile(r"^DPUB timeout -?\d+ out of range"),
        "the deferred publish's delay is beyond nsqd's --max-req-timeout (one hour by "
        "default): publish with a shorter delay",
    ),
    (
        re.compile(r"^RDY count -?\d+ out of range"),
        "the RDY count is beyond nsqd's --max-rdy-count: lower max_in_flight",
    ),
    (
        re.compile(r"^invalid command\b"),
        "this nsqd does not know the command: it may be one only the other NSQ family has",
    ),
)


def invalid_hint(description: str) -> str:
    """The hint for an E_INVALID with nsqd's text ``description`` ("" for none)."""
    for pattern, hint in INVALID_HINTS:
        if pattern.search(description):
            return hint
    return ""


@_register
class InvalidError(ServerError):
    """nsqd's E_INVALID. Its hint is chosen by nsqd's text (:data:`INVALID_HINTS`);
    a subclass told apart by that text has its own."""

    codes = ("E_INVALID",)

    def hint_text(self) -> str:
        # a subclass's own hint wins over the text's
        return self.hint or invalid_hint(self.description)


class TLSRequiredError(InvalidError, TLSError):
    """nsqd refuses every command until the connection is upgraded to TLS (its
    ``--tls-required``); both families answer E_INVALID with "TLS required" in the text,
    so this is told apart by the text, not registered by code. A :class:`TLSError` too:
    the connection lacks the TLS that nsqd requires, whichever command found it out."""

    setting = "tls"
    hint = "nsqd requires TLS on this connection: connect with TLS (ConnectionConfig(tls=...))"


class TLSNotOfferedError(TLSError):
    """TLS was asked for and nsqd offers none (its IDENTIFY reply has no ``tls_v1``: it
    was started without a TLS certificate): the counterpart of :class:`TLSRequiredError`.
    Found in the handshake, not in an error frame. A mismatch of settings that no retry
    or reconnect of that nsqd changes: a consumer stops, a keyed publish fails with it at
    once, and an unkeyed one goes on to its topic's other nsqds (one of them restarted
    without its certificate) and fails with it once every one of them refused."""

    def __init__(self, peer: str) -> None:
        super().__init__(
            f"nsqd {peer} does not offer TLS (it was started without a TLS certificate): "
            "connect without TLS, or enable TLS on the server",
            setting="tls",
        )


#: TLS settings one nsqd cannot accept, found in the handshake: no retry of that nsqd
#: changes them (TLS asked of an nsqd that offers none, a certificate not accepted), so
#: a publish goes on to another nsqd or fails with it, and a starting consumer fails.
TLS_REFUSALS: tuple[type[TLSError], ...] = (TLSNotOfferedError, TLSCertificateError)


class EmptyPartitionError(InvalidError):
    """A subscription with a start position (SUB_ADVANCED) on a redesign partition whose
    commit log holds no entry at all: there is no message to start at.

    youzan nsqd searches the log for the start (a time, an offset, a message count) and
    answers ``E_INVALID commit log end of file`` when it is empty (a start past the end
    of a log that has entries is moved to its end instead). Told apart by that text, as
    :class:`TLSRequiredError` is, so that a consumer can read such a partition from its
    end rather than retry a subscription that fails the same way until a publish."""

    hint = (
        "the partition of {topic} holds no message yet, so the subscription's start "
        "position matches nothing: subscribe from its end"
    )


@_register
class BadBodyError(ServerError):
    codes = ("E_BAD_BODY",)
    hint = (
        "the request body was rejected (empty, larger than --max-body-size, or a "
        "malformed trace/ext header): split the batch or fix the body; do not retry it"
    )


@_register
class BadMessageError(ServerError):
    codes = ("E_BAD_MESSAGE",)
    hint = (
        "the message was rejected (empty or larger than the server's --max-msg-size): "
        "do not retry it"
    )


@_register
class BadTopicError(ServerError):
    codes = ("E_BAD_TOPIC",)
    hint = (
        "the server rejected topic {topic}: names are 1-64 characters of "
        "[.a-zA-Z0-9_-], optionally ending in #ephemeral"
    )


@_register
class BadChannelError(ServerError):
    codes = ("E_BAD_CHANNEL",)
    hint = (
        "the server rejected the channel name: names are 1-64 characters of "
        "[.a-zA-Z0-9_-], optionally ending in #ephemeral"
    )


@_register
class BadPartitionError(ServerError):
    codes = ("E_BAD_PARTITION",)
    hint = (
        "topic {topic} is ordered: each publish to it names its partition, or carries a "
        "shard key routed through the lookupds; a producer with lookupds also gives "
        "unkeyed publishes a partition"
    )
    setting = "partition"


@_register
class BadExtError(ServerError):
    codes = ("E_BAD_EXT",)
    hint = "the server rejected the ext flag of the request"


@_register
class IdentifyFailedError(ServerError):
    codes = ("E_IDENTIFY_FAILED",)
    hint = (
        "IDENTIFY was rejected: check heartbeat interval, msg timeout, output buffer, "
        "sample rate and compression settings against the server's limits"
    )


@_register
class AuthFailedError(ServerError, ConnectError):
    """nsqd refused the AUTH this connection sent (or needed): the refusal is nsqd's, so
    a :class:`ServerError` with its code, and the connection could not be set up, so a
    :class:`~nsqctl.errors.ConnectError` like every other setup failure (TLS, a missing
    secret), for one ``except`` to catch them all."""

    codes = ("E_AUTH_FAILED", "E_AUTH_FIRST", "E_AUTH_ERROR", "E_AUTH_DISABLED")
    hint = (
        "authentication failed: check the auth secret (and that the server has auth "
        "enabled when you send one)"
    )
    setting = "auth_secret"


class AuthRequiredError(AuthFailedError):
    """nsqd requires AUTH (it was started with an auth server) and no secret was given,
    so none was sent: found in the IDENTIFY reply, not in an error frame (``code`` is
    empty). An :class:`AuthFailedError`, so that one ``except`` catches every AUTH
    failure (and so a :class:`~nsqctl.errors.ConnectError`)."""

    def __init__(self, peer: str) -> None:
        super().__init__(
            message=(
                f"nsqd {peer} requires AUTH and no secret was given: give the secret its "
                "auth server accepts (`auth_secret`)"
            )
        )


@_register
class UnauthorizedError(ServerError):
    codes = ("E_UNAUTHORIZED",)
    hint = "the auth secret has no permission for {topic} or this channel"
    setting = "auth_secret"


@_register
class SubOrderIsMustError(ServerError):
    codes = ("E_SUB_ORDER_IS_MUST",)
    hint = "topic {topic} is ordered: subscribe in ordered mode (SUB_ORDERED)"
    setting = "ordered"


@_register
class SubExtendNeedError(ServerError):
    codes = ("E_SUB_EXTEND_NEED",)
    hint = (
        "topic {topic} is an ext topic: connect with extend_support (ConnectionConfig"
        "(extend_support=True); consumers set it when they find the topic through lookupd)"
    )
    setting = "extend_support"


@_register
class SubExtendForbiddenError(ServerError):
    codes = ("E_SUB_EXTEND_FORBIDDON",)  # sic: the server's spelling
    hint = "topic {topic} is not an ext topic: connect without extend_support"
    setting = "extend_support"


@_register
class SubChannelNotRegisteredError(ServerError):
    codes = ("E_SUB_CHANNEL_NOT_REGISTERED",)
    hint = (
        "channel auto-creation is disabled for {topic}: create the channel first "
        "(/channel/create on the lookupd leader)"
    )


@_register
class PubTooMuchWaitingError(ServerError):
    codes = ("E_PUB_TOO_MUCH_WAITING",)
    default_retryable_on_publish = True
    hint = (
        "nsqd is overloaded (too many bytes waiting to be written for {topic}) and "
        "closed the connection: back off and retry"
    )


@_register
class FinFailedError(ServerError):
    codes = ("E_FIN_FAILED",)
    default_fatal = False
    hint = (
        "FIN failed: the message is no longer in flight for this client (it timed out "
        "and was requeued, or was already answered)"
    )


@_register
class ReqFailedError(ServerError):
    codes = ("E_REQ_FAILED",)
    default_fatal = False
    hint = (
        "REQ failed: the message is no longer in flight for this client (it timed out "
        "and was requeued, or was already answered)"
    )


@_register
class TouchFailedError(ServerError):
    codes = ("E_TOUCH_FAILED",)
    default_fatal = False
    hint = (
        "TOUCH failed: the message is no longer in flight for this client (it timed "
        "out, or max_msg_timeout was reached)"
    )


@_register
class PubFailedError(ServerError):
    codes = ("E_PUB_FAILED",)
    default_fatal = False
    default_retryable_on_publish = True
    hint = "nsqd failed to store the message for {topic}: retry (possibly on another nsqd)"


@_register
class MPubFailedError(PubFailedError):
    codes = ("E_MPUB_FAILED",)
    hint = "nsqd failed to store the batch for {topic}: retry (possibly on another nsqd)"


@_register
class DPubFailedError(PubFailedError):
    codes = ("E_DPUB_FAILED",)
    hint = "nsqd failed to store the deferred message for {topic}: retry"


@_register
class ExtNotSupportError(ServerError):
    codes = ("E_EXT_NOT_SUPPORT",)
    default_fatal = False
    hint = "topic {topic} is not an ext topic: publish without an ext header (PUB, not PUB_EXT)"


@_register
class InvalidJsonHeaderError(ServerError):
    codes = ("E_INVALID_JSON_HEADER",)
    default_fatal = False
    hint = "the ext header is not a valid JSON object"


@_register
class InvalidTraceIdError(ServerError):
    codes = ("INVALID_TRACE_ID",)
    default_fatal = False
    hint = '"##trace_id" in the ext header must be a string of decimal digits'


@_register
class CreateTopicFailedError(ServerError):
    codes = ("E_CREATE_TOPIC_FAILED",)
    default_fatal = False
    hint = "nsqd could not create {topic} (not allowed over TCP in cluster mode)"


_CODE_RE = re.compile(r"[A-Z][A-Z0-9_]*\Z")
# Longest first, so "E_INVALID_JSON_HEADER" wins over "E_INVALID".
_KNOWN_CODES = sorted(_REGISTRY, key=len, reverse=True)


def error_from_frame(
    data: bytes, context: str | None = None, *, topic: str | None = None
) -> ServerError:
    """Build the typed error for an error frame's payload.

    The code is the first space-separated word. Known codes also match as a prefix
    (longest wins, so ``E_INVALID_JSON_HEADER`` is not ``E_INVALID``). An unknown
    upper-case word becomes a generic fatal :class:`ServerError` with that code; free
    text (an old server, or "too much client connections") gets an empty code.
    """
    text = data.decode("utf-8", errors="replace").strip()
    word, _, rest = text.partition(" ")
    cls = _REGISTRY.get(word)
    if cls is InvalidError:
        cls = _invalid_kind(rest)
    if cls is not None:
        return cls(word, rest.strip(), context=context, topic=topic)
    for known in _KNOWN_CODES:
        if word.startswith(known):
            return _REGISTRY[known](known, text[len(known) :].strip(), context=context, topic=topic)
    if _CODE_RE.match(word):
        return ServerError(word, rest.strip(), context=context, topic=topic)
    return ServerError("", text, context=context, topic=topic)


def _invalid_kind(description: str) -> type[InvalidError]:
    """The class of an ``E_INVALID`` frame: that code covers many conditions, and the few
    a caller acts on are known only by the server's text."""
    if "TLS required" in description:
        return TLSRequiredError
    if "commit log end of file" in description:  # youzan's consistence.ErrCommitLogEOF
        return EmptyPartitionError
    return InvalidError
