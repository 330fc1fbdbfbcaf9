"""Shard-key hashing: which partition (redesign) or node (original) a key goes to.

Both official redesign clients are matched exactly, so a Python producer and a Go/Java
producer put the same key on the same partition:

* ``murmur3`` (default) - youzan/go-nsq ``producer.go`` ``getProducerAddrForFixKey``:
  ``hashV := config.Hasher.Sum32()`` then ``pid := int(hashV) % meta.PartitionNum``, and
  the documented/tested hasher is ``murmur3.New32()`` (spaolacci/murmur3: x86_32, seed 0).
  ``hashV`` is a ``uint32`` and Go's ``int`` is 64-bit, so the hash is used *unsigned* and
  the modulo never sees a negative number: ``partition = mmh3(key, seed=0, unsigned) % n``.
  Go hashes the raw key bytes; ``str`` keys are encoded as UTF-8.
* ``java`` - youzan nsqJavaSDK ``entity/Topic.java`` default ``TopicSharding``:
  ``int code = passInSeed.hashCode() % partitionNum; return code >= 0 ? code : -code;``
  Java's ``%`` truncates toward zero, so this is ``abs(h) % n`` computed without the
  ``Math.abs(Integer.MIN_VALUE)`` overflow. ``hashCode`` is ``String.hashCode`` (UTF-16
  code units, signed 32-bit) for strings and ``Long.hashCode`` for integer keys (the SDK
  also sharded by ``Long`` order ids).

For the original family (no partitions) :func:`pick_node_for_key` sorts the node list so
every client agrees on the order, then uses the same mapping over the node count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import mmh3

from nsqctl.addresses import HostPort
from nsqctl.errors import ConfigError

__all__ = [
    "DEFAULT_HASH",
    "HASHES",
    "PARTITIONERS",
    "ShardKey",
    "java_hashcode",
    "java_partition",
    "murmur3_32",
    "murmur3_partition",
    "partition_for_key",
    "pick_node_for_key",
]

ShardKey = bytes | str | int

DEFAULT_HASH = "murmur3"

#: A node to pick: an address as text or as a :class:`~nsqctl.addresses.HostPort`.
Node = TypeVar("Node", str, HostPort)


def _key_bytes(key: ShardKey) -> bytes:
    if isinstance(key, bool):
        raise ConfigError(f"bad shard key {key!r}: use a string, bytes or an integer id")
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, int):
        return str(key).encode("ascii")  # what Go code gets from []byte(strconv.Itoa(id))
    raise ConfigError(f"bad shard key {key!r}: use a string, bytes or an integer id")


def murmur3_32(key: ShardKey, seed: int = 0) -> int:
    """MurmurHash3 x86_32 as an unsigned 32-bit int (== Go ``murmur3.Sum32``)."""
    return mmh3.hash(_key_bytes(key), seed, signed=False)


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


def java_hashcode(key: ShardKey) -> int:
    """Java ``hashCode`` as a signed 32-bit int.

    ``str``: ``String.hashCode`` over UTF-16 code units (``"hello"`` → 99162322).
    ``bytes``: decoded as UTF-8 first (the Java SDK sharded on a ``String``).
    ``int``: ``Long.hashCode`` = ``(int)(v ^ (v >>> 32))`` of the 64-bit two's complement.
    """
    if isinstance(key, bool):
        raise ConfigError(f"bad shard key {key!r}: use a string, bytes or an integer id")
    if isinstance(key, int):
        if not -(2**63) <= key < 2**63:
            raise ConfigError(f"bad shard key {key}: integer ids must fit in a signed 64-bit long")
        v = key & 0xFFFF_FFFF_FFFF_FFFF
        return _to_int32(v ^ (v >> 32))
    text = key.decode("utf-8") if isinstance(key, bytes) else key
    if not isinstance(text, str):
        raise ConfigError(f"bad shard key {key!r}: use a string, bytes or an integer id")
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return _to_int32(h)


def murmur3_partition(key: ShardKey, partition_num: int) -> int:
    """go-nsq: ``int(murmur3.Sum32(key)) % partition_num`` (unsigned hash)."""
    return murmur3_32(key) % partition_num


def java_partition(key: ShardKey, partition_num: int) -> int:
    """nsqJavaSDK: ``|hashCode % partition_num|`` with Java's truncating ``%``."""
    return abs(java_hashcode(key)) % partition_num


HASHES: dict[str, Callable[[ShardKey], int]] = {
    "murmur3": murmur3_32,
    "java": java_hashcode,
}

PARTITIONERS: dict[str, Callable[[ShardKey, int], int]] = {
    "murmur3": murmur3_partition,
    "java": java_partition,
}


def partition_for_key(key: ShardKey, partition_num: int, hash: str = DEFAULT_HASH) -> int:
    """Partition in ``[0, partition_num)`` for ``key``, as the chosen official client would."""
    if isinstance(partition_num, bool) or not isinstance(partition_num, int) or partition_num <= 0:
        raise ConfigError(
            f"bad partition count {partition_num!r}: sharded publishing needs the topic's "
            "partition_num (> 0) from a redesign cluster lookup with metainfo"
        )
    try:
        fn = PARTITIONERS[hash]
    except KeyError:
        raise ConfigError(
            f"unknown shard hash {hash!r}: choose one of {', '.join(sorted(PARTITIONERS))}"
        ) from None
    return fn(key, partition_num)


def pick_node_for_key(key: ShardKey, nodes: Sequence[Node], hash: str = DEFAULT_HASH) -> Node:
    """Pick one of ``nodes`` for ``key``, independent of list order (deduplicated, sorted)."""
    ordered = sorted(set(nodes))
    if not ordered:
        raise ConfigError("no nsqd node to pick from: the topic has no producers yet")
    return ordered[partition_for_key(key, len(ordered), hash)]
