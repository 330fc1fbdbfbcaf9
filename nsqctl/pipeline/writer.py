"""Buffer archive rows in memory and write them as Parquet files, atomically and durably.

A file is written under a temporary name, fsynced, renamed into place and its directory
fsynced; only then does :meth:`ArchiveWriter.write` return. The archiver acknowledges
(FINs) the messages of a batch after that, so a crash at any moment loses nothing that
was acknowledged: at worst a batch is written and redelivered (a duplicate).
"""

from __future__ import annotations

import datetime as dt
import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from nsqctl.errors import ArchiveWriteError
from nsqctl.pipeline.rotation import RotationPolicy
from nsqctl.pipeline.schema import ArchivableMessage, date_of, message_table

TMP_PREFIX = ".tmp-"


M = TypeVar("M", bound=ArchivableMessage)


class ArchiveBuffer(Generic[M]):
    """Messages waiting for the next rotation; they are also the tokens to acknowledge
    once on disk. Adding one is an append (the consume loop's hot path): the columns are
    built once per file, by :meth:`ArchiveWriter.write` in the writer thread."""

    def __init__(self) -> None:
        self.messages: list[M] = []
        self.bytes = 0
        self.started: float | None = None

    @property
    def rows(self) -> int:
        return len(self.messages)

    def add(self, msg: M) -> None:
        if not self.messages:
            self.started = time.monotonic()
        self.messages.append(msg)
        self.bytes += 64 + len(msg.raw.body)

    def due(self, policy: RotationPolicy, now: float | None = None) -> bool:
        if not self.messages:
            return False
        if len(self.messages) >= policy.max_rows or self.bytes >= policy.max_bytes:
            return True
        now = time.monotonic() if now is None else now
        return self.started is not None and now - self.started >= policy.max_age

    def age(self, now: float | None = None) -> float:
        if self.started is None:
            return 0.0
        return (time.monotonic() if now is None else now) - self.started


def _groups(table: pa.Table) -> list[tuple[tuple[int, str], pa.Table]]:
    """Split a batch by (partition, date); nearly always one group, found without a scan
    in Python."""
    partitions = pc.min_max(table.column("partition")).as_py()
    stamps = pc.min_max(table.column("timestamp")).as_py()
    first, last = date_of(stamps["min"]), date_of(stamps["max"])
    if partitions["min"] == partitions["max"] and first == last:
        return [((partitions["min"], first), table)]
    rows: dict[tuple[int, str], list[int]] = {}
    keys = zip(
        table.column("partition").to_pylist(), table.column("timestamp").to_pylist(), strict=True
    )
    for i, (partition, stamp) in enumerate(keys):
        rows.setdefault((partition, date_of(stamp)), []).append(i)
    return [(key, table.take(rows[key])) for key in sorted(rows)]


#: Rows per row group: a lookup by id reads one group's columns (min/max statistics on
#: the sorted ids rule out the others), and 16k rows keep that ~1-2 MB for small bodies.
ROW_GROUP_ROWS = 16_384
#: Sorted within a file, so each row group covers a narrow id range and pruning works.
SORT_KEYS = [("partition", "ascending"), ("internal_id", "ascending")]
#: Bloom filters, written where pyarrow's writer has ``bloom_filter_options`` (26 here
#: does): Spark's Parquet reader uses them to skip row groups for an id inside a group's
#: min/max range; pyarrow's own scanner does not read them (its pushdown uses statistics
#: only), so the local engine relies on the sort.
BLOOM_COLUMNS = ("internal_id", "trace_id")
BLOOM_FPP = 0.01


def _bloom_supported() -> bool:
    import inspect

    return "bloom_filter_options" in inspect.signature(pq.ParquetWriter.__init__).parameters


BLOOM_SUPPORTED = _bloom_supported()


def write_parquet(table: pa.Table, where: Any, compression: str = "zstd") -> None:
    """One archive file made for cheap lookups: rows sorted by (partition, internal id),
    small row groups, statistics and a page index on every column, bloom filters on the
    id columns where pyarrow can write them."""
    table = table.sort_by(SORT_KEYS)
    options: dict[str, Any] = {}
    if BLOOM_SUPPORTED:
        ndv = max(table.num_rows, 1)
        options["bloom_filter_options"] = {
            name: {"ndv": ndv, "fpp": BLOOM_FPP} for name in BLOOM_COLUMNS
        }
    pq.write_table(
        table,
        where,
        compression=compression,
        row_group_size=ROW_GROUP_ROWS,
        write_statistics=True,
        write_page_index=True,
        sorting_columns=list(pq.SortingColumn.from_ordering(table.schema, SORT_KEYS)),
        **options,
    )


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ArchiveWriter:
    """Writes buffered groups under ``out/topic=T/partition=P/date=D/``."""

    def __init__(self, out_dir: str | Path, *, compression: str = "zstd", fsync: bool = True):
        self.out_dir = Path(out_dir)
        self.compression = compression
        self.fsync = fsync
        self.files_written = 0
        self.rows_written = 0
        self._run = uuid.uuid4().hex[:8]
        self._seq = 0

    def write(self, buffer: ArchiveBuffer[M]) -> list[Path]:
        """Write every group of ``buffer`` durably; returns the final paths."""
        now = dt.datetime.now(dt.UTC)
        paths: list[Path] = []
        if not buffer.rows:
            return paths
        table = message_table(buffer.messages, now)
        try:
            for (partition, date), group in _groups(table):
                topic = group.column("topic")[0].as_py()
                paths.append(self._write_group(topic, partition, date, group, now))
        except OSError as err:
            raise ArchiveWriteError(
                f"cannot write the archive under {self.out_dir}: {err}; "
                "the buffered messages were not acknowledged"
            ) from err
        self.rows_written += buffer.rows
        return paths

    def _write_group(
        self, topic: str, partition: int, date: str, table: pa.Table, now: dt.datetime
    ) -> Path:
        directory = self.out_dir / f"topic={topic}" / f"partition={partition}" / f"date={date}"
        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        self._seq += 1
        name = f"part-{now:%Y%m%dT%H%M%S}-{self._run}-{self._seq:06d}.parquet"
        tmp = directory / f"{TMP_PREFIX}{name}"
        final = directory / name
        with open(tmp, "wb") as fh:
            write_parquet(table, fh, self.compression)
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, final)
        if self.fsync:
            _fsync_dir(directory)
            if created:  # the new directories' entries must be durable too
                for parent in list(directory.parents)[:3]:
                    _fsync_dir(parent)
        self.files_written += 1
        return final


def remove_stale_tmp(out_dir: str | Path) -> int:
    """Delete temporary files a killed archiver left behind (never acknowledged)."""
    removed = 0
    for path in Path(out_dir).rglob(f"{TMP_PREFIX}*"):
        path.unlink(missing_ok=True)
        removed += 1
    return removed


def archive_files(out_dir: str | Path) -> Iterable[Path]:
    """Final Parquet files of an archive (temporary files excluded)."""
    return sorted(p for p in Path(out_dir).rglob("*.parquet") if not p.name.startswith(TMP_PREFIX))
