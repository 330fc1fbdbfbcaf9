"""Shard hashing must agree bit-for-bit with youzan's Go (murmur3) and Java (hashCode) clients.

Expected murmur3 values come from an independent pure-Python MurmurHash3 x86_32 below, not
from mmh3, plus the widely published vector "hello" -> 0x248BFA47.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsqctl.errors import ConfigError
from nsqctl.sharding import (
    HASHES,
    java_hashcode,
    java_partition,
    murmur3_32,
    partition_for_key,
    pick_node_for_key,
)


def ref_murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    """Textbook MurmurHash3_x86_32 (Austin Appleby), written from the reference C."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed & mask
    nblocks = len(data) // 4
    for (k,) in struct.iter_unpack("<I", data[: nblocks * 4]):
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    tail = data[nblocks * 4 :]
    k = 0
    for i, b in enumerate(tail):
        k |= b << (8 * i)
    if tail:
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h


def ref_java_string_hashcode(s: str) -> int:
    """Java String.hashCode over UTF-16 units, signed int32, via Python big ints."""
    units = s.encode("utf-16-le", "surrogatepass")
    h = 0
    for (u,) in struct.iter_unpack("<H", units):
        h = h * 31 + u
    h %= 2**32
    return h - 2**32 if h >= 2**31 else h


def test_murmur3_published_vectors() -> None:
    assert murmur3_32(b"") == 0
    assert murmur3_32("hello") == 0x248BFA47
    assert ref_murmur3_x86_32(b"hello") == 0x248BFA47


@pytest.mark.parametrize(
    "key", [b"", b"a", b"ab", b"abc", b"abcd", b"abcde", "order-12345", "订单", b"\xff\x00\x80"]
)
def test_murmur3_matches_reference(key: bytes | str) -> None:
    raw = key.encode() if isinstance(key, str) else key
    assert murmur3_32(key) == ref_murmur3_x86_32(raw)


def test_murmur3_is_unsigned_like_go_sum32() -> None:
    # find a key whose hash has the top bit set: the signed value would be negative
    key = next(f"k{i}" for i in range(1000) if ref_murmur3_x86_32(f"k{i}".encode()) >= 2**31)
    assert murmur3_32(key) >= 2**31
    assert partition_for_key(key, 7) == ref_murmur3_x86_32(key.encode()) % 7


@given(st.binary(max_size=64))
def test_murmur3_property(data: bytes) -> None:
    assert murmur3_32(data) == ref_murmur3_x86_32(data)


def test_java_hashcode_vectors() -> None:
    assert java_hashcode("hello") == 99162322
    assert java_hashcode("") == 0
    assert java_hashcode("Aa") == java_hashcode("BB") == 2112
    assert java_hashcode("polygenelubricants") == -(2**31)
    assert java_hashcode("😀") == ref_java_string_hashcode("😀")  # surrogate pair
    assert java_hashcode(b"hello") == 99162322


def test_java_long_hashcode() -> None:
    assert java_hashcode(0) == 0
    assert java_hashcode(123) == 123
    assert java_hashcode(-1) == 0  # 0xffffffff ^ 0xffffffff
    assert java_hashcode(2**32) == 1


@given(st.text(max_size=40))
def test_java_hashcode_property(s: str) -> None:
    assert java_hashcode(s) == ref_java_string_hashcode(s)


def test_java_partition_handles_min_int_and_negatives() -> None:
    # Java: Integer.MIN_VALUE % 3 == -2 -> 2
    assert java_partition("polygenelubricants", 3) == 2
    neg = next(s for s in (f"order-number-{i}" for i in range(1000)) if java_hashcode(s) < 0)
    h = java_hashcode(neg)
    java_rem = -((-h) % 5)  # truncating remainder of a negative number
    assert java_partition(neg, 5) == -java_rem
    assert partition_for_key(neg, 5, hash="java") == -java_rem


def test_partition_for_key_in_range_and_stable() -> None:
    parts = {partition_for_key(f"order-{i}", 4) for i in range(200)}
    assert parts == {0, 1, 2, 3}
    assert partition_for_key("order-1", 4) == partition_for_key(b"order-1", 4)
    assert partition_for_key(42, 4) == partition_for_key("42", 4)


def test_registry_and_errors() -> None:
    assert set(HASHES) == {"murmur3", "java"}
    assert HASHES["java"]("hello") == 99162322
    with pytest.raises(ConfigError, match="murmur3"):
        partition_for_key("k", 4, hash="crc32")
    with pytest.raises(ConfigError, match="partition count"):
        partition_for_key("k", 0)
    with pytest.raises(ConfigError, match="shard key"):
        partition_for_key(True, 4)


def test_pick_node_is_order_independent() -> None:
    nodes = ["10.0.0.3:4150", "10.0.0.1:4150", "10.0.0.2:4150"]
    picks = {pick_node_for_key("user-7", list(p)) for p in (nodes, nodes[::-1], sorted(nodes))}
    assert len(picks) == 1
    expected = sorted(nodes)[ref_murmur3_x86_32(b"user-7") % 3]
    assert picks == {expected}
    assert (
        pick_node_for_key("user-7", nodes, hash="java")
        == sorted(nodes)[abs(ref_java_string_hashcode("user-7")) % 3]
    )
    with pytest.raises(ConfigError, match="no nsqd node"):
        pick_node_for_key("k", [])
