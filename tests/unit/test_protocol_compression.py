"""Snappy framing and raw deflate codecs: wire compatibility and incremental decoding."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import pytest
import snappy
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqctl.errors import ProtocolError
from nsqctl.protocol.compression import (
    Codec,
    DeflateCodec,
    IdentityCodec,
    SnappyCodec,
    codec_for,
)
from nsqctl.protocol.errors import CompressionError
from nsqctl.protocol.frames import FrameDecoder, FrameType, encode_frame
from nsqctl.protocol.replies import IdentifyResponse

SNAPPY_STREAM_ID = b"\xff\x06\x00\x00sNaPpY"


def test_snappy_output_is_framing_format() -> None:
    out = SnappyCodec().compress(b"hello hello hello hello")
    assert out.startswith(SNAPPY_STREAM_ID)
    assert out[10] in (0x00, 0x01)  # compressed or uncompressed data chunk
    # an independent decoder of the framing format agrees
    assert snappy.StreamDecompressor().decompress(out) == b"hello hello hello hello"


def test_snappy_stream_identifier_only_once() -> None:
    codec = SnappyCodec()
    first, second = codec.compress(b"a" * 100), codec.compress(b"b" * 100)
    assert first.startswith(SNAPPY_STREAM_ID)
    assert not second.startswith(SNAPPY_STREAM_ID)
    assert SnappyCodec().decompress(first + second) == b"a" * 100 + b"b" * 100


def test_snappy_decodes_uncompressed_chunk_written_by_hand() -> None:
    # chunk type 0x01 = uncompressed: [type][3B LE length][4B LE masked crc32c][data];
    # crc32c(b"abc") = 0x364b3fb7, masked = ((c >> 15 | c << 17) + 0xa282ead8) = 0x21f1576e
    chunk = b"\x01\x07\x00\x00" + bytes.fromhex("6e57f121") + b"abc"
    assert SnappyCodec().decompress(SNAPPY_STREAM_ID + chunk) == b"abc"


def test_snappy_bad_checksum_raises_protocol_error() -> None:
    chunk = b"\x01\x07\x00\x00" + b"\x00" * 4 + b"abc"
    with pytest.raises(CompressionError, match="snappy"):
        SnappyCodec().decompress(SNAPPY_STREAM_ID + chunk)


def test_snappy_corrupt_input_raises_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        SnappyCodec().decompress(SNAPPY_STREAM_ID + b"\x00\x08\x00\x00" + b"\xff" * 8)


def test_deflate_is_raw_and_sync_flushed() -> None:
    out = DeflateCodec(6).compress(b"payload")
    assert out.endswith(b"\x00\x00\xff\xff")  # sync flush marker: decodable right away
    d = zlib.decompressobj(-15)
    assert d.decompress(out) == b"payload"
    with pytest.raises(zlib.error):
        zlib.decompress(out)  # no zlib header


def test_deflate_decodes_what_peer_flushes() -> None:
    peer = zlib.compressobj(1, zlib.DEFLATED, -15)
    codec = DeflateCodec()
    got = codec.decompress(peer.compress(b"one") + peer.flush(zlib.Z_SYNC_FLUSH))
    got += codec.decompress(peer.compress(b"two") + peer.flush(zlib.Z_SYNC_FLUSH))
    assert got == b"onetwo"


def test_deflate_corrupt_input_raises_protocol_error() -> None:
    with pytest.raises(CompressionError):
        DeflateCodec().decompress(b"\xff\xff\xff\xff\xff")


def test_deflate_level_validated() -> None:
    with pytest.raises(ValueError):
        DeflateCodec(0)


def test_identity() -> None:
    assert IdentityCodec().compress(b"x") == b"x"
    assert IdentityCodec().decompress(b"y") == b"y"


def test_codec_for() -> None:
    assert isinstance(codec_for(IdentifyResponse(snappy=True)), SnappyCodec)
    deflate = codec_for(IdentifyResponse(deflate=True, deflate_level=3))
    assert isinstance(deflate, DeflateCodec) and deflate.level == 3
    assert codec_for(IdentifyResponse(deflate=True, deflate_level=0)).level == 6  # type: ignore[attr-defined]
    assert isinstance(codec_for(IdentifyResponse()), IdentityCodec)


def test_frames_through_compression_layer() -> None:
    # the upgrade's OK and a message, as nsqd sends them after IDENTIFY
    for make in (SnappyCodec, DeflateCodec):
        server, client = make(), make()
        wire = server.compress(encode_frame(0, b"OK")) + server.compress(encode_frame(2, b"m" * 50))
        decoder = FrameDecoder()
        frames = []
        for i in range(len(wire)):
            frames += decoder.feed(client.decompress(wire[i : i + 1]))
        assert [(f.type, f.data) for f in frames] == [
            (FrameType.RESPONSE, b"OK"),
            (FrameType.MESSAGE, b"m" * 50),
        ]


writes = st.lists(st.binary(max_size=3000) | st.just(b"abc" * 30000), min_size=1, max_size=6)


@pytest.mark.parametrize("make", [SnappyCodec, DeflateCodec, IdentityCodec])
@settings(max_examples=40, deadline=None)
@given(chunks=writes, data=st.data())
def test_round_trip_through_random_chunking(
    make: Callable[[], Codec], chunks: list[bytes], data: st.DataObject
) -> None:
    sender, receiver = make(), make()
    wire = b"".join(sender.compress(c) for c in chunks)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=20)))
    out = []
    prev = 0
    for cut in [*cuts, len(wire)]:
        out.append(receiver.decompress(wire[prev:cut]))
        prev = cut
    assert b"".join(out) == b"".join(chunks)


@pytest.mark.parametrize("make", [SnappyCodec, DeflateCodec])
def test_each_write_decodable_immediately(make: Callable[[], Codec]) -> None:
    sender, receiver = make(), make()
    for piece in (b"first", b"second" * 1000, b"third"):
        assert receiver.decompress(sender.compress(piece)) == piece
