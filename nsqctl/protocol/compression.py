"""Sans-IO stream codecs for the compression nsqd can switch on after IDENTIFY.

Both directions of the connection go through the codec once the server's ``OK`` to
IDENTIFY has been read; the very next frame (the upgrade's ``OK``) is already
compressed. nsqd uses github.com/golang/snappy's framing format (stream identifier
chunk, then compressed/uncompressed chunks with CRC-32C) and raw DEFLATE (no zlib
header) flushed after each write, so every ``compress`` here produces bytes the peer
can decode at once, and ``decompress`` returns whatever is decodable so far.
"""

from __future__ import annotations

import zlib
from typing import Protocol

from nsqctl.errors import ConfigError
from nsqctl.protocol.errors import CompressionError
from nsqctl.protocol.replies import IdentifyResponse

__all__ = [
    "DEFAULT_DEFLATE_LEVEL",
    "Codec",
    "DeflateCodec",
    "IdentityCodec",
    "SnappyCodec",
    "codec_for",
]

DEFAULT_DEFLATE_LEVEL = 6


class Codec(Protocol):
    """What a connection needs from a compression layer."""

    name: str

    def compress(self, data: bytes) -> bytes:
        """Compress outgoing bytes; the result is decodable on its own (flushed)."""
        ...

    def decompress(self, data: bytes) -> bytes:
        """Decompress incoming bytes; partial input yields what is decodable so far."""
        ...


class IdentityCodec:
    """No compression."""

    name = "none"

    def compress(self, data: bytes) -> bytes:
        return bytes(data)

    def decompress(self, data: bytes) -> bytes:
        return bytes(data)


class SnappyCodec:
    """Snappy framing format, as nsqd's golang/snappy buffered writer and reader use."""

    name = "snappy"

    def __init__(self) -> None:
        # Imported here: its extension module adds to every process's memory (tail's peak
        # RSS), and only a connection that negotiated snappy needs it.
        import snappy

        self._compressor = snappy.StreamCompressor()
        self._decompressor = snappy.StreamDecompressor()

    def compress(self, data: bytes) -> bytes:
        if not data:
            return b""
        out: bytes = self._compressor.compress(bytes(data))
        return out

    def decompress(self, data: bytes) -> bytes:
        if not data:
            return b""
        try:
            out: bytes = self._decompressor.decompress(bytes(data))
            return out
        except Exception as exc:  # cramjam/snappy raise several unrelated types
            raise CompressionError(f"corrupt snappy stream: {exc}") from exc


class DeflateCodec:
    """Raw DEFLATE (wbits=-15) with a sync flush after every write."""

    name = "deflate"

    def __init__(self, level: int = DEFAULT_DEFLATE_LEVEL) -> None:
        if not 1 <= level <= 9:
            raise ValueError(f"deflate level must be 1..9, got {level}")
        self.level = level
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
        self._decompressor = zlib.decompressobj(-15)

    def compress(self, data: bytes) -> bytes:
        if not data:
            return b""
        c = self._compressor
        return c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)

    def decompress(self, data: bytes) -> bytes:
        d = self._decompressor
        if d.eof:
            raise CompressionError("deflate stream already ended; extra data received")
        try:
            out = d.decompress(data)
        except zlib.error as exc:
            raise CompressionError(f"corrupt deflate stream: {exc}") from exc
        if d.eof and d.unused_data:
            raise CompressionError("deflate stream ended with trailing data")
        return out


def codec_for(response: IdentifyResponse) -> Codec:
    """The codec the server agreed to in its IDENTIFY reply (they are exclusive)."""
    if response.snappy:
        return SnappyCodec()
    if response.deflate:
        level = response.deflate_level
        return DeflateCodec(level if 1 <= level <= 9 else DEFAULT_DEFLATE_LEVEL)
    return IdentityCodec()


COMPRESSIONS = ("none", "snappy", "deflate")


def validate_compression(name: str) -> str:
    """``name`` if it is a compression nsqctl can negotiate, else a usage error."""
    if name not in COMPRESSIONS:
        raise ConfigError(f"unknown compression {name!r}: use none, snappy or deflate")
    return name
