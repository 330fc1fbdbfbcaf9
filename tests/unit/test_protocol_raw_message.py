"""Message frame payloads of both families, from hand-written bytes and round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsqctl.errors import ProtocolError
from nsqctl.protocol.errors import MessageDecodeError
from nsqctl.protocol.raw_message import (
    ORIGINAL,
    MessageLayout,
    RawMessage,
    decode_message,
    encode_message,
    make_redesign_id,
)

TS = b"\x17\x9a\x00\x00\x00\x00\x00\x01"  # 0x179a000000000001
TS_INT = 0x179A000000000001
REDESIGN = MessageLayout("redesign")
EXT = MessageLayout("redesign", ext=True)
ORDERED = MessageLayout("redesign", ordered=True)
EXT_ORDERED = MessageLayout("redesign", ext=True, ordered=True)


def test_original_layout() -> None:
    data = TS + b"\x00\x03" + b"0a1b2c3d4e5f6789" + b"hello"
    msg = decode_message(data, ORIGINAL)
    assert msg == RawMessage(TS_INT, 3, b"0a1b2c3d4e5f6789", b"hello")
    assert msg.internal_id is None and msg.trace_id is None and msg.offset is None
    assert encode_message(msg, ORIGINAL) == data


def test_redesign_layout() -> None:
    ids = b"\x00\x04\x00\x00\x00\x00\x00\x07" + b"\x00\x00\x00\x00\x00\x00\x00\x2a"
    data = TS + b"\x00\x01" + ids + b"payload"
    msg = decode_message(data, REDESIGN)
    assert msg.id == ids
    assert msg.internal_id == (1 << 50) + 7  # partition 1 in cluster mode
    assert msg.trace_id == 42
    assert msg.body == b"payload"
    assert msg.ext_version is None and msg.offset is None
    assert encode_message(msg, REDESIGN) == data


def test_redesign_ext_with_header() -> None:
    ids = make_redesign_id(9, 0)
    data = TS + b"\x00\x02" + ids + b"\x02" + b"\x00\x09" + b'{"k":"v"}' + b"body"
    msg = decode_message(data, EXT)
    assert (msg.ext_version, msg.ext_header, msg.body) == (2, b'{"k":"v"}', b"body")
    assert encode_message(msg, EXT) == data


def test_redesign_ext_version_zero_has_no_header() -> None:
    data = TS + b"\x00\x02" + make_redesign_id(9, 0) + b"\x00" + b"body"
    msg = decode_message(data, EXT)
    assert (msg.ext_version, msg.ext_header, msg.body) == (0, None, b"body")


def test_redesign_ordered_and_ext_ordered() -> None:
    ids = make_redesign_id(5, 6)
    detail = b"\x00\x00\x00\x00\x00\x00\x10\x00" + b"\x00\x00\x00\x22"
    msg = decode_message(TS + b"\x00\x01" + ids + detail + b"b", ORDERED)
    assert (msg.offset, msg.size, msg.body) == (4096, 34, b"b")
    data = TS + b"\x00\x01" + ids + b"\x01\x00\x02{}" + detail + b"b"
    msg = decode_message(data, EXT_ORDERED)
    assert (msg.ext_version, msg.ext_header, msg.offset, msg.size) == (1, b"{}", 4096, 34)
    assert encode_message(msg, EXT_ORDERED) == data


def test_old_redesign_ext_marker_in_attempts_is_masked() -> None:
    data = TS + b"\xa0\x05" + make_redesign_id(1, 2) + b"\x00body"
    assert decode_message(data, EXT).attempts == 5


def test_empty_body_is_allowed() -> None:
    assert decode_message(TS + b"\x00\x01" + b"f" * 16, ORIGINAL).body == b""


@pytest.mark.parametrize(
    ("data", "layout"),
    [
        (b"", ORIGINAL),
        (TS + b"\x00\x01" + b"f" * 15, ORIGINAL),
        (TS + b"\x00\x01" + b"\x00" * 16, EXT),  # missing ext byte
        (TS + b"\x00\x01" + b"\x00" * 16 + b"\x01\x00", EXT),  # truncated length
        (TS + b"\x00\x01" + b"\x00" * 16 + b"\x01\x00\x05{}", EXT),  # truncated header
        (TS + b"\x00\x01" + b"\x00" * 16 + b"\x00" * 11, ORDERED),  # short detail
    ],
)
def test_truncated(data: bytes, layout: MessageLayout) -> None:
    with pytest.raises(MessageDecodeError):
        decode_message(data, layout)


def test_message_decode_error_is_protocol_error() -> None:
    assert issubclass(MessageDecodeError, ProtocolError)


def test_layout_validation() -> None:
    with pytest.raises(ValueError):
        MessageLayout("original", ext=True)
    with pytest.raises(ValueError):
        MessageLayout("other")  # type: ignore[arg-type]


def test_encode_rejects_inconsistent_ids() -> None:
    with pytest.raises(ValueError):
        encode_message(RawMessage(1, 1, b"x" * 16, b"b", internal_id=1, trace_id=2), REDESIGN)
    with pytest.raises(ValueError):
        encode_message(RawMessage(1, 1, b"short", b"b"), ORIGINAL)


u64 = st.integers(0, 2**64 - 1)


@st.composite
def messages(draw: st.DrawFn, layout: MessageLayout) -> RawMessage:
    ts = draw(u64)
    body = draw(st.binary(max_size=64))
    if layout.family == "original":
        hexid = draw(st.text("0123456789abcdef", min_size=16, max_size=16)).encode()
        return RawMessage(ts, draw(st.integers(0, 65535)), hexid, body)
    internal_id, trace_id = draw(u64), draw(u64)
    version = header = offset = size = None
    if layout.ext:
        version = draw(st.integers(0, 255))
        header = draw(st.binary(max_size=80)) if version else None
    if layout.ordered:
        offset, size = draw(u64), draw(st.integers(0, 2**32 - 1))
    return RawMessage(
        ts,
        draw(st.integers(0, 4000)),
        make_redesign_id(internal_id, trace_id),
        body,
        internal_id,
        trace_id,
        version,
        header,
        offset,
        size,
    )


@pytest.mark.parametrize(
    "layout",
    [ORIGINAL, REDESIGN, EXT, ORDERED, EXT_ORDERED],
    ids=["original", "redesign", "ext", "ordered", "ext-ordered"],
)
@given(data=st.data())
def test_round_trip(layout: MessageLayout, data: st.DataObject) -> None:
    msg = data.draw(messages(layout))
    assert decode_message(encode_message(msg, layout), layout) == msg
