"""The one definition of what trace and replay select, de-duplicate and order, compiled to
both engines: a pyarrow.compute expression (local engine) and a Spark Column.

A filter is a tuple of small predicates (:class:`Cmp`, :class:`Grep`, :class:`LowerEq`),
all of which must hold. Each engine only translates them mechanically, so the meaning of
``--since``/``--topic``/an id lives here once and cannot drift between engines. The same
goes for replay's de-duplication key and its per-key position (:data:`DEDUPE_KEY`,
:data:`POSITION`). Neither pyarrow nor pyspark is imported until a compiler is called.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nsqctl.errors import ConfigError
from nsqctl.jsonfield import MISSING, get_field
from nsqctl.pipeline.schema import (
    NO_PARTITION,
    original_id_time_ns,
    partition_of_id,
    to_signed64,
)
from nsqctl.pipeline.selection import ReplayFilters, TraceQuery

if TYPE_CHECKING:
    import pyarrow.compute as pc
    from pyspark.sql import Column


@dataclass(frozen=True)
class Cmp:
    """``column op value``; ``unsigned``: the value is a uint64 id as trace logs hold it.
    ``prune``: implied by the other predicates, there only to skip directories; left out
    where the source has no such column (a date directory or one file given)."""

    column: str
    op: str  # "==", ">=", "<", "<=", "in"
    value: Any
    unsigned: bool = False
    prune: bool = False


@dataclass(frozen=True)
class Grep:
    """The body, read as UTF-8 text, matches a regex somewhere (RE2 locally, Java regex in
    Spark: the same for the usual patterns; lookarounds and backreferences are Spark's)."""

    pattern: str


@dataclass(frozen=True)
class LowerEq:
    """``lower(column) == value`` on a text column (trace logs' hex message ids)."""

    column: str
    value: str


@dataclass(frozen=True)
class Never:
    """Matches nothing (a query without any id)."""


Predicate = Cmp | Grep | LowerEq | Never
RowFilter = tuple[Predicate, ...]

# --------------------------------------------------------------------------- what to match


def _date(op: str, ns: int, days: int = 0) -> Cmp:
    """A bound on the Hive ``date`` directory (UTC day of ``ns``, moved by ``days``)."""
    day = dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).date() + dt.timedelta(days=days)
    return Cmp("date", op, day, prune=True)


def replay_filter(f: ReplayFilters) -> RowFilter:
    """Archive rows a replay takes. ``date`` is the Hive directory: it prunes files."""
    preds: list[Predicate] = []
    if f.since_ns is not None:
        preds += [Cmp("timestamp", ">=", f.since_ns), _date(">=", f.since_ns)]
    if f.until_ns is not None:
        preds += [Cmp("timestamp", "<", f.until_ns), _date("<=", f.until_ns)]
    if f.topics:
        preds.append(Cmp("topic", "in", tuple(f.topics)))
    if f.partitions:
        preds.append(Cmp("partition", "in", tuple(f.partitions)))
    if f.trace_id is not None:
        preds.append(Cmp("trace_id", "==", to_signed64(f.trace_id)))
    if f.grep:
        preds.append(Grep(f.grep))
    return tuple(preds)


def text_filter(f: ReplayFilters) -> RowFilter:
    """nsq_to_file lines: only the body can be filtered."""
    return (Grep(f.grep),) if f.grep else ()


def _id_preds(q: TraceQuery, *, unsigned: bool) -> list[Predicate]:
    """A trace id alone matches its trace, an internal id alone matches it (in every topic:
    --topic narrows), and a 16-byte message id matches both at once (an internal id is
    unique per topic only, and other messages may carry the same trace id)."""
    if q.internal_id is None and q.trace_id is None:
        return [Never()]
    preds: list[Predicate] = []
    for column, value in (("internal_id", q.internal_id), ("trace_id", q.trace_id)):
        if value is not None:
            v = value if unsigned else to_signed64(value)
            preds.append(Cmp(column, "==", v, unsigned=unsigned))
    return preds


def archive_filter(q: TraceQuery) -> RowFilter:
    """Archive rows of the queried message. Archives hold ids as signed int64. A 16-hex id
    is an original-family id: its internal id is that hex as a number, on a row of the
    original family (partition -1), which says the same as comparing the id text but
    prunes row groups by the statistics on ``internal_id``; and nsqd made it at the time
    it encodes, so only the date directories a day either side of that are read. A
    redesign internal id above partition 0's range names its partition (cluster mode
    starts partition p's ids at p << 50): only that partition's directories (and the
    original family's) are read."""
    if q.message_id is not None:
        assert q.internal_id is not None
        made = original_id_time_ns(q.internal_id)
        preds: list[Predicate] = [
            Cmp("internal_id", "==", to_signed64(q.internal_id)),
            Cmp("partition", "==", -1),
            _date(">=", made, -1),
            _date("<=", made, +1),
        ]
    else:
        preds = _id_preds(q, unsigned=False)
        part = None if q.internal_id is None else partition_of_id(q.internal_id)
        if part:  # cluster mode (standalone ids never reach 1 << 50): that partition's dirs
            preds.append(Cmp("partition", "in", (NO_PARTITION, part), prune=True))
    if q.topic:
        preds.append(Cmp("topic", "==", q.topic))
    return tuple(preds)


def log_filter(q: TraceQuery) -> RowFilter:
    """Trace-log records of the queried message; logs hold ids unsigned, and the original
    family's id as the hex text received."""
    preds: list[Predicate] = (
        [LowerEq("id", q.message_id)] if q.message_id else _id_preds(q, unsigned=True)
    )
    if q.topic:
        preds.append(Cmp("topic", "==", q.topic))
    return tuple(preds)


# --------------------------------------------------------------------------- dedupe, order

#: The original family's ids are unique per nsqd only: its node is part of the identity.
NODE_COLUMN = "_node"
#: One archived message, however many times it was written (a redelivery after a kill).
DEDUPE_KEY = ("topic", "partition", NODE_COLUMN, "internal_id")
#: Without --shard-field a replay keeps order per source partition (per nsqd on the
#: original family): the key is these columns joined by "/" (nulls left out).
KEY_COLUMNS = ("topic", "partition", NODE_COLUMN)
#: A row's position within its key, compared as a tuple: original family (no offsets; its
#: ids are per-nsqd sequence numbers), redesign (the partition's id/queue order), and by
#: --shard-field (publish time across partitions). None is 0; null values count as 0.
POSITION = {
    "original": ("timestamp", "internal_id", None),
    "redesign": ("internal_id", "offset", "timestamp"),
    "shard_field": ("timestamp", "internal_id", "partition"),
}
ORDER_COLUMNS = ("_key", "_o1", "_o2", "_o3")

#: The columns every archive file holds that replay and trace cannot do without: a Parquet
#: file lacking one was not written by ``nsqctl archive``, and is refused as such rather
#: than failing later in the engine's own words (a traceback locally, a query error in
#: Spark).
ARCHIVE_CORE_COLUMNS = ("topic", "partition", "nsqd", "internal_id", "timestamp", "body")


def check_archive_columns(source: str, columns: Collection[str]) -> None:
    """A one-line :class:`ConfigError` when ``source`` lacks an archive's core columns."""
    missing = [c for c in ARCHIVE_CORE_COLUMNS if c not in columns]
    if missing:
        raise ConfigError(
            f"{source} is not an nsqctl archive: it has no {', '.join(missing)} column"
            f"{'s' if len(missing) > 1 else ''}: give the directory (or a file) an archive was "
            "written to"
        )


def spark_json_path(shard_field: str) -> str:
    """``user.id`` → ``$.user.id`` (Spark's ``get_json_object``)."""
    return f"$.{shard_field}"


def json_field(text: bytes | str | None, shard_field: str) -> str | None:
    """The local engine's ``get_json_object``: a string value as is, any other value as
    compact JSON, None when absent, null or not JSON."""
    if not text:
        return None
    try:
        value: Any = json.loads(text)
    except ValueError:
        return None
    value = get_field(value, shard_field)
    if value is MISSING or value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


# --------------------------------------------------------------------------- compilers


def _applicable(row_filter: RowFilter, columns: Collection[str] | None) -> RowFilter:
    """Pruning-only predicates on columns the source lacks are left out."""
    if columns is None:
        return row_filter
    return tuple(
        p for p in row_filter if not (isinstance(p, Cmp) and p.prune and p.column not in columns)
    )


def to_arrow(row_filter: RowFilter, columns: Collection[str] | None = None) -> pc.Expression | None:
    """The filter as a pyarrow.compute expression (None: everything); ``columns``: the
    source's, when known."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def literal(p: Cmp) -> Any:
        if isinstance(p.value, tuple):
            return list(p.value)
        return pa.scalar(p.value, pa.uint64()) if p.unsigned else p.value

    expr = None
    for p in _applicable(row_filter, columns):
        if isinstance(p, Never):
            e = pc.scalar(False)
        elif isinstance(p, Grep):
            text = pc.field("body").cast(pa.string(), safe=False)  # no UTF-8 check: as Spark
            e = pc.match_substring_regex(text, pattern=p.pattern)
        elif isinstance(p, LowerEq):
            e = pc.utf8_lower(pc.field(p.column)) == p.value
        elif p.op == "in":
            e = pc.field(p.column).isin(literal(p))
        else:
            e = _compare(pc.field(p.column), p.op, literal(p))
        expr = e if expr is None else expr & e
    return expr


def to_spark(row_filter: RowFilter, columns: Collection[str] | None = None) -> Column:
    """The filter as a Spark Column (lit(True): everything); ``columns``: the source's,
    when known."""
    from decimal import Decimal

    from pyspark.sql import functions as F

    def literal(p: Cmp) -> Any:
        if p.unsigned:  # trace logs are read with ids as decimal(20,0)
            return F.lit(Decimal(p.value)).cast("decimal(20,0)")
        return F.lit(p.value)

    cond = F.lit(True)
    for p in _applicable(row_filter, columns):
        if isinstance(p, Never):
            e = F.lit(False)
        elif isinstance(p, Grep):
            e = F.col("body").cast("string").rlike(p.pattern)
        elif isinstance(p, LowerEq):
            e = F.lower(F.col(p.column).cast("string")) == F.lit(p.value)
        elif p.op == "in":
            e = F.col(p.column).isin(list(p.value))
        else:
            e = _compare(F.col(p.column), p.op, literal(p))
        cond = cond & e
    return cond


def _compare(column: Any, op: str, value: Any) -> Any:
    if op == "==":
        return column == value
    if op == ">=":
        return column >= value
    if op == "<":
        return column < value
    if op == "<=":
        return column <= value
    raise ValueError(f"unknown comparison {op!r}")
