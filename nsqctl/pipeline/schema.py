"""The archive's Parquet schema and how one delivered message becomes one row.

Layout: ``topic=T/partition=P/date=YYYY-MM-DD/part-….parquet`` (Hive style). ``topic`` and
``partition`` are also stored in every file so a file is self-describing without its path.

Id mapping on the original family: the id is 16 ASCII hex characters (nsqd's GUID); its
``internal_id`` is that hex read as a 64-bit big-endian integer, stored two's-complement
signed (values ≥ 2**63 wrap negative). Original ids are unique per nsqd only (the node id
bits default to a hash of the hostname), so the original family archives with
``partition = -1`` and de-duplication adds ``nsqd`` to the key. On the redesign the
``internal_id`` is the one in the frame and the key is ``(topic, partition, internal_id)``.

``timestamp`` is the message's nsqd publish time in nanoseconds (int64, exact);
``archived_at`` is a UTC timestamp (µs) of the write.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow as pa

NO_PARTITION = -1  # original family: topics have no partitions

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

#: Columns a row carries before the write stamps ``archived_at``.
ROW_COLUMNS = [f.name for f in ARCHIVE_SCHEMA if f.name != "archived_at"]


def internal_id_from_hex(id_text: str | bytes) -> int:
    """Original family: the 16-hex id as a signed 64-bit integer (see module doc)."""
    text = id_text.decode("ascii") if isinstance(id_text, bytes) else id_text
    value = int(text, 16)
    return value - (1 << 64) if value >= 1 << 63 else value


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


def row_from_message(msg: Any) -> tuple[int, str, list[Any]]:
    """(partition, date, values in ROW_COLUMNS order) for a :class:`nsqctl.message.Message`."""
    raw = msg.raw
    partition = NO_PARTITION if msg.partition is None else int(msg.partition)
    if raw.internal_id is None:
        internal_id = internal_id_from_hex(raw.id)
    else:
        internal_id = to_signed64(raw.internal_id)
    ext = raw.ext_header
    ext_text = None
    if ext:
        ext_text = ext.decode("utf-8", "replace") if isinstance(ext, bytes) else json.dumps(ext)
    values = [
        msg.topic,
        partition,
        msg.channel,
        msg.nsqd_address,
        internal_id,
        to_signed64(raw.trace_id),
        bytes(raw.id),
        raw.timestamp,
        raw.attempts,
        raw.offset,
        raw.size,
        ext_text,
        raw.body,
    ]
    return partition, date_of(raw.timestamp), values
