"""What the soak keeps to tell why an OK'd message was never consumed, and the telling.

Three records, each cheap enough for a 30-minute run:

* the publisher's feed: when each line was handed to ``nsqctl pub`` (its progress);
* the unordered tail's output (``--format '%n %i %a %T %s\\n'``: nsqd, message id,
  attempts, publish time, body) and its ``--trace-log`` (every message it answered, FIN
  or REQ, by id and nsqd): a message that reached the tail and was never printed shows
  there;
* on the original family, a copy of the killed nsqd's disk queues (the soak topic's and
  its channel's ``.dat`` and ``.meta.dat`` files) taken right after each kill -9, before
  the restart. nsqd v1 appends every message to the files and only moves the read
  position in ``.meta.dat``, so the copy says whether nsqd stored a message, under which
  id, and whether the read position it saved had already passed it (handed out to a
  consumer, as far as the disk queue knows).
"""

from __future__ import annotations

import json
import shutil
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: tail's template for the unordered consumers: what delivered each message, and when
#: it was published (nsqd's timestamp, ms); the body last, as it may hold spaces
TAIL_TEMPLATE = "%n %i %a %T %s\\n"

#: nsqd v1's disk-queue record: int32 size, then the message: int64 timestamp (ns),
#: uint16 attempts, a 16-byte hex id, the body (nsqd/message.go ``Message.WriteTo``)
_HEAD = struct.Struct(">iqH16s")


@dataclass(frozen=True)
class Printed:
    """One line the unordered tail printed."""

    at: float  # wall clock when the soak read it
    nsqd: str
    id: str
    attempts: int
    timestamp_ms: int
    body: bytes


def parse_printed(row: bytes, at: float) -> Printed | None:
    parts = row.split(b" ", 4)
    if len(parts) != 5:
        return None
    nsqd, msg_id, attempts, ts, body = parts
    try:
        return Printed(at, nsqd.decode(), msg_id.decode(), int(attempts), int(ts), body)
    except ValueError:
        return None


@dataclass(frozen=True)
class QueuedMessage:
    """A message found in a copy of an nsqd's disk queue."""

    file_num: int
    offset: int
    id: str
    timestamp_ns: int
    attempts: int


@dataclass(frozen=True)
class QueueMeta:
    """``.meta.dat``: depth, and the read and write positions saved at the last sync."""

    depth: int
    read: tuple[int, int]  # (file number, offset)
    write: tuple[int, int]


def read_meta(path: Path) -> QueueMeta | None:
    try:
        rows = path.read_text().split()
        read = tuple(int(x) for x in rows[1].split(","))
        write = tuple(int(x) for x in rows[2].split(","))
        return QueueMeta(int(rows[0]), (read[0], read[1]), (write[0], write[1]))
    except (OSError, IndexError, ValueError):
        return None


def read_queue(directory: Path, name: str) -> dict[bytes, QueuedMessage]:
    """Every message in the disk queue ``name``'s data files, by body (a torn last
    record, written as nsqd died, ends a file)."""
    out: dict[bytes, QueuedMessage] = {}
    for path in sorted(directory.glob(f"{name}.diskqueue.[0-9]*.dat")):
        file_num = int(path.name.rsplit(".", 2)[-2])
        data = path.read_bytes()
        pos = 0
        while pos + _HEAD.size <= len(data):
            size, ts, attempts, msg_id = _HEAD.unpack_from(data, pos)
            end = pos + 4 + size
            if size < 26 or end > len(data):
                break
            out.setdefault(
                data[pos + _HEAD.size : end],
                QueuedMessage(file_num, pos, msg_id.decode(errors="replace"), ts, attempts),
            )
            pos = end
    return out


@dataclass
class KillCopy:
    """The disk queues of an nsqd just killed with -9, copied before its restart."""

    at: float  # wall clock of the kill
    node: str
    tcp_address: str
    directory: Path
    _queues: dict[str, dict[bytes, QueuedMessage]] = field(default_factory=dict)

    def queue(self, name: str) -> dict[bytes, QueuedMessage]:
        if name not in self._queues:
            self._queues[name] = read_queue(self.directory, name)
        return self._queues[name]

    def meta(self, name: str) -> QueueMeta | None:
        return read_meta(self.directory / f"{name}.diskqueue.meta.dat")


def copy_queues(data_dir: str, topic: str, into: Path) -> None:
    """Copy the soak topic's disk queues (the topic's and its channels') out of an nsqd's
    data directory."""
    into.mkdir(parents=True, exist_ok=True)
    for path in Path(data_dir).glob(f"{topic}*.diskqueue.*.dat"):
        if path.name.startswith((f"{topic}.", f"{topic}:")):
            shutil.copy2(path, into / path.name)


@dataclass
class FeedLog:
    """When lines were handed to pub: (wall clock, lines handed over so far)."""

    points: list[tuple[float, int]] = field(default_factory=list)

    def add(self, written: int) -> None:
        self.points.append((time.time(), written))

    def handed_at(self, index: int) -> float | None:
        for at, written in self.points:
            if written > index:
                return at
        return None


def traced(path: Path) -> dict[tuple[str, str], str]:
    """The tail's trace log: (nsqd, id) -> its last outcome (FIN, REQ, ...)."""
    out: dict[tuple[str, str], str] = {}
    try:
        rows = path.read_text().splitlines()
    except OSError:
        return out
    for row in rows:
        try:
            rec = json.loads(row)
        except ValueError:
            continue
        out[(str(rec.get("nsqd")), str(rec.get("id")))] = str(rec.get("outcome"))
    return out


# The classes a lost message falls in, from the records above.
HANDED_OUT = "handed out before nsqd saved its read position, never reached the tail"
REACHED_TAIL = "reached the tail (trace log), never printed"
AHEAD_OF_READ = "in the channel queue ahead of the saved read position"
TOPIC_ONLY = "in the topic queue, not in the channel queue"
NOT_QUEUED = "in no killed nsqd's queue"


def classify(
    body: bytes,
    index: int,
    topic: str,
    channel: str,
    feed: FeedLog,
    kills: Sequence[KillCopy],
    trace: dict[tuple[str, str], str],
    printed_ids: set[tuple[str, str]],
) -> dict[str, Any]:
    """One lost message: when pub got it, where the kill copies hold it, whether it
    reached the tail, and its class."""
    handed = feed.handed_at(index)
    out: dict[str, Any] = {"body": body.decode(errors="replace"), "line": index}
    out["handed_to_pub"] = round(handed, 3) if handed is not None else None
    chan_name = f"{topic}:{channel}"
    for kill in kills:
        in_topic = kill.queue(topic).get(body)
        in_chan = kill.queue(chan_name).get(body)
        if in_topic is None and in_chan is None:
            continue
        found = in_chan or in_topic
        assert found is not None
        out.update(
            nsqd=kill.tcp_address,
            node=kill.node,
            id=found.id,
            published_before_kill_s=round(kill.at - found.timestamp_ns / 1e9, 3),
            in_topic_queue=in_topic is not None,
            in_channel_queue=in_chan is not None,
        )
        key = (kill.tcp_address, found.id)
        out["tail_trace"] = trace.get(key)
        out["printed"] = key in printed_ids
        meta = kill.meta(chan_name)
        if in_chan is not None and meta is not None:
            behind = (in_chan.file_num, in_chan.offset) < meta.read
            out["behind_saved_read_position"] = behind
            if key in trace or key in printed_ids:
                out["class"] = REACHED_TAIL
            else:
                out["class"] = HANDED_OUT if behind else AHEAD_OF_READ
        elif in_chan is None:
            topic_meta = kill.meta(topic)
            if in_topic is not None and topic_meta is not None:
                where = (in_topic.file_num, in_topic.offset)
                out["behind_topic_saved_read_position"] = where < topic_meta.read
            out["class"] = REACHED_TAIL if key in trace else TOPIC_ONLY
        else:
            out["class"] = REACHED_TAIL if key in trace else AHEAD_OF_READ
        return out
    out["class"] = NOT_QUEUED
    return out


def nearest_kill(at: float | None, kills: Sequence[KillCopy]) -> dict[str, Any] | None:
    """The kill closest to ``at`` (wall clock), and how far (s, negative: before it)."""
    if at is None or not kills:
        return None
    kill = min(kills, key=lambda k: abs(k.at - at))
    return {"node": kill.node, "offset_s": round(at - kill.at, 3)}
