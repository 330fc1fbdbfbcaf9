"""The message object handlers receive: the decoded frame plus where it came from and
the three responses (FIN, REQ, TOUCH) a handler may give.

The answers are kept on the consumer's event loop: the books they change (in-flight,
RDY, backoff) and the connection they write to belong to it. A handler running in a
thread (a consumer with ``threads=True``) may still call ``finish()``, ``requeue()``,
``touch()`` and :func:`finish_all`: the call is carried to the loop and waits for it
there, so an error (AlreadyRespondedError for a message given back at close) is raised in
the handler's thread.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from nsqctl.bounds import Bound, check_bound
from nsqctl.errors import AlreadyRespondedError
from nsqctl.protocol.raw_message import RawMessage

if TYPE_CHECKING:
    from nsqctl.connection import Connection


class Responder(Protocol):
    """Who carries a message's answer to nsqd and keeps the books (RDY, in-flight, backoff).

    The consumer implements it; a message only calls it, so this module does not depend
    on the consumer.
    """

    def finish_messages(self, conn: Connection, msgs: list[Message]) -> None:
        """FIN ``msgs`` (already marked answered) of one connection, in one write."""

    def requeue_message(
        self, msg: Message, conn: Connection, delay: float | None, backoff: bool
    ) -> None:
        """REQ one message (already marked answered)."""


class Delivery:
    """Where the messages of one subscribed connection come from and go back to.

    One per connection, shared by all its messages, so a message carries one reference
    instead of five (a consumer creates hundreds of thousands of messages a second).
    """

    __slots__ = (
        "channel",
        "conn",
        "keep",
        "loop",
        "nsqd_address",
        "partition",
        "responder",
        "topic",
    )

    def __init__(
        self,
        conn: Connection,
        responder: Responder,
        topic: str,
        channel: str,
        partition: int | None,
        loop: asyncio.AbstractEventLoop | None = None,
        keep: Callable[[Message], None] | None = None,
    ) -> None:
        self.conn = conn
        self.responder = responder
        self.topic = topic
        self.channel = channel
        self.partition = partition
        self.nsqd_address = str(conn.address)
        # The loop answers must be given on, when handlers may run in other threads; None
        # when every answer comes from the loop itself (no check, no cost).
        self.loop = loop
        # Told of each message a handler keeps to answer later (disable_auto_response),
        # so that closing can give it back if it never is; None when nobody need be told
        # (an iterator's messages are known to its consumer already).
        self.keep = keep


_T = TypeVar("_T")

#: What ``Message.requeue(delay=...)`` takes (the consumer caps it at nsqd's maximum).
REQUEUE_DELAY = Bound(0, integer=False, unit="seconds", optional=True)


def off_loop(loop: asyncio.AbstractEventLoop | None) -> bool:
    """True when ``loop`` is given and this thread is not running it."""
    if loop is None:
        return False
    try:
        return asyncio.get_running_loop() is not loop
    except RuntimeError:  # no loop running in this thread: a handler thread
        return True


def call_on_loop(loop: asyncio.AbstractEventLoop, call: Callable[[], _T]) -> _T:
    """Run ``call`` on ``loop`` from another thread and wait for it: its result, or its
    exception raised here."""
    done: concurrent.futures.Future[_T] = concurrent.futures.Future()

    def run() -> None:
        if not done.set_running_or_notify_cancel():
            return
        try:
            done.set_result(call())
        except BaseException as err:
            done.set_exception(err)

    loop.call_soon_threadsafe(run)
    return done.result()


def id_text(raw: RawMessage) -> str:
    """A frame's id for humans and logs: as-is on the original (hex ASCII), hex on the
    redesign (binary)."""
    if raw.internal_id is None:
        return raw.id.decode("ascii", "replace")
    return raw.id.hex()


def ext_header(raw: RawMessage) -> dict[str, Any] | None:
    """A frame's JSON header (redesign ext topics) as a dict; None without one. A header
    that is not a JSON object is kept, not dropped, under ``_raw`` or ``_value``."""
    header = raw.ext_header
    if not header:
        return None
    try:
        value = json.loads(header)
    except ValueError:
        return {"_raw": header.decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"_value": value}


def describe(
    raw: RawMessage, topic: str, channel: str, partition: int | None, nsqd: str
) -> dict[str, Any]:
    """A frame's metadata and where it came from, as a JSON-ready dict: the same for a
    delivered message and for one only read (peeked), so both print alike."""
    record: dict[str, Any] = {
        "topic": topic,
        "channel": channel,
        "partition": partition,
        "nsqd": nsqd,
        "id": id_text(raw),
        "internal_id": raw.internal_id,
        "trace_id": raw.trace_id,
        "attempts": raw.attempts,
        "timestamp": raw.timestamp,
        "offset": raw.offset,
        "size": raw.size,
    }
    if raw.ext_header:  # a JSON header (redesign ext topics)
        record["ext_header"] = ext_header(raw)
    return record


class Message:
    """One delivered message. ``finish()`` acknowledges it; ``requeue()`` gives it back."""

    __slots__ = ("_epoch", "_raw", "_via", "auto_response", "outcome", "received_at")

    def __init__(self, raw: RawMessage, via: Delivery, received_at: float, epoch: int) -> None:
        self._raw = raw
        self._via = via
        self._epoch = epoch
        self.received_at = received_at
        self.auto_response = True
        self.outcome: str | None = None

    @property
    def topic(self) -> str:
        return self._via.topic

    @property
    def channel(self) -> str:
        return self._via.channel

    @property
    def partition(self) -> int | None:
        """The topic partition (redesign); None on the original family."""
        return self._via.partition

    # -- data -------------------------------------------------------------------------------
    @property
    def body(self) -> bytes:
        return self._raw.body

    @property
    def attempts(self) -> int:
        return self._raw.attempts

    @property
    def timestamp(self) -> int:
        """Publish time in nanoseconds since the epoch."""
        return self._raw.timestamp

    @property
    def id(self) -> bytes:
        """The 16-byte id exactly as received (hex ASCII on the original)."""
        return self._raw.id

    @property
    def id_text(self) -> str:
        """The id for humans and logs: as-is on the original (hex ASCII), hex on the redesign."""
        return id_text(self._raw)

    @property
    def internal_id(self) -> int | None:
        return self._raw.internal_id

    @property
    def trace_id(self) -> int | None:
        return self._raw.trace_id

    @property
    def offset(self) -> int | None:
        """Disk-queue offset (ordered / advanced subscriptions on the redesign)."""
        return self._raw.offset

    @property
    def size(self) -> int | None:
        return self._raw.size

    @property
    def ext_header(self) -> dict[str, Any] | None:
        return ext_header(self._raw)

    @property
    def nsqd_address(self) -> str:
        return self._via.nsqd_address

    @property
    def has_responded(self) -> bool:
        return self.outcome is not None

    @property
    def raw(self) -> RawMessage:
        return self._raw

    @property
    def delivery(self) -> Delivery:
        """How it came: the connection, the partition and the nsqd, and who answers for it
        (the consumer's delivery path, which FINs and REQs it)."""
        return self._via

    def describe(self) -> dict[str, Any]:
        """Metadata as a JSON-ready dict (trace log, ``tail --format json``, dead letters)."""
        via = self._via
        return describe(self._raw, via.topic, via.channel, via.partition, via.nsqd_address)

    def __repr__(self) -> str:
        return (
            f"<Message {self.topic}/{self.channel} p={self.partition} id={self.id!r} "
            f"attempts={self.attempts} outcome={self.outcome}>"
        )

    # -- responses --------------------------------------------------------------------------
    def disable_auto_response(self) -> None:
        """The handler will respond itself (e.g. after handing the message elsewhere).

        The consumer is told, so that closing can reach the message: one still unanswered
        when ``close()`` stops waiting (``stop_timeout``) is given back (REQ, once), and a
        ``finish()`` or ``requeue()`` after that raises :class:`AlreadyRespondedError`.
        Only handlers that call this pay for the tracking, once per message.
        """
        if self.auto_response:  # the first call only: told once
            self.auto_response = False
            via = self._via
            keep = via.keep
            if keep is not None and self.outcome is None:  # answered: nothing to give back
                if via.loop is not None and off_loop(via.loop):  # books kept on the loop
                    via.loop.call_soon_threadsafe(keep, self)
                else:
                    keep(self)

    def finish(self) -> None:
        """FIN: the message was handled (or durably stored)."""
        via = self._via
        if via.loop is not None and off_loop(via.loop):
            self._check_unanswered()  # given back at close: raise without the loop
            call_on_loop(via.loop, self.finish)
            return
        self._respond("FIN")
        via.responder.finish_messages(via.conn, [self])

    def requeue(self, delay: float | None = None, backoff: bool = True) -> None:
        """REQ: give it back; ``delay`` seconds (default: attempts × the default delay).
        A delay that is not one (text, NaN, negative) raises ConfigError and leaves the
        message unanswered: refused later, it would be marked answered and never sent."""
        check_bound("delay", delay, REQUEUE_DELAY)
        via = self._via
        if via.loop is not None and off_loop(via.loop):
            self._check_unanswered()
            call_on_loop(via.loop, lambda: self.requeue(delay, backoff))
            return
        self._respond("REQ")
        via.responder.requeue_message(self, via.conn, delay, backoff)

    def touch(self) -> None:
        """TOUCH: reset the server's timeout for this message (the consumer does it
        itself only with ``auto_touch=True``)."""
        via = self._via
        if via.loop is not None and off_loop(via.loop):
            self._check_unanswered()
            call_on_loop(via.loop, self.touch)
            return
        self._check_unanswered()
        via.conn.touch(self.id)

    def _respond(self, outcome: str) -> None:
        self._check_unanswered()
        self.outcome = outcome

    def _check_unanswered(self) -> None:
        if self.outcome is not None:
            raise AlreadyRespondedError(
                f"message {self.id!r} was already answered ({self.outcome})"
            )


def finish_all(messages: Iterable[Message]) -> None:
    """FIN many messages: one bookkeeping step and one write per connection.

    For handlers that take messages over (``disable_auto_response``) and acknowledge them
    in batches, after printing or durably storing them. Messages already answered raise
    :class:`AlreadyRespondedError` before any is FINed.
    """
    msgs = messages if isinstance(messages, list) else list(messages)
    for msg in msgs:
        if msg.outcome is not None:
            msg._check_unanswered()  # raises
    if msgs:
        loop = msgs[0]._via.loop
        if loop is not None and off_loop(loop):  # a handler thread: answer on the loop
            call_on_loop(loop, lambda: finish_all(msgs))
            return
    if len(msgs) == 1:  # tail --ordered flushes every message on its own
        msg = msgs[0]
        msg.outcome = "FIN"
        via = msg._via
        via.responder.finish_messages(via.conn, [msg])
        return
    by_connection: dict[Delivery, list[Message]] = {}  # one Delivery per connection
    for msg in msgs:
        msg.outcome = "FIN"
        group = by_connection.get(msg._via)
        if group is None:
            by_connection[msg._via] = [msg]
        else:
            group.append(msg)
    for group in by_connection.values():
        via = group[0]._via
        via.responder.finish_messages(via.conn, group)


def body_to_json(body: bytes) -> tuple[str, str]:
    """``(body, body_encoding)`` for a JSON record: the text when the body is UTF-8
    (``"text"``), else base64 (``"base64"``), so every body comes back exactly."""
    try:
        return body.decode("utf-8"), "text"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def body_from_json(record: Mapping[str, Any]) -> bytes:
    """The exact body of a record written with :func:`body_to_json` (no ``body_encoding``:
    text)."""
    if record.get("body_encoding") == "base64":
        return base64.b64decode(record["body"], validate=True)
    return record["body"].encode("utf-8")  # type: ignore[no-any-return]
