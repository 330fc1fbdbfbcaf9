"""Frame decoding: exact layouts, any chunking, corrupt headers, speed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsqctl.errors import ProtocolError
from nsqctl.protocol.errors import FrameDecodeError, ReplyDecodeError
from nsqctl.protocol.frames import (
    CLOSE_WAIT,
    HEARTBEAT,
    OK,
    Frame,
    FrameDecoder,
    FrameType,
    encode_frame,
)
from nsqctl.protocol.replies import (
    AuthResponse,
    IdentifyResponse,
    TracedReply,
    parse_auth_response,
    parse_identify_response,
    parse_pub_reply,
    parse_traced_reply,
)
from tests.helpers.identify import identify_reply


def test_constants() -> None:
    assert (HEARTBEAT, OK, CLOSE_WAIT) == (b"_heartbeat_", b"OK", b"CLOSE_WAIT")
    assert [int(t) for t in FrameType] == [0, 1, 2]


def test_encode_frame_layout() -> None:
    assert encode_frame(FrameType.RESPONSE, b"OK") == b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
    assert encode_frame(1, b"") == b"\x00\x00\x00\x04\x00\x00\x00\x01"


def test_decode_handwritten_stream() -> None:
    stream = (
        b"\x00\x00\x00\x0f\x00\x00\x00\x00_heartbeat_"
        + b"\x00\x00\x00\x0d\x00\x00\x00\x01E_INVALID"
        + b"\x00\x00\x00\x07\x00\x00\x00\x02abc"
    )
    frames = FrameDecoder().feed(stream)
    assert frames == [
        Frame(FrameType.RESPONSE, HEARTBEAT),
        Frame(FrameType.ERROR, b"E_INVALID"),
        Frame(FrameType.MESSAGE, b"abc"),
    ]
    assert frames[0].type is FrameType.RESPONSE
    assert isinstance(frames[2].data, bytes)


def test_one_byte_at_a_time() -> None:
    stream = encode_frame(0, b"OK") + encode_frame(2, b"x" * 300) + encode_frame(1, b"")
    decoder = FrameDecoder()
    frames: list[Frame] = []
    for i in range(len(stream)):
        frames += decoder.feed(stream[i : i + 1])
    assert frames == [
        Frame(FrameType.RESPONSE, b"OK"),
        Frame(FrameType.MESSAGE, b"x" * 300),
        Frame(FrameType.ERROR, b""),
    ]
    assert decoder.buffered == 0


def test_partial_frame_is_kept() -> None:
    decoder = FrameDecoder()
    frame = encode_frame(0, b"hello")
    assert decoder.feed(frame[:7]) == []
    assert decoder.buffered == 7
    assert decoder.feed(frame[7:] + frame[:3]) == [Frame(FrameType.RESPONSE, b"hello")]
    assert decoder.buffered == 3


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (b"\x00\x00\x00\x03\x00\x00\x00\x00", "size 3"),
        (b"\x00\x00\x00\x00\x00\x00\x00\x00", "size 0"),
        (b"\xff\xff\xff\xff\x00\x00\x00\x00", "size 4294967295"),
        (b"\x00\x00\x00\x04\x00\x00\x00\x03", "frame type 3"),
        (b"\x00\x00\x00\x04\xff\xff\xff\xff", "frame type 4294967295"),
    ],
)
def test_corrupt_headers(header: bytes, reason: str) -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameDecodeError, match=reason):
        decoder.feed(header)
    # the stream is out of sync for good
    with pytest.raises(FrameDecodeError):
        decoder.feed(encode_frame(0, b"OK"))


def test_max_frame_size_is_configurable() -> None:
    decoder = FrameDecoder(max_frame_size=100)
    assert decoder.feed(encode_frame(2, b"x" * 96)) == [Frame(FrameType.MESSAGE, b"x" * 96)]
    with pytest.raises(FrameDecodeError, match="101"):
        decoder.feed(encode_frame(2, b"x" * 97))


def test_oversized_frame_rejected_before_body_arrives() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameDecodeError):
        decoder.feed((64 * 1024 * 1024 + 1).to_bytes(4, "big") + b"\x00\x00\x00\x02")


def test_frame_decode_error_is_protocol_error() -> None:
    assert issubclass(FrameDecodeError, ProtocolError)


def test_large_frame_in_small_chunks() -> None:
    big = encode_frame(2, b"z" * (8 * 1024 * 1024))
    decoder = FrameDecoder()
    frames: list[Frame] = []
    for i in range(0, len(big), 4096):
        frames += decoder.feed(big[i : i + 4096])
        if i + 4096 < len(big):
            assert frames == []
    assert len(frames) == 1
    assert len(frames[0].data) == 8 * 1024 * 1024


def test_many_frames_per_chunk_all_returned_in_order() -> None:
    frames_in = [encode_frame(2, b"\x00" * 26 + i.to_bytes(4, "big")) for i in range(10_000)]
    decoder = FrameDecoder()
    out: list[Frame] = []
    blob = b"".join(frames_in)
    for i in range(0, len(blob), 65536):
        out += decoder.feed(blob[i : i + 65536])
    assert [int.from_bytes(f.data[26:], "big") for f in out] == list(range(10_000))
    assert decoder.buffered == 0


frames_strategy = st.lists(
    st.tuples(st.sampled_from(list(FrameType)), st.binary(max_size=200)), max_size=20
)


@given(frames_strategy, st.data())
def test_any_chunking_gives_same_frames(
    frames: list[tuple[FrameType, bytes]], data: st.DataObject
) -> None:
    stream = b"".join(encode_frame(t, d) for t, d in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=30)))
    decoder = FrameDecoder()
    out: list[Frame] = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        out += decoder.feed(stream[prev:cut])
        prev = cut
    assert out == [Frame(t, d) for t, d in frames]
    assert decoder.buffered == 0


# --------------------------------------------------------------------------- RESPONSE payloads

TRACED = (
    b"OK"
    + b"\x00\x04\x00\x00\x00\x00\x00\x01"
    + b"\x00\x00\x00\x00\x00\x00\x00\x63"
    + b"\x00\x00\x00\x00\x00\x01\x00\x00"
    + b"\x00\x00\x00\x2c"
)


def test_traced_reply() -> None:
    assert len(TRACED) == 30
    assert parse_traced_reply(TRACED) == TracedReply((1 << 50) + 1, 99, 65536, 44)
    assert parse_pub_reply(TRACED) == TracedReply((1 << 50) + 1, 99, 65536, 44)
    assert parse_pub_reply(b"OK") is None
    for bad in (b"OK", TRACED[:29], b"NO" + TRACED[2:], b""):
        with pytest.raises(ReplyDecodeError):
            parse_traced_reply(bad)


def test_identify_plain_ok_means_no_negotiation() -> None:
    resp = parse_identify_response(b"OK")
    assert resp.max_rdy_count == 2500
    assert resp.negotiated is False
    assert not resp.snappy and not resp.is_redesign


def test_identify_original_json() -> None:
    payload = identify_reply(deflate=True, deflate_level=6)
    resp = parse_identify_response(json.dumps(payload).encode())
    assert resp == IdentifyResponse(
        max_rdy_count=2500,
        version="1.3.0",
        max_msg_timeout=900000,
        msg_timeout=60000,
        deflate=True,
        deflate_level=6,
        max_deflate_level=6,
        output_buffer_size=16384,
        output_buffer_timeout=250,
    )
    assert resp.negotiated and not resp.is_redesign
    assert resp.raw["version"] == "1.3.0"


def test_identify_redesign_and_missing_fields() -> None:
    resp = parse_identify_response(b'{"version":"0.3.7-HA.1.13.0","max_rdy_count":0,"x":[1]}')
    assert resp.is_redesign
    assert resp.max_rdy_count == 2500  # 0 would mean "never RDY": keep the safe default
    assert resp.msg_timeout == 0 and resp.snappy is False


@pytest.mark.parametrize(
    "payload",
    [b"", b"NOPE", b"[1,2]", b'{"max_rdy_count":"many"}', b'{"snappy":1}', b'{"version":3}'],
)
def test_identify_rejects_bad_payloads(payload: bytes) -> None:
    with pytest.raises(ReplyDecodeError):
        parse_identify_response(payload)


def test_auth_response() -> None:
    data = b'{"identity":"svc","identity_url":"http://x","permission_count":2}'
    assert parse_auth_response(data) == AuthResponse("svc", "http://x", 2)
    with pytest.raises(ReplyDecodeError):
        parse_auth_response(b'{"permission_count":true}')
