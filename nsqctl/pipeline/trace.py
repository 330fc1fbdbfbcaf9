"""Gather everything known about one message into a time-ordered timeline.

Sources: nsqctl trace logs (JSONL from :mod:`nsqctl.tracelog`: publish receipts, consume
records) and archives (Parquet rows), read by either engine with the same filters
(:mod:`nsqctl.pipeline.local` in-process, or Spark for any size and place); and on a live
redesign cluster, nsqd's ``/message/get`` and each channel's ``/stats``.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import TYPE_CHECKING, Any, Protocol, cast

import httpx

from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.pipeline.filters import (
    RowFilter,
    archive_filter,
    check_archive_columns,
    log_filter,
    to_spark,
)
from nsqctl.pipeline.schema import internal_id_from_hex, partition_of_id
from nsqctl.pipeline.selection import TraceQuery

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: A trace log record's fields (see :mod:`nsqctl.tracelog`); ids are unsigned 64-bit.
TRACE_LOG_FIELDS = (
    ("kind", "string"),
    ("time", "double"),
    ("topic", "string"),
    ("channel", "string"),
    ("partition", "long"),
    ("nsqd", "string"),
    ("local_address", "string"),
    ("id", "string"),
    ("internal_id", "uint64"),
    ("trace_id", "uint64"),
    ("attempts", "long"),
    ("timestamp", "long"),
    ("offset", "long"),
    ("size", "long"),
    ("count", "long"),
    ("outcome", "string"),
    ("handler_ms", "double"),
)
#: Spark has no unsigned longs: ids are read as decimal(20,0)
TRACE_LOG_SCHEMA = ", ".join(
    f"{name} {'decimal(20,0)' if kind == 'uint64' else kind}" for name, kind in TRACE_LOG_FIELDS
)


def trace_log_arrow_schema() -> Any:
    """:data:`TRACE_LOG_FIELDS` as a pyarrow schema (the local engine's reader)."""
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "double": pa.float64(),
        "long": pa.int64(),
        "uint64": pa.uint64(),
    }
    return pa.schema([(name, types[kind]) for name, kind in TRACE_LOG_FIELDS])


def parse_query(text: str, *, internal: bool = False, topic: str | None = None) -> TraceQuery:
    """A decimal trace id, a decimal internal id (``internal``), a 16-hex original message
    id, or a 32-hex redesign message id (internal id + trace id)."""
    text = text.strip()
    if internal:
        if not text.isdigit():
            raise ConfigError(f"`internal_id` needs a decimal id, not {text!r}")
        return TraceQuery(f"internal id {text}", internal_id=int(text), topic=topic)
    if re.fullmatch(r"[0-9a-fA-F]{32}", text):
        raw = bytes.fromhex(text)
        return TraceQuery(
            f"message id {text}",
            internal_id=int.from_bytes(raw[:8], "big"),
            trace_id=int.from_bytes(raw[8:], "big") or None,
            topic=topic,
        )
    if text.isdigit() and len(text) <= 20:
        return TraceQuery(f"trace id {text}", trace_id=int(text), topic=topic)
    if re.fullmatch(r"[0-9a-fA-F]{16}", text):
        iid = internal_id_from_hex(text) % (1 << 64)
        return TraceQuery(
            f"message id {text}", internal_id=iid, message_id=text.lower(), topic=topic
        )
    raise ConfigError(
        f"cannot read {text!r} as an id: give a decimal trace id, `internal_id` N, "
        "or a message id (16 or 32 hex characters)"
    )


class Reader(Protocol):
    """An engine's rows for a trace: archive rows carry their file in ``_file``."""

    engine: str

    def archive_rows(self, paths: list[str], row_filter: RowFilter) -> list[dict[str, Any]]: ...

    def log_rows(self, paths: list[str], row_filter: RowFilter) -> list[dict[str, Any]]: ...


class SparkReader:
    """Rows for ``trace`` read by Spark (archives and logs of any size, anywhere)."""

    engine = "spark"

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def archive_rows(self, paths: list[str], row_filter: RowFilter) -> list[dict[str, Any]]:
        from pyspark.sql import functions as F

        df = self.spark.read.parquet(*paths)
        check_archive_columns(", ".join(paths), df.columns)
        df = df.where(to_spark(row_filter, df.columns))
        rows = df.withColumn("_file", F.input_file_name()).drop("body").collect()
        return [r.asDict() for r in rows]

    def log_rows(self, paths: list[str], row_filter: RowFilter) -> list[dict[str, Any]]:
        reader = self.spark.read.schema(TRACE_LOG_SCHEMA)
        return [r.asDict() for r in reader.json(paths).where(to_spark(row_filter)).collect()]


def _reader(source: Reader | SparkSession | None) -> Reader | None:
    """A Reader as is; a SparkSession (the original signature of :func:`gather`) wrapped."""
    if source is None or hasattr(source, "archive_rows"):
        return cast("Reader | None", source)
    return SparkReader(source)  # hasattr narrowed the union to the SparkSession


def _event(time: float, event: str, where: str, **detail: Any) -> dict[str, Any]:
    return {
        "time": time,
        "at": dt.datetime.fromtimestamp(time, dt.UTC).isoformat(timespec="milliseconds"),
        "event": event,
        "where": where,
        "detail": {k: v for k, v in detail.items() if v is not None},
    }


def from_trace_logs(
    reader: Reader | SparkSession, paths: list[str], q: TraceQuery
) -> list[dict[str, Any]]:
    rows = _reader(reader).log_rows(paths, log_filter(q))  # type: ignore[union-attr]
    events = []
    for r in rows:
        ids = {
            "internal_id": None if r["internal_id"] is None else int(r["internal_id"]),
            "trace_id": None if r["trace_id"] is None else int(r["trace_id"]),
        }
        if r["kind"] == "publish":
            events.append(
                _event(
                    r["time"],
                    "published",
                    f"{r['nsqd']} {r['topic']} partition {r['partition']}",
                    offset=r["offset"],
                    size=r["size"],
                    count=r["count"],
                    **ids,
                )
            )
        elif r["kind"] == "consume":
            events.extend(_accepted(r["timestamp"], r["nsqd"], r["topic"], r["partition"]))
            events.append(
                _event(
                    r["time"],
                    f"delivered, {r['outcome']}",
                    f"{r['topic']}/{r['channel']} from {r['nsqd']} to {r['local_address']}",
                    attempts=r["attempts"],
                    partition=r["partition"],
                    offset=r["offset"],
                    handler_ms=r["handler_ms"],
                    id=r["id"],
                    **ids,
                )
            )
    return events


def _accepted(
    ts_ns: int | None, nsqd: str | None, topic: str, partition: Any
) -> list[dict[str, Any]]:
    """The message's own timestamp: when nsqd accepted the publish."""
    if not ts_ns:
        return []
    part = "" if partition in (None, -1) else f" partition {partition}"
    return [_event(ts_ns / 1e9, "accepted by nsqd", f"{nsqd} {topic}{part}")]


def from_archives(
    reader: Reader | SparkSession, paths: list[str], q: TraceQuery
) -> list[dict[str, Any]]:
    rows = _reader(reader).archive_rows(paths, archive_filter(q))  # type: ignore[union-attr]
    events = []
    for r in rows:
        events.extend(_accepted(r["timestamp"], r["nsqd"], r["topic"], r["partition"]))
        stamp = r["archived_at"]  # Spark: naive, in its UTC session time zone
        archived = (stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)).timestamp()
        events.append(
            _event(
                archived,
                "archived",
                file_path(r["_file"]),
                topic=r["topic"],
                partition=r["partition"],
                channel=r["channel"],
                nsqd=r["nsqd"],
                attempts=r["attempts"],
                offset=r["offset"],
                internal_id=r["internal_id"],
                trace_id=r["trace_id"],
                id=_archived_id(r["id"], r["partition"]),
            )
        )
    return events


def file_path(uri: str) -> str:
    """A local file as a plain path (Spark names it ``file:///…``, percent-encoded); other
    URIs stay as they are."""
    if not uri.startswith("file:"):
        return uri
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path)


def _archived_id(raw: bytes | bytearray | None, partition: int) -> str | None:
    """The id as trace logs and ``tail --format json`` write it: the original family's 16
    hex characters as received, the redesign's 16 bytes (internal id + trace id) in hex."""
    if raw is None:
        return None
    data = bytes(raw)
    return data.decode("ascii", "replace") if partition < 0 else data.hex()


def from_live(
    nsqd_http: list[str], q: TraceQuery, internal_ids: set[int], timeout: float = 5.0
) -> list[dict[str, Any]]:
    """Redesign cluster mode: the message on its partition leader, and channel progress.

    What could not be searched is an event too, so that "not on the server" is never
    read into a silence: an nsqd that did not answer (``not answering``), and the
    message's partition when no nsqd that answered holds it (``not searched``: its nsqds
    are down, or were not given)."""
    if not q.topic or not nsqd_http:
        return []
    ids = set(internal_ids) | ({q.internal_id} if q.internal_id is not None else set())
    now = dt.datetime.now(dt.UTC).timestamp()
    events = []
    held: set[int] = set()  # partitions of the topic on the nsqds that answered
    with httpx.Client(timeout=timeout) as client:
        for http in nsqd_http:
            progress = _channel_progress(http, q.topic, now, timeout)
            if isinstance(progress, str):
                events.append(_event(now, "not answering", f"{http}", error=progress))
                continue
            partitions, found = progress
            held |= partitions
            for iid in sorted(ids):
                partition = partition_of_id(iid)
                message = _message_on(client, http, q.topic, partition, iid)
                if message is not None:
                    events.append(
                        _event(
                            now,
                            "on server",
                            f"{http} {q.topic} partition {partition}",
                            message=message,
                        )
                    )
            events.extend(found)
    for partition in sorted({partition_of_id(i) for i in ids} - held):
        events.append(
            _event(
                now,
                "not searched",
                f"{q.topic} partition {partition}",
                why="no nsqd that answered holds it: its nsqds are down, or were not given",
            )
        )
    return events


def _message_on(
    client: httpx.Client, http: str, topic: str, partition: int, iid: int
) -> dict[str, Any] | None:
    """The message ``iid`` as one nsqd stores it, or None.

    youzan's ``/message/get?search_mode=id`` answers with the first message of the
    commit-log entry holding the id (a whole MPUB batch is one entry), and with the last
    entry's first message for an id it does not have. So the answer is checked, and when
    it is an earlier message the one wanted is read by its queue count: ids of one
    partition are consecutive within an entry."""

    def get(mode: str, pos: int) -> dict[str, Any] | None:
        try:
            resp = client.get(
                f"http://{http}/message/get",
                params={
                    "topic": topic,
                    "partition": partition,
                    "search_mode": mode,
                    "search_pos": pos,
                },
            )
            found = resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        return found if isinstance(found, dict) and isinstance(found.get("id"), int) else None

    first = get("id", iid)
    if first is None or first["id"] == iid:
        return first
    count = first.get("queue_cnt_index")
    if first["id"] > iid or not isinstance(count, int):
        return None
    found = get("count", count + iid - first["id"])
    return found if found is not None and found["id"] == iid else None


def _channel_progress(
    http: str, topic: str, now: float, timeout: float
) -> tuple[set[int], list[dict[str, Any]]] | str:
    """The partitions of ``topic`` nsqd ``http`` holds and each of their channels'
    progress, read through the one ``/stats`` reader; why not, when it cannot be read."""
    from nsqctl.stats.read import read_nsqd_stats

    try:
        node = read_nsqd_stats(http, topic=topic, timeout=timeout)
    except NsqctlError as err:
        return str(err)
    events = []
    partitions: set[int] = set()
    for t in node.topics:
        if t.topic != topic or t.partition is None:
            continue  # original nsqd: nothing per message to say
        partitions.add(t.partition)
        for ch in t.channels:
            events.append(
                _event(
                    now,
                    "channel progress",
                    f"{http} {topic}/{ch.name} partition {t.partition}",
                    depth=ch.depth,
                    in_flight=ch.in_flight_count,
                )
            )
    return partitions, events


def gather(
    spark: Reader | SparkSession | None,
    q: TraceQuery,
    archives: list[str],
    trace_logs: list[str],
    nsqd_http: list[str],
) -> list[dict[str, Any]]:
    """Every event about the message, oldest first (duplicates of one fact merged).
    ``spark`` is the engine reading archives and logs: a :class:`Reader` or a SparkSession
    (None: live sources only)."""
    events: list[dict[str, Any]] = []
    reader = _reader(spark)
    if reader is not None and trace_logs:
        events += from_trace_logs(reader, trace_logs, q)
    if reader is not None and archives:
        events += from_archives(reader, archives, q)
    ids = {e["detail"]["internal_id"] % (1 << 64) for e in events if "internal_id" in e["detail"]}
    if events or q.internal_id is not None:
        events += from_live(nsqd_http, q, ids)
    unique: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in events:  # one fact from two sources; rows of two nsqd in one file stay two
        unique.setdefault((e["time"], e["event"], e["where"], str(e["detail"].get("nsqd"))), e)
    return [unique[k] for k in sorted(unique)]  # the same order whichever engine read them
