"""Client → server commands, each returned as the exact bytes to write.

Line format: ``NAME param param\\n``; a command with a body adds ``[4B BE length][body]``.
Names are validated here (an invalid name would cost a fatal ``E_BAD_TOPIC``), and the
batch builders avoid per-message Python work beyond one ``struct.pack`` so a producer
can build 1M-message batches quickly.

The partition argument is a redesign feature; pass ``None`` for an original nsqd.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from nsqctl.protocol.errors import InvalidCommandError
from nsqctl.protocol.names import validate_channel, validate_topic

__all__ = [
    "MAGIC_V2",
    "MPUB_ENTRY_OVERHEAD",
    "MPUB_HEADER_SIZE",
    "MPUB_TRACE_ENTRY_OVERHEAD",
    "MSG_ID_LENGTH",
    "auth",
    "cls",
    "dpub",
    "encode_ext_header",
    "fin",
    "fin_many",
    "identify",
    "mpub",
    "mpub_body",
    "mpub_body_size",
    "mpub_encoded",
    "mpub_ext",
    "mpub_trace",
    "nop",
    "pub",
    "pub_ext",
    "pub_trace",
    "rdy",
    "req",
    "split_mpub",
    "start_end",
    "start_msgcount",
    "start_timestamp",
    "start_virtual_queue",
    "sub",
    "sub_advanced",
    "sub_ordered",
    "touch",
]

MAGIC_V2 = b"  V2"
MSG_ID_LENGTH = 16
#: An MPUB body is ``[4B count]`` then ``[4B length][message]`` per message.
MPUB_HEADER_SIZE = 4
MPUB_ENTRY_OVERHEAD = 4
#: MPUB_TRACE entries also carry an 8-byte trace id.
MPUB_TRACE_ENTRY_OVERHEAD = 12
#: JSON ext headers carry a 2-byte length.
MAX_EXT_HEADER_SIZE = 0xFFFF
TRACE_ID_KEY = "##trace_id"

_U32 = struct.Struct(">I").pack
_U64 = struct.Struct(">Q").pack
_U16 = struct.Struct(">H").pack
_MAX_U32 = 0xFFFFFFFF
_MAX_U64 = 0xFFFFFFFFFFFFFFFF
_START_RE = re.compile(r"(?:timestamp|virtual_queue|msgcount|special):-?[0-9]+", re.ASCII)


# --------------------------------------------------------------------------- helpers


@lru_cache(maxsize=1024)
def _topic(name: str) -> bytes:
    return validate_topic(name).encode("ascii")


@lru_cache(maxsize=1024)
def _channel(name: str) -> bytes:
    return validate_channel(name).encode("ascii")


def _int(value: int, what: str, lo: int = 0, hi: int = _MAX_U32) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidCommandError(f"{what} must be an integer in {lo}..{hi}, got {value!r}")
    return value


def _partition(partition: int | None) -> bytes:
    if partition is None:
        return b""
    return b" %d" % _int(partition, "partition", 0, 0x7FFFFFFF)


def _msg_id(msg_id: bytes) -> bytes:
    if len(msg_id) != MSG_ID_LENGTH:
        raise InvalidCommandError(
            f"message id must be {MSG_ID_LENGTH} bytes exactly as received, got {len(msg_id)}"
        )
    return bytes(msg_id)


def _body(body: bytes, what: str = "message body") -> bytes:
    if not body:
        raise InvalidCommandError(f"{what} is empty: nsqd rejects empty messages")
    return body


def _with_body(line: bytes, body: bytes) -> bytes:
    return b"".join((line, _U32(len(body)), body))


# --------------------------------------------------------------------------- handshake


def identify(params: Mapping[str, Any]) -> bytes:
    """``IDENTIFY`` with a JSON body (feature negotiation, client metadata)."""
    body = json.dumps(dict(params), separators=(",", ":")).encode("utf-8")
    return _with_body(b"IDENTIFY\n", body)


def auth(secret: bytes) -> bytes:
    """``AUTH`` with the secret as body; the reply is JSON (see ``parse_auth_response``)."""
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    return _with_body(b"AUTH\n", _body(secret, "auth secret"))


# --------------------------------------------------------------------------- subscribe


def sub(topic: str, channel: str, partition: int | None = None) -> bytes:
    """``SUB topic channel [partition]``."""
    return b"SUB %s %s%s\n" % (_topic(topic), _channel(channel), _partition(partition))


def sub_ordered(topic: str, channel: str, partition: int | None = None) -> bytes:
    """``SUB_ORDERED topic channel [partition]`` (redesign; required on ordered topics)."""
    return b"SUB_ORDERED %s %s%s\n" % (_topic(topic), _channel(channel), _partition(partition))


def start_timestamp(seconds: int) -> str:
    """SUB_ADVANCED start: the first message at or after this Unix time (seconds)."""
    return f"timestamp:{_int(seconds, 'timestamp', 0, 2**63 - 1)}"


def start_virtual_queue(offset: int) -> str:
    """SUB_ADVANCED start: a byte offset in the partition's virtual queue."""
    return f"virtual_queue:{_int(offset, 'virtual queue offset', 0, 2**63 - 1)}"


def start_msgcount(count: int) -> str:
    """SUB_ADVANCED start: the message with this index in the partition."""
    return f"msgcount:{_int(count, 'message count', 0, 2**63 - 1)}"


def start_end() -> str:
    """SUB_ADVANCED start: the end of the queue (only new messages)."""
    return "special:-1"


def sub_advanced(
    topic: str, channel: str, partition: int | None, start: str | None = None
) -> bytes:
    """``SUB_ADVANCED topic channel partition [start]`` (redesign; ordered-style frames).

    The server reads the partition positionally before ``start``, so a missing
    partition is sent as ``-1`` (the server's "default partition") when a start is given.
    The start applies only when this client is the channel's first consumer.
    """
    line = b"SUB_ADVANCED %s %s" % (_topic(topic), _channel(channel))
    if start is None:
        return line + _partition(partition) + b"\n"
    if not isinstance(start, str) or _START_RE.fullmatch(start) is None:
        raise InvalidCommandError(
            f"invalid SUB_ADVANCED start {start!r}: use timestamp:<sec>, "
            "virtual_queue:<bytes>, msgcount:<n> or special:-1"
        )
    part = _partition(partition) if partition is not None else b" -1"
    return b"%s%s %s\n" % (line, part, start.encode("ascii"))


# --------------------------------------------------------------------------- publish


def pub(topic: str, body: bytes, partition: int | None = None) -> bytes:
    """``PUB topic [partition]`` + body."""
    return _with_body(b"PUB %s%s\n" % (_topic(topic), _partition(partition)), _body(body))


def mpub_body_size(bodies: Sequence[bytes], entry_overhead: int = MPUB_ENTRY_OVERHEAD) -> int:
    """Encoded size of the MPUB body for ``bodies`` (compare with nsqd --max-body-size).

    Use ``entry_overhead=MPUB_TRACE_ENTRY_OVERHEAD`` for MPUB_TRACE batches.
    """
    return MPUB_HEADER_SIZE + entry_overhead * len(bodies) + sum(map(len, bodies))


def mpub_body(bodies: Sequence[bytes]) -> bytes:
    """The MPUB body: ``[4B count]`` then ``[4B length][message]`` per message."""
    n = len(bodies)
    if n == 0:
        raise InvalidCommandError("MPUB needs at least one message")
    lengths = set(map(len, bodies))
    if 0 in lengths:
        raise InvalidCommandError("MPUB batch contains an empty message: nsqd rejects those")
    if len(lengths) == 1:  # one size (the usual batch): the length prefix is a join separator
        sep = _U32(lengths.pop())
        return b"".join((_U32(n), sep, sep.join(bodies)))
    parts: list[bytes] = [b""] * (2 * n + 1)
    parts[0] = _U32(n)
    parts[1::2] = map(_U32, map(len, bodies))
    parts[2::2] = bodies
    return b"".join(parts)


def mpub(topic: str, bodies: Sequence[bytes], partition: int | None = None) -> bytes:
    """``MPUB topic [partition]`` + batch body; the batch is stored atomically."""
    return mpub_encoded(topic, mpub_body(bodies), partition)


def mpub_encoded(topic: str, body: bytes, partition: int | None = None) -> bytes:
    """:func:`mpub` of a batch body already built by :func:`mpub_body` (a publisher
    builds it once, where the call is made, and sends it to whichever partition)."""
    return _with_body(b"MPUB %s%s\n" % (_topic(topic), _partition(partition)), body)


def split_mpub(
    bodies: Sequence[bytes], max_body_size: int, entry_overhead: int = MPUB_ENTRY_OVERHEAD
) -> list[Sequence[bytes]]:
    """Split ``bodies`` into consecutive batches whose MPUB body fits ``max_body_size``.

    Order is kept. A single message that cannot fit even alone raises
    :class:`InvalidCommandError` (nsqd would reject it with a fatal E_BAD_BODY).
    """
    if bodies and mpub_body_size(bodies, entry_overhead) <= max_body_size:
        return [bodies[0:]]  # it all fits (the usual case): no per-message loop
    limit = max_body_size - MPUB_HEADER_SIZE
    batches: list[Sequence[bytes]] = []
    start = 0
    size = 0
    for i, body in enumerate(bodies):
        entry = entry_overhead + len(body)
        if entry > limit:
            raise InvalidCommandError(
                f"message {i} ({len(body)} bytes) is larger than nsqd takes: one message "
                f"must fit nsqd's --max-msg-size (1 MiB by default) and {max_body_size} bytes "
                "here; split the input into smaller messages"
            )
        if size + entry > limit:
            batches.append(bodies[start:i])
            start = i
            size = 0
        size += entry
    if start < len(bodies):
        batches.append(bodies[start:])
    return batches


def dpub(topic: str, defer_ms: int, body: bytes) -> bytes:
    """``DPUB topic defer_ms`` + body (original nsqd only; the redesign has no DPUB)."""
    line = b"DPUB %s %d\n" % (_topic(topic), _int(defer_ms, "defer_ms"))
    return _with_body(line, _body(body))


def pub_trace(topic: str, trace_id: int, body: bytes, partition: int | None = None) -> bytes:
    """``PUB_TRACE topic [partition]`` + ``[8B trace id][message]`` (redesign; traced reply)."""
    payload = _U64(_int(trace_id, "trace id", 0, _MAX_U64)) + _body(body)
    return _with_body(b"PUB_TRACE %s%s\n" % (_topic(topic), _partition(partition)), payload)


def mpub_trace(
    topic: str, items: Sequence[tuple[int, bytes]], partition: int | None = None
) -> bytes:
    """``MPUB_TRACE topic [partition]``: each entry is ``[4B len incl. 8][8B trace id][msg]``."""
    if not items:
        raise InvalidCommandError("MPUB_TRACE needs at least one message")
    parts = [_U32(len(items))]
    extend = parts.extend
    for trace_id, body in items:
        if not body:
            raise InvalidCommandError("MPUB_TRACE batch contains an empty message")
        extend((_U32(len(body) + 8), _U64(_int(trace_id, "trace id", 0, _MAX_U64)), body))
    line = b"MPUB_TRACE %s%s\n" % (_topic(topic), _partition(partition))
    return _with_body(line, b"".join(parts))


def encode_ext_header(ext: Mapping[str, Any] | bytes) -> bytes:
    """Encode the JSON ext header; already-encoded bytes are passed through.

    ``##trace_id`` must be a decimal string (the server answers INVALID_TRACE_ID otherwise).
    """
    if isinstance(ext, bytes | bytearray):
        data = bytes(ext)
    else:
        trace = ext.get(TRACE_ID_KEY)
        if trace is not None and not (isinstance(trace, str) and trace.isdigit()):
            raise InvalidCommandError(
                f'"{TRACE_ID_KEY}" must be a string of decimal digits, got {trace!r}'
            )
        data = json.dumps(dict(ext), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(data) > MAX_EXT_HEADER_SIZE:
        raise InvalidCommandError(
            f"ext header is {len(data)} bytes; at most {MAX_EXT_HEADER_SIZE} fit"
        )
    return data


def _ext_entry(ext: Mapping[str, Any] | bytes, body: bytes) -> bytes:
    header = encode_ext_header(ext)
    return b"".join((_U16(len(header)), header, _body(body)))


def pub_ext(
    topic: str, ext: Mapping[str, Any] | bytes, body: bytes, partition: int | None = None
) -> bytes:
    """``PUB_EXT topic [partition]`` + ``[2B json len][json][message]`` (redesign)."""
    line = b"PUB_EXT %s%s\n" % (_topic(topic), _partition(partition))
    return _with_body(line, _ext_entry(ext, body))


def mpub_ext(
    topic: str,
    items: Sequence[tuple[Mapping[str, Any] | bytes, bytes]],
    partition: int | None = None,
) -> bytes:
    """``MPUB_EXT topic [partition]``: MPUB framing around PUB_EXT-style entries."""
    if not items:
        raise InvalidCommandError("MPUB_EXT needs at least one message")
    parts = [_U32(len(items))]
    extend = parts.extend
    for ext, body in items:
        entry = _ext_entry(ext, body)
        extend((_U32(len(entry)), entry))
    line = b"MPUB_EXT %s%s\n" % (_topic(topic), _partition(partition))
    return _with_body(line, b"".join(parts))


# --------------------------------------------------------------------------- flow control


def rdy(count: int) -> bytes:
    """``RDY count``: how many messages may be in flight on this connection."""
    return b"RDY %d\n" % _int(count, "RDY count")


def fin(msg_id: bytes) -> bytes:
    """``FIN id``: the message is done. The id may contain any byte (redesign)."""
    return b"FIN " + _msg_id(msg_id) + b"\n"


def fin_many(msg_ids: Sequence[bytes]) -> bytes:
    """``FIN id`` for each id, as one buffer: a consumer answers a whole read at once."""
    if any(map(MSG_ID_LENGTH.__ne__, map(len, msg_ids))):  # each id checked, in C
        for msg_id in msg_ids:
            _msg_id(msg_id)  # raises, naming the bad length
    if not msg_ids:
        return b""
    return b"FIN " + b"\nFIN ".join(msg_ids) + b"\n"


def req(msg_id: bytes, timeout_ms: int) -> bytes:
    """``REQ id timeout_ms``: requeue after a delay (ignored on ordered channels)."""
    return b"REQ %s %d\n" % (_msg_id(msg_id), _int(timeout_ms, "requeue timeout_ms"))


def touch(msg_id: bytes) -> bytes:
    """``TOUCH id``: reset the message's in-flight timeout."""
    return b"TOUCH " + _msg_id(msg_id) + b"\n"


def nop() -> bytes:
    """``NOP``: the answer to a heartbeat."""
    return b"NOP\n"


def cls() -> bytes:
    """``CLS``: ask the server to stop sending; it answers ``CLOSE_WAIT``."""
    return b"CLS\n"
