"""Message frame payloads of both server families.

Original nsqd: ``[8B ts ns][2B attempts][16B ASCII hex id][body]``.
Redesign: ``[8B ts ns][2B attempts][8B internal id][8B trace id]``, then an ext block
when the connection negotiated ``extend_support`` on an ext topic, then
``[8B disk offset][4B raw size]`` when subscribed with SUB_ORDERED / SUB_ADVANCED,
then the body. Nothing in the frame says which optional parts are present: the
connection's :class:`MessageLayout` does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal, NamedTuple

from nsqctl.protocol.errors import MessageDecodeError

__all__ = [
    "MAX_ATTEMPTS_REDESIGN",
    "ORIGINAL",
    "Family",
    "MessageLayout",
    "RawMessage",
    "decode_message",
    "encode_message",
    "make_redesign_id",
]

Family = Literal["original", "redesign"]

_ORIG_HEAD = struct.Struct(">QH")  # 10 bytes, the id follows
_REDESIGN_HEAD = struct.Struct(">QHQQ")  # 26 bytes
_ID_PAIR = struct.Struct(">QQ")
_DETAIL = struct.Struct(">QI")  # disk-queue offset + raw size
_EXT_LEN = struct.Struct(">H")
_HEAD_SIZE = 26

#: The redesign caps attempts at 4000 and older servers put an ext marker (0xa000) in
#: the high bits of the attempts field; above this value the high 4 bits are not a count.
MAX_ATTEMPTS_REDESIGN = 4000


@dataclass(frozen=True, slots=True)
class MessageLayout:
    """What a connection's message frames contain, fixed at IDENTIFY/SUB time.

    ``ordered``: the frames carry the disk-queue offset and raw size, as after SUB_ORDERED
    and SUB_ADVANCED alike; whether the subscription is ordered is the consumer's business.
    """

    family: Family = "original"
    ext: bool = False
    ordered: bool = False

    def __post_init__(self) -> None:
        if self.family not in ("original", "redesign"):
            raise ValueError(f"unknown server family {self.family!r}")
        if self.family == "original" and (self.ext or self.ordered):
            raise ValueError("ext and ordered layouts exist only on the redesign")


ORIGINAL = MessageLayout()


class RawMessage(NamedTuple):
    """A decoded message, before any client state (responded, connection) is attached.

    ``id`` is the 16 bytes exactly as received; FIN/REQ/TOUCH must echo them.
    Fields that the layout does not carry are ``None``. A named tuple, not a dataclass:
    a consumer builds hundreds of thousands a second, and one tuple costs less than ten
    attribute stores.
    """

    timestamp: int
    attempts: int
    id: bytes
    body: bytes
    internal_id: int | None = None
    trace_id: int | None = None
    ext_version: int | None = None
    ext_header: bytes | None = None
    offset: int | None = None
    size: int | None = None


def make_redesign_id(internal_id: int, trace_id: int) -> bytes:
    """The 16-byte wire id of a redesign message (internal id + trace id, big-endian)."""
    return _ID_PAIR.pack(internal_id, trace_id)


def decode_message(data: bytes, layout: MessageLayout = ORIGINAL) -> RawMessage:
    """Decode one MESSAGE frame payload; raise :class:`MessageDecodeError` if malformed."""
    n = len(data)
    if n < _HEAD_SIZE:
        raise MessageDecodeError(f"message frame too short: {n} bytes, need at least 26")
    if layout.family == "original":
        ts, attempts = _ORIG_HEAD.unpack_from(data)
        return RawMessage(ts, attempts, data[10:26], data[26:])
    ts, attempts, internal_id, trace_id = _REDESIGN_HEAD.unpack_from(data)
    if attempts > MAX_ATTEMPTS_REDESIGN:
        attempts &= 0x0FFF
    pos = _HEAD_SIZE
    ext_version: int | None = None
    ext_header: bytes | None = None
    offset: int | None = None
    size: int | None = None
    if layout.ext:
        if n < pos + 1:
            raise MessageDecodeError("message frame truncated before its ext version byte")
        ext_version = data[pos]
        pos += 1
        if ext_version:
            if n < pos + 2:
                raise MessageDecodeError("message frame truncated in its ext header length")
            (ext_len,) = _EXT_LEN.unpack_from(data, pos)
            pos += 2
            if n < pos + ext_len:
                raise MessageDecodeError(
                    f"message frame truncated: ext header of {ext_len} bytes, {n - pos} available"
                )
            ext_header = data[pos : pos + ext_len]
            pos += ext_len
    if layout.ordered:
        if n < pos + 12:
            raise MessageDecodeError("message frame truncated before its offset/size fields")
        offset, size = _DETAIL.unpack_from(data, pos)
        pos += 12
    return RawMessage(
        ts,
        attempts,
        data[10:26],
        data[pos:],
        internal_id,
        trace_id,
        ext_version,
        ext_header,
        offset,
        size,
    )


def encode_message(msg: RawMessage, layout: MessageLayout = ORIGINAL) -> bytes:
    """Encode a message frame payload as nsqd would (for tests and fake servers).

    On the redesign the id is built from ``internal_id``/``trace_id`` when both are
    set (and must then agree with ``msg.id`` if that is given), else ``msg.id`` is used.
    """
    head = _ORIG_HEAD.pack(msg.timestamp, msg.attempts)
    if layout.family == "original":
        if len(msg.id) != 16:
            raise ValueError(f"message id must be 16 bytes, got {len(msg.id)}")
        return b"".join((head, msg.id, msg.body))
    msg_id = msg.id
    if msg.internal_id is not None and msg.trace_id is not None:
        built = make_redesign_id(msg.internal_id, msg.trace_id)
        if msg_id and msg_id != built:
            raise ValueError("message id does not match internal_id/trace_id")
        msg_id = built
    if len(msg_id) != 16:
        raise ValueError(f"message id must be 16 bytes, got {len(msg_id)}")
    parts = [head, msg_id]
    if layout.ext:
        version = msg.ext_version or 0
        parts.append(bytes((version,)))
        if version:
            header = msg.ext_header or b""
            parts += (_EXT_LEN.pack(len(header)), header)
    if layout.ordered:
        parts.append(_DETAIL.pack(msg.offset or 0, msg.size or 0))
    parts.append(msg.body)
    return b"".join(parts)
