"""The local engine: trace and replay in-process with pyarrow datasets, no JVM.

An interactive ``trace`` over a local archive is a Parquet scan: Hive directories prune
by topic/partition/date and the id predicates are pushed down to row-group statistics,
so a lookup reads a few footers and one row group. What rows mean (filters, dedupe key,
per-key position) comes from :mod:`nsqctl.pipeline.filters`, shared with the Spark path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.json as pj

from nsqctl.errors import ConfigError
from nsqctl.pipeline import filters as flt
from nsqctl.pipeline.schema import ARCHIVE_SCHEMA

#: Hive directories as written by the archive (``date`` compared as a date, as in Spark).
PARTITION_FIELDS = [
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("date", pa.date32()),
]
#: What a trace shows of an archived row (everything but the body).
TRACE_COLUMNS = [f.name for f in ARCHIVE_SCHEMA if f.name != "body"] + ["date"]


def _root(source: str) -> Path:
    return Path(source.removeprefix("file://"))


def _partitioning(root: Path) -> ds.Partitioning:
    """The Hive fields below ``root`` (as Spark discovers them): a date directory or a
    file given as the archive has none, so it has no ``date`` column to prune on."""
    above = {part.partition("=")[0] for part in root.parts if "=" in part}
    fields = [f for f in PARTITION_FIELDS if f.name not in above]
    return ds.partitioning(pa.schema(fields), flavor="hive")


def open_archive(source: str) -> ds.Dataset:
    """The archive under ``source`` (a directory or one Parquet file)."""
    path = _root(source)
    if not path.exists():
        raise ConfigError(f"archive {source} does not exist: give an archive directory")
    try:
        dataset = ds.dataset(
            str(path),
            format="parquet",
            partitioning=_partitioning(path),
            exclude_invalid_files=False,
            ignore_prefixes=[".", "_"],
        )
    except (pa.ArrowInvalid, OSError) as err:
        raise ConfigError(f"cannot read the archive at {source}: {_first_line(err)}") from err
    if not dataset.files:
        # else the first filter fails on a column no file has, in pyarrow's words
        raise ConfigError(
            f"no archive files under {source}: give the directory an archive was written to"
        )
    flt.check_archive_columns(source, dataset.schema.names)
    return dataset


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _scan(
    dataset: ds.Dataset, columns: list[str], row_filter: flt.RowFilter, source: str
) -> pa.Table:
    """The rows of the archive at ``source`` that ``row_filter`` takes; a file that cannot
    be read is bad input, named as :func:`open_archive` names it (and as Spark's is)."""
    present = set(dataset.schema.names) | {"__filename"}
    try:
        return dataset.to_table(
            columns=[c for c in columns if c in present],
            filter=flt.to_arrow(row_filter, dataset.schema.names),
        )
    except (pa.ArrowInvalid, OSError) as err:
        raise ConfigError(f"cannot read the archive at {source}: {_first_line(err)}") from err


# --------------------------------------------------------------------------- trace


class LocalReader:
    """Rows for ``trace`` (see :class:`nsqctl.pipeline.trace.Reader`)."""

    engine = "local"

    def archive_rows(self, paths: list[str], row_filter: flt.RowFilter) -> list[dict[str, Any]]:
        """Two passes: the filter's own columns find the files and ids (a trace id is not
        sorted, so its lookup reads that column everywhere), then only those files are
        read in full, where the ids' statistics leave one row group each."""
        rows: list[dict[str, Any]] = []
        for path in paths:
            hits = _scan(open_archive(path), ["internal_id", "__filename"], row_filter, path)
            if not hits.num_rows:
                continue
            files = sorted(set(hits.column("__filename").to_pylist()))
            root = _root(path)
            found = ds.dataset(
                files,
                format="parquet",
                partitioning=_partitioning(root),
                partition_base_dir=str(root),
            )
            ids = tuple(pc.unique(hits.column("internal_id")).to_pylist())
            narrowed = (*row_filter, flt.Cmp("internal_id", "in", ids))
            for row in _scan(found, [*TRACE_COLUMNS, "__filename"], narrowed, path).to_pylist():
                row["_file"] = os.path.abspath(row.pop("__filename"))  # as Spark names it
                rows.append(row)
        return rows

    def log_rows(self, paths: list[str], row_filter: flt.RowFilter) -> list[dict[str, Any]]:
        expr = flt.to_arrow(row_filter)
        rows: list[dict[str, Any]] = []
        for path in paths:
            table = read_trace_log(path)
            rows += (table.filter(expr) if expr is not None else table).to_pylist()
        return rows


def read_trace_log(path: str) -> pa.Table:
    """A JSONL trace log with :data:`TRACE_LOG_FIELDS`' types. A line that is not JSON
    (the torn last line of a killed writer) is skipped, as Spark's permissive reader does."""
    from nsqctl.pipeline.trace import trace_log_arrow_schema

    schema = trace_log_arrow_schema()
    file = Path(path)
    if not file.exists():
        raise ConfigError(f"trace log {path} does not exist: give a JSONL file")
    if not file.is_file():
        raise ConfigError(f"trace log {path} is not a file: give a JSONL file")
    if file.stat().st_size == 0:
        return schema.empty_table()
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        return pj.read_json(str(file), parse_options=options)
    except pa.ArrowInvalid:
        pass
    records = []
    lines = 0
    with file.open("rb") as fh:
        for line in fh:
            lines += bool(line.strip())
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append({name: record.get(name) for name in schema.names})
    if lines > 1 and not records:
        # one torn line is a writer killed at its first record; more, and none of them
        # JSON, is another kind of file, and "not found" in it would mislead
        raise ConfigError(
            f"trace log {path} holds no JSON record: give the JSONL file a trace log was written to"
        )
    try:
        return pa.Table.from_pylist(records, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as err:
        raise ConfigError(f"cannot read the trace log {path}: {_first_line(err)}") from err


# --------------------------------------------------------------------------- replay


@dataclass
class Planned:
    """A replay's rows: ``matching`` before de-duplication, ``ordered`` after it, sorted
    by (key, position) so each key's messages go out in order."""

    matching: int
    ordered: pa.Table  # _key, _o1, _o2, _o3, body

    def counts(self) -> dict[str, int]:
        n = self.ordered.num_rows
        keys = pc.count_distinct(self.ordered.column("_key")).as_py() if n else 0
        return {
            "matching": self.matching,
            "to_publish": n,
            "duplicates": self.matching - n,
            "keys": keys,
        }

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """(key, o1, o2, o3, body) tuples, in order, a batch of columns at a time."""
        for batch in self.ordered.to_batches(max_chunksize=10_000):
            yield from zip(*(c.to_pylist() for c in batch.columns), strict=True)


def archive_plan(source: str, filters: Any, shard_field: str | None) -> Planned:
    """Filter, de-duplicate and order an archive as ``replay.archive_frame`` does in Spark."""
    from nsqctl.pipeline.replay import check_grep

    check_grep(filters)
    if filters.where:
        raise ConfigError("`where` is a Spark SQL predicate: use `engine` spark for it")
    columns = ["topic", "partition", "nsqd", "internal_id", "timestamp", "offset", "body"]
    if shard_field:
        columns.append("ext")
    table = _scan(
        open_archive(source), columns, flt.replay_filter(filters), source
    ).combine_chunks()
    original = pc.less(table.column("partition"), 0)
    node = pc.if_else(original, table.column("nsqd"), pa.scalar("", pa.string()))
    table = table.append_column(flt.NODE_COLUMN, node)
    if shard_field:
        ext, body = table.column("ext").to_pylist(), table.column("body").to_pylist()
        key = pa.array(
            [
                flt.json_field(e, shard_field) or flt.json_field(b, shard_field) or ""
                for e, b in zip(ext, body, strict=True)
            ],
            pa.string(),
        )
        positions = [_col(table, name) for name in flt.POSITION["shard_field"]]
    else:
        parts = [table.column(c).cast(pa.string()) for c in flt.KEY_COLUMNS]
        key = pc.binary_join_element_wise(*parts, "/", null_handling="skip")
        positions = [
            pc.if_else(original, _col(table, o), _col(table, r))
            for o, r in zip(flt.POSITION["original"], flt.POSITION["redesign"], strict=True)
        ]
    keys = pa.table(
        dict(zip(flt.ORDER_COLUMNS, [key, *positions], strict=True))
        | {c: table[c] for c in flt.DEDUPE_KEY}
    )
    # Sorted by position, then by identity: the copies of one message (same identity, so
    # the same position) end up next to each other, and all but the first are dropped.
    # The bodies are taken once, at the end, in that order.
    order = pc.sort_indices(keys, [(c, "ascending") for c in keys.column_names])
    keep = pc.filter(order, _first_copies(keys.take(order)))
    ordered = keys.select(list(flt.ORDER_COLUMNS)).append_column("body", table["body"])
    ordered = ordered.take(keep)
    return Planned(table.num_rows, ordered)


def _col(table: pa.Table, name: str | None) -> Any:
    """A position column as int64, null as 0 (None: the constant 0)."""
    if name is None:
        return pa.array([0] * table.num_rows, pa.int64())
    return pc.fill_null(table.column(name).cast(pa.int64()), 0)


def _first_copies(plan: pa.Table) -> pa.Array:
    """True for each row whose :data:`filters.DEDUPE_KEY` differs from the row before
    (null equals null, as in Spark's dropDuplicates)."""
    n = plan.num_rows
    if n == 0:
        return pa.array([], pa.bool_())
    changed = pa.array([False] * (n - 1))
    for name in flt.DEDUPE_KEY:
        column = plan.column(name).combine_chunks()
        this, before = column.slice(1), column.slice(0, n - 1)
        differs = pc.fill_null(pc.not_equal(this, before), False)
        one_null = pc.xor(pc.is_null(this), pc.is_null(before))
        changed = pc.or_(changed, pc.or_(differs, one_null))
    return pa.concat_arrays([pa.array([True]), changed])


def text_plan(source: str, filters: Any, shard_field: str | None = None) -> Planned:
    """nsq_to_file output: one ordering key per file, in line order; with ``shard_field``
    one key per value of that field of the (JSON) line, in file then line order."""
    from nsqctl.pipeline.replay import check_grep, check_text_filters
    from nsqctl.pipeline.textinput import read_bodies, text_files

    check_text_filters(filters)
    check_grep(filters)
    if filters.where:
        raise ConfigError("`where` is a Spark SQL predicate: use `engine` spark for it")
    files, indexes, lines, bodies = [], [], [], []
    for index, path in enumerate(text_files(source)):
        for number, body in read_bodies(path):
            files.append(path)
            indexes.append(index)
            lines.append(number)
            bodies.append(body)
    table = pa.table(
        {
            "file": pa.array(files, pa.string()),
            "file_index": pa.array(indexes, pa.int64()),
            "line": pa.array(lines, pa.int64()),
            "body": pa.array(bodies, pa.binary()),
        }
    )
    expr = flt.to_arrow(flt.text_filter(filters))
    matching = table.filter(expr) if expr is not None else table
    zero = pa.array([0] * matching.num_rows, pa.int64())
    if shard_field:
        keys = [flt.json_field(b, shard_field) or "" for b in matching["body"].to_pylist()]
        order = [pa.array(keys, pa.string()), matching["file_index"], matching["line"]]
    else:
        order = [matching["file"], matching["line"], zero]
    ordered = pa.table(
        dict(zip(flt.ORDER_COLUMNS, [*order, zero], strict=True)) | {"body": matching["body"]}
    )
    # Lines come in (file, line) order, but neither the field's values nor the file paths
    # (files are read in the order nsq_to_file wrote them) do: sort into (key, position).
    ordered = ordered.take(pc.sort_indices(ordered, [(c, "ascending") for c in flt.ORDER_COLUMNS]))
    return Planned(matching.num_rows, ordered)


def publish(
    planned: Planned,
    target: Any,
    checkpoint_dir: str | None,
    progress: Callable[[int], None] | None = None,
) -> Any:
    """Publish a plan in-process, key after key in order (one producer: the same batches,
    shard keys and checkpoint positions as the Spark executors'); a ReplayResult.
    ``progress`` hears the count published so far after each batch."""
    import asyncio

    from nsqctl.pipeline.checkpoint import KeyCheckpoint
    from nsqctl.pipeline.replay import ReplayResult, publish_rows

    ckpt = KeyCheckpoint(checkpoint_dir)
    stats = asyncio.run(publish_rows(target, ckpt, target.rate, planned.rows(), progress))
    return ReplayResult(stats["published"], stats["skipped"], stats["batches"], tasks=1)
