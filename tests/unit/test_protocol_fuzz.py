"""Arbitrary bytes must only ever produce results or ProtocolError subclasses."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nsqctl.errors import ProtocolError
from nsqctl.protocol.compression import Codec, DeflateCodec, SnappyCodec
from nsqctl.protocol.errors import ServerError, error_from_frame
from nsqctl.protocol.frames import Frame, FrameDecoder, encode_frame
from nsqctl.protocol.raw_message import (
    ORIGINAL,
    MessageLayout,
    RawMessage,
    decode_message,
    encode_message,
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

LAYOUTS = [
    ORIGINAL,
    MessageLayout("redesign"),
    MessageLayout("redesign", ext=True),
    MessageLayout("redesign", ordered=True),
    MessageLayout("redesign", ext=True, ordered=True),
]

# Raw bytes plus inputs that look almost valid, which reach deeper code paths.
json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=8,
)
fuzz_bytes = (
    st.binary(max_size=300)
    | st.builds(lambda v: __import__("json").dumps(v).encode(), json_like)
    | st.builds(lambda b: b"OK" + b, st.binary(max_size=40))
)


def outcome(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except ProtocolError as exc:
        return exc


@settings(max_examples=300)
@given(st.lists(st.binary(max_size=64), max_size=12))
@example([b"\x00\x00\x00\x03"])
@example([b"\x00\x00\x00\x05\x00\x00\x00\x07x"])
def test_frame_decoder_fuzz(chunks: list[bytes]) -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    for chunk in chunks:
        result = outcome(partial(decoder.feed, chunk))
        if isinstance(result, ProtocolError):
            return
        assert all(isinstance(f, Frame) and isinstance(f.data, bytes) for f in result)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(0, 2), st.binary(max_size=40)), max_size=5), st.binary())
def test_frame_decoder_valid_prefix_then_garbage(
    frames: list[tuple[int, bytes]], garbage: bytes
) -> None:
    stream = b"".join(encode_frame(t, d) for t, d in frames)
    decoder = FrameDecoder(max_frame_size=1024)
    out = decoder.feed(stream)
    assert [(int(f.type), f.data) for f in out] == frames
    result = outcome(lambda: decoder.feed(garbage))
    assert isinstance(result, list | ProtocolError)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: f"{lay.family}-{lay.ext}-{lay.ordered}")
@settings(max_examples=200)
@given(data=st.binary(max_size=120))
def test_decode_message_fuzz(layout: MessageLayout, data: bytes) -> None:
    result = outcome(lambda: decode_message(data, layout))
    if isinstance(result, RawMessage):
        assert len(result.id) == 16
        assert data.endswith(result.body)


@settings(max_examples=300)
@given(fuzz_bytes)
@example(b"[" * 5000)
@example(b"\xff\xfe{")
def test_reply_parsers_fuzz(data: bytes) -> None:
    assert isinstance(outcome(lambda: parse_traced_reply(data)), TracedReply | ProtocolError)
    assert isinstance(
        outcome(lambda: parse_pub_reply(data)), TracedReply | ProtocolError | type(None)
    )
    assert isinstance(
        outcome(lambda: parse_identify_response(data)), IdentifyResponse | ProtocolError
    )
    assert isinstance(outcome(lambda: parse_auth_response(data)), AuthResponse | ProtocolError)


@settings(max_examples=300)
@given(st.binary(max_size=100), st.sampled_from([None, "pub", "sub", "fin", "weird"]))
def test_error_from_frame_never_raises(data: bytes, context: str | None) -> None:
    err = error_from_frame(data, context)
    assert isinstance(err, ServerError)
    assert isinstance(err.fatal, bool)
    assert isinstance(str(err), str)


@pytest.mark.parametrize("make", [SnappyCodec, DeflateCodec])
@settings(max_examples=200)
@given(chunks=st.lists(st.binary(max_size=80), max_size=6))
@example(chunks=[b"\xff\x06\x00\x00sNaPpY\x00\x05\x00\x00\x00"])
def test_decompress_fuzz(make: Callable[[], Codec], chunks: list[bytes]) -> None:
    codec = make()
    for chunk in chunks:
        result = outcome(partial(codec.decompress, chunk))
        if isinstance(result, ProtocolError):
            return
        assert isinstance(result, bytes)


@settings(max_examples=100)
@given(st.binary(min_size=1, max_size=200))
def test_snappy_decompress_fuzz_after_valid_prefix(garbage: bytes) -> None:
    sender, receiver = SnappyCodec(), SnappyCodec()
    assert receiver.decompress(sender.compress(b"valid start")) == b"valid start"
    result = outcome(lambda: receiver.decompress(garbage))
    assert isinstance(result, bytes | ProtocolError)


def _reference_events(stream: bytes, layout: MessageLayout) -> list[Any]:
    """What feed_events must return: split frames, decode messages, group message runs."""
    events: list[Any] = []
    for frame in FrameDecoder().feed(stream):
        if frame.type == 2:
            if not events or not isinstance(events[-1], list):
                events.append([])
            events[-1].append(decode_message(frame.data, layout))
        else:
            events.append((int(frame.type), frame.data))
    return events


frame_specs = st.lists(
    st.one_of(
        st.tuples(
            st.just(2), st.integers(0, 2**63), st.integers(0, 0xFFFF), st.binary(max_size=40)
        ),
        st.tuples(st.integers(0, 1), st.binary(max_size=20)),
    ),
    max_size=12,
)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: f"{lay.family}-{lay.ext}-{lay.ordered}")
@settings(max_examples=150)
@given(specs=frame_specs, cuts=st.lists(st.integers(1, 64), max_size=20))
def test_feed_events_matches_split_then_decode_in_any_chunking(
    layout: MessageLayout, specs: list[tuple[Any, ...]], cuts: list[int]
) -> None:
    parts: list[bytes] = []
    for spec in specs:
        if spec[0] == 2:
            _, ts, attempts, body = spec
            if layout.family == "original":
                raw = RawMessage(ts, attempts, b"%016x" % len(parts), body)
            else:
                raw = RawMessage(ts, attempts, b"", body, len(parts), 9, offset=3, size=4)
            parts.append(encode_frame(2, encode_message(raw, layout)))
        else:
            parts.append(encode_frame(spec[0], spec[1]))
    stream = b"".join(parts)
    expected = outcome(lambda: _reference_events(stream, layout))
    decoder = FrameDecoder()
    got: list[Any] = []
    pos = 0
    for size in [*cuts, len(stream)]:
        got += decoder.feed_events(stream[pos : pos + size], layout)
        pos += size
    # runs cut by a read boundary arrive as several lists: compare them joined back up
    merged: list[Any] = []
    for event in got:
        if isinstance(event, list) and merged and isinstance(merged[-1], list):
            merged[-1] = merged[-1] + event
        else:
            merged.append(event)
    assert merged == expected
    assert decoder.buffered == 0


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: f"{lay.family}-{lay.ext}-{lay.ordered}")
@settings(max_examples=200)
@given(chunks=st.lists(st.binary(max_size=64), max_size=12))
@example(chunks=[encode_frame(2, b"x" * 25)])
def test_feed_events_fuzz_only_protocol_errors(layout: MessageLayout, chunks: list[bytes]) -> None:
    decoder = FrameDecoder(max_frame_size=1024)
    for chunk in chunks:
        result = outcome(partial(decoder.feed_events, chunk, layout))
        if isinstance(result, ProtocolError):
            # the stream is dead from here on: the same error again
            assert outcome(lambda: decoder.feed_events(b"", layout)) is result
            return
        for event in result:
            assert isinstance(event, list | tuple)
