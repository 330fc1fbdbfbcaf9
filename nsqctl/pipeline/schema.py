"""The archive's Parquet schema and how one delivered message becomes one row.

Layout: ``topic=T/partition=P/date=YYYY-MM-DD/part-….parquet`` (Hive style). ``topic`` and
``partition`` are also stored in every file so a file is self-describing without its path.

Id mapping on the original family: the id is 16 ASCII hex characters (nsqd's GUID); its
``internal_id`` is that hex read as a 64-bit big-endian integer, stored two's-complement
signed (values ≥ 2**63 wrap negative). Original ids are unique per nsqd only (the node id
bits default to a hash of the hostname), so the original family archives with
``partition = -1`` and de-duplication adds ``nsqd`` to the key. On the redesign the
``internal_id`` is the one in the frame and the key is ``(topic, partition, internal_id)``.

``trace_id`` is null for a message without one (the original family; trace id 0 on the
redesign). ``offset``/``size`` (the partition's disk-queue position) are sent by nsqd to
ordered (SUB_ORDERED) subscriptions only, so they are null for unordered topics.

``timestamp`` is the message's nsqd publish time in nanoseconds (int64, exact);
``archived_at`` is a UTC timestamp (µs) of the write.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from nsqctl.protocol.raw_message import RawMessage

NO_PARTITION = -1  # original family: topics have no partitions
PARTITION_ID_SHIFT = 50

ARCHIVE_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("channel", pa.string()),
        pa.field("nsqd", pa.string()),
        pa.field("internal_id", pa.int64()),
        pa.field("trace_id", pa.int64()),
        pa.field("id", pa.binary()),
        pa.field("timestamp", pa.int64()),
        pa.field("attempts", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("size", pa.int64()),
        pa.field("ext", pa.string()),
        pa.field("body", pa.binary()),
        pa.field("archived_at", pa.timestamp("us", tz="UTC")),
    ]
)


def internal_id_from_hex(id_text: str | bytes) -> int:
    """Original family: the 16-hex id as a signed 64-bit integer (see module doc)."""
    text = id_text.decode("ascii") if isinstance(id_text, bytes) else id_text
    value = int(text, 16)
    return value - (1 << 64) if value >= 1 << 63 else value


#: nsqd's GUID (nsqio/nsq nsqd/guid.go): ``(now_ns >> 20) - TWEPOCH`` shifted left by 22
#: above 10 node bits and a 12-bit sequence; the time is in units of 2**20 ns (~1 ms).
GUID_TWEPOCH = 1288834974288
GUID_TIMESTAMP_SHIFT = 22


def original_id_time_ns(internal_id: int) -> int:
    """When nsqd made an original-family id (within ~1 ms of the message's timestamp)."""
    unsigned = internal_id % (1 << 64)
    return ((unsigned >> GUID_TIMESTAMP_SHIFT) + GUID_TWEPOCH) << 20


def to_signed64(value: int | None) -> int | None:
    """Redesign ids and trace ids are unsigned on the wire; Parquet int64 is signed."""
    if value is None:
        return None
    return value - (1 << 64) if value >= 1 << 63 else value


_DATES: dict[int, str] = {}


def date_of(timestamp_ns: int) -> str:
    """UTC date (YYYY-MM-DD) of a nanosecond timestamp, cached per day."""
    day = timestamp_ns // 86_400_000_000_000
    text = _DATES.get(day)
    if text is None:
        text = (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()
        _DATES[day] = text
    return text


class ArchivableMessage(Protocol):
    """What the archive reads from a message (:class:`nsqctl.message.Message` has it all,
    as does :class:`OfflineMessage`). Read-only: the archive never changes a message."""

    @property
    def topic(self) -> str: ...

    @property
    def channel(self) -> str | None: ...

    @property
    def partition(self) -> int | None: ...

    @property
    def raw(self) -> RawMessage: ...

    @property
    def nsqd_address(self) -> str | None: ...


@dataclass(frozen=True)
class OfflineMessage:
    """A message that did not come from a consumer (benchmarks, tests, imports)."""

    raw: RawMessage
    topic: str
    channel: str | None
    partition: int | None
    nsqd_address: str | None


def _internal_ids(raws: Sequence[RawMessage]) -> list[int | None]:
    """Every row's internal id; the original family's hex ids are parsed in one go."""
    if all(r.internal_id is None for r in raws):
        try:
            packed = bytes.fromhex(b"".join([r.id for r in raws]).decode("ascii"))
        except ValueError:
            packed = b""
        if len(packed) == 8 * len(raws):  # every id was 16 hex digits
            return list(struct.unpack(f">{len(raws)}q", packed))
    return [
        internal_id_from_hex(r.id) if r.internal_id is None else to_signed64(r.internal_id)
        for r in raws
    ]


def partition_of_id(internal_id: int) -> int:
    """A redesign message's partition from its internal id, as nsqd computes it
    (``GetPartitionFromMsgID``: cluster mode starts partition p's ids at p << 50)."""
    return (internal_id >> PARTITION_ID_SHIFT) & 1023


def _partition(subscribed: int | None, internal_id: int | None) -> int:
    """The subscription's partition; without one (``--nsqd`` only, where the client names
    no partition) a redesign message's own, from its id; the original family has none."""
    if subscribed is not None:
        return subscribed
    return NO_PARTITION if internal_id is None else partition_of_id(internal_id)


def _ext_text(ext: bytes | dict[str, Any] | None) -> str | None:
    if not ext:
        return None
    return ext.decode("utf-8", "replace") if isinstance(ext, bytes) else json.dumps(ext)


def message_table(msgs: Sequence[ArchivableMessage], archived_at: dt.datetime) -> pa.Table:
    """One Arrow table for a batch of messages, built column by column.

    Runs once per file in the writer thread, so the consume loop only keeps references:
    a list comprehension per column is far cheaper than a Python row per message.
    """
    raws = [m.raw for m in msgs]
    n = len(raws)
    exts = [r.ext_header for r in raws]
    columns: dict[str, Any] = {
        "topic": [m.topic for m in msgs],
        "partition": [
            _partition(m.partition, r.internal_id) for m, r in zip(msgs, raws, strict=True)
        ],
        "channel": [m.channel for m in msgs],
        "nsqd": [m.nsqd_address for m in msgs],
        "internal_id": _internal_ids(raws),
        # null when the message carries no trace (original; trace id 0 on the redesign),
        # whatever else the batch holds
        "trace_id": [to_signed64(r.trace_id) if r.trace_id else None for r in raws],
        "id": [r.id for r in raws],
        "timestamp": [r.timestamp for r in raws],
        "attempts": [r.attempts for r in raws],
        "offset": [r.offset for r in raws],
        "size": [r.size for r in raws],
        "ext": [_ext_text(e) for e in exts] if any(exts) else [None] * n,
        "body": [r.body for r in raws],
    }
    arrays = [pa.array(columns[f.name], type=f.type) for f in ARCHIVE_SCHEMA if f.name in columns]
    arrays.append(pa.repeat(pa.scalar(archived_at, ARCHIVE_SCHEMA.field("archived_at").type), n))
    return pa.Table.from_arrays(arrays, schema=ARCHIVE_SCHEMA)
