"""The soak's classing of a lost message from a copy of a killed nsqd's disk queues.

The files are written here in nsqd v1's layout (go-diskqueue: an int32 size, then
``Message.WriteTo``: int64 timestamp, uint16 attempts, 16-byte id, body; ``.meta.dat``:
depth, then read and write positions as ``file,offset``); ``bench/kill9_inflight.py``
reads a real nsqd's files with the same functions.
"""

from __future__ import annotations

import struct
from pathlib import Path

from tests.helpers.soak_losses import (
    AHEAD_OF_READ,
    HANDED_OUT,
    NOT_QUEUED,
    REACHED_TAIL,
    TOPIC_ONLY,
    FeedLog,
    KillCopy,
    classify,
    read_queue,
)

TOPIC, CHANNEL = "soak-t", "soak"
NSQD = "127.0.0.1:4150"


def record(body: bytes, n: int) -> bytes:
    msg = struct.pack(">qH", 1_000_000_000 * n, 1) + b"%016x" % n + body
    return struct.pack(">i", len(msg)) + msg


def write_queue(directory: Path, name: str, bodies: list[bytes], read_after: int) -> None:
    """``bodies`` in file 0; the saved read position just past the first ``read_after``."""
    data = b"".join(record(b, n) for n, b in enumerate(bodies))
    read = len(b"".join(record(b, n) for n, b in enumerate(bodies[:read_after])))
    (directory / f"{name}.diskqueue.000000.dat").write_bytes(data + b"\x00\x00")  # torn
    meta = f"{len(bodies) - read_after}\n0,{read}\n0,{len(data)}\n"
    (directory / f"{name}.diskqueue.meta.dat").write_text(meta)


def kill_copy(tmp_path: Path) -> KillCopy:
    write_queue(tmp_path, TOPIC, [b"a", b"b", b"c", b"t"], 4)
    write_queue(tmp_path, f"{TOPIC}:{CHANNEL}", [b"a", b"b", b"c"], 2)
    return KillCopy(10.0, "nsqd0", NSQD, tmp_path)


def test_read_queue_finds_every_whole_record(tmp_path: Path) -> None:
    kill_copy(tmp_path)
    queued = read_queue(tmp_path, f"{TOPIC}:{CHANNEL}")
    assert sorted(queued) == [b"a", b"b", b"c"]
    assert queued[b"b"].id == f"{1:016x}"
    assert queued[b"b"].offset == len(record(b"a", 0))


def test_each_class(tmp_path: Path) -> None:
    kills = [kill_copy(tmp_path)]
    feed = FeedLog([(5.0, 10)])

    def cls(body: bytes, trace: dict[tuple[str, str], str] | None = None) -> str:
        out = classify(body, 0, TOPIC, CHANNEL, feed, kills, trace or {}, set())
        return str(out["class"])

    assert cls(b"a") == HANDED_OUT  # behind the saved read position, no trace record
    assert cls(b"a", {(NSQD, f"{0:016x}"): "FIN"}) == REACHED_TAIL
    assert cls(b"c") == AHEAD_OF_READ
    assert cls(b"t") == TOPIC_ONLY
    assert cls(b"z") == NOT_QUEUED
    out = classify(b"a", 0, TOPIC, CHANNEL, feed, kills, {}, set())
    assert out["published_before_kill_s"] == 10.0  # the kill at 10 s, published at 0 s
    assert out["handed_to_pub"] == 5.0
