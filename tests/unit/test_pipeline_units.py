# ruff: noqa: E402
"""Pipeline pieces without servers or Spark: id mapping, writer, text input, parsing."""

from __future__ import annotations

import datetime as dt
import gzip
import os
from pathlib import Path
from typing import TypedDict, Unpack

import pytest

# the spark extra (pyspark, pyarrow), imported outright: without it this module fails to
# collect rather than skip. The core install's run (`pytest -m "not spark"`) leaves it
# out (tests/conftest.py, SPARK_ONLY_MODULES).
pytestmark = pytest.mark.spark
import pyarrow.dataset as ds

from nsqctl.errors import ConfigError
from nsqctl.pipeline import checkpoint
from nsqctl.pipeline.rotation import RotationPolicy
from nsqctl.pipeline.schema import (
    NO_PARTITION,
    OfflineMessage,
    date_of,
    internal_id_from_hex,
    message_table,
    to_signed64,
)
from nsqctl.pipeline.server_replay import HistoryOptions, history_producer
from nsqctl.pipeline.spark import java_major, resolve_master
from nsqctl.pipeline.textinput import read_bodies, text_files
from nsqctl.pipeline.trace import parse_query
from nsqctl.pipeline.writer import (
    ArchiveBuffer,
    ArchiveWriter,
    archive_files,
    remove_stale_tmp,
)
from nsqctl.protocol.raw_message import RawMessage
from nsqctl.timeparse import parse_time_ns


def test_original_id_maps_to_signed_int64() -> None:
    assert internal_id_from_hex("18a381c98ba69000") == 0x18A381C98BA69000
    assert internal_id_from_hex(b"ffffffffffffffff") == -1
    assert to_signed64(2**64 - 2) == -2
    assert to_signed64(None) is None


def test_date_of_is_utc() -> None:
    assert date_of(0) == "1970-01-01"
    assert date_of(86_400 * 10**9 - 1) == "1970-01-01"
    assert date_of(1_700_000_000 * 10**9) == "2023-11-14"


class RawFields(TypedDict, total=False):
    """The fields of a message a test sets itself."""

    id: bytes
    internal_id: int
    trace_id: int
    ext_version: int
    ext_header: bytes
    offset: int
    size: int


def _msg(partition: int | None, i: int, ts: int, **fields: Unpack[RawFields]) -> OfflineMessage:
    raw = RawMessage(ts, 1, b"%016x" % i, b"body-%d" % i)._replace(**fields)
    return OfflineMessage(raw, "t", "ch", partition, "127.0.0.1:1")


def test_writer_groups_by_partition_and_date_atomically(tmp_path: Path) -> None:
    buf: ArchiveBuffer[OfflineMessage] = ArchiveBuffer()
    day = 86_400 * 10**9
    msgs = [_msg(i % 2, i, i // 5 * day) for i in range(10)]
    for msg in msgs:
        buf.add(msg)
    (tmp_path / "topic=t").mkdir()
    (tmp_path / "topic=t" / ".tmp-part-x.parquet").write_bytes(b"half")
    assert remove_stale_tmp(tmp_path) == 1
    paths = ArchiveWriter(tmp_path).write(buf)
    assert len(paths) == 4
    assert buf.messages == msgs
    rels = sorted(str(p.parent.relative_to(tmp_path)) for p in paths)
    assert rels[0] == "topic=t/partition=0/date=1970-01-01"
    assert rels[-1] == "topic=t/partition=1/date=1970-01-02"
    assert not [p for p in tmp_path.rglob(".tmp-*")]
    table = ds.dataset(tmp_path, format="parquet", partitioning="hive").to_table()
    assert sorted(table.column("body").to_pylist()) == sorted(b"body-%d" % i for i in range(10))
    assert len(list(archive_files(tmp_path))) == 4
    for row in table.to_pylist():  # every row landed in the directory its values name
        assert row["partition"] == row["internal_id"] % 2
        assert row["date"] == date_of(row["timestamp"])


def test_message_table_columns_both_families() -> None:
    now = dt.datetime(2024, 1, 2, tzinfo=dt.UTC)
    original = message_table([_msg(None, 7, 5), _msg(None, 2**64 - 1, 6)], now)
    assert original.column("internal_id").to_pylist() == [7, -1]
    assert original.column("partition").to_pylist() == [NO_PARTITION, NO_PARTITION]
    assert original.column("trace_id").to_pylist() == [None, None]
    assert original.column("archived_at").to_pylist() == [now, now]
    redesign = message_table(
        [
            _msg(
                3,
                0,
                5,
                id=b"\x00" * 16,
                internal_id=2**64 - 2,
                trace_id=9,
                offset=10,
                size=20,
                ext_header=b'{"a":1}',
            )
        ],
        now,
    )
    row = redesign.to_pylist()[0]
    assert (row["internal_id"], row["trace_id"], row["offset"], row["size"]) == (-2, 9, 10, 20)
    assert (row["partition"], row["ext"], row["nsqd"]) == (3, '{"a":1}', "127.0.0.1:1")


def test_redesign_rows_trace_id_null_when_untraced_and_partition_from_id() -> None:
    """A batch mixing traced and untraced messages (trace id 0 on the wire) stores null for
    the untraced ones, as a batch of untraced ones does; without a subscribed partition
    (``--nsqd`` only) a redesign row takes nsqd's partition of its id (bits 50-59)."""
    now = dt.datetime(2024, 1, 2, tzinfo=dt.UTC)
    iid = (5 << 50) + 7
    mixed = [
        _msg(3, 1, 5, id=b"\x00" * 16, internal_id=1, trace_id=9),
        _msg(3, 2, 5, id=b"\x00" * 16, internal_id=2, trace_id=0),
        _msg(None, 3, 5, id=b"\x00" * 16, internal_id=iid, trace_id=0),
    ]
    table = message_table(mixed, now)
    assert table.column("trace_id").to_pylist() == [9, None, None]
    assert table.column("partition").to_pylist() == [3, 3, 5]


def test_rotation_due_by_rows_bytes_and_age() -> None:
    buf: ArchiveBuffer[OfflineMessage] = ArchiveBuffer()
    policy = RotationPolicy(max_rows=3, max_bytes=10**9, max_age=100.0)
    assert not buf.due(policy)
    for i in range(2):
        buf.add(_msg(None, i, 0))
    assert buf.started is not None
    assert not buf.due(policy, now=buf.started)
    assert buf.due(RotationPolicy(max_rows=99, max_bytes=10, max_age=100.0))
    assert buf.due(RotationPolicy(max_rows=99, max_bytes=10**9, max_age=1.0), now=buf.started + 2)
    buf.add(_msg(None, 2, 0))
    assert buf.due(policy, now=buf.started)


def test_text_input_plain_and_gzip_by_magic(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"one\ntwo\nthree")
    with gzip.open(tmp_path / "b.renamed", "wb") as fh:
        fh.write(b"x\ny\n")
    assert list(read_bodies(tmp_path / "a.log")) == [(0, b"one"), (1, b"two"), (2, b"three")]
    assert list(read_bodies(tmp_path / "b.renamed")) == [(0, b"x"), (1, b"y")]
    assert len(text_files(tmp_path)) == 2
    with pytest.raises(ConfigError):
        text_files(tmp_path / "missing")


def test_parse_query_forms() -> None:
    assert parse_query("42").trace_id == 42
    assert parse_query("42", internal=True).internal_id == 42
    q = parse_query("18A381C98BA69000")
    assert q.message_id == "18a381c98ba69000" and q.internal_id == 0x18A381C98BA69000
    q = parse_query("00000000000000070000000000000009")
    assert (q.internal_id, q.trace_id) == (7, 9)
    with pytest.raises(ConfigError):
        parse_query("not-an-id")


def test_parse_time_and_java_version() -> None:
    assert parse_time_ns("10") == 10 * 10**9
    assert parse_time_ns("1970-01-02T00:00:00") == 86_400 * 10**9
    with pytest.raises(ConfigError):
        parse_time_ns("yesterday-ish")
    assert java_major('openjdk version "17.0.15" 2025-04-15') == 17
    assert java_major('java version "1.8.0_292"') == 8
    assert java_major("garbage") is None


def test_master_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_MASTER", "local[3]")
    assert resolve_master(None) == "local[3]"
    assert resolve_master("local[1]") == "local[1]"
    monkeypatch.delenv("SPARK_MASTER")
    assert resolve_master(None) == "local[*]"


def test_checkpoint_resume_and_mismatch(tmp_path: Path) -> None:
    spec = {"source": "a", "to_topic": "b"}
    assert checkpoint.prepare(tmp_path, spec, restart=False) == 0
    ck = checkpoint.KeyCheckpoint(str(tmp_path))
    ck.advance("k", (1, 2, 3), 5)
    ck.advance("k", (4, 5, 6), 2)
    assert checkpoint.KeyCheckpoint(str(tmp_path)).position("k") == (4, 5, 6)
    assert checkpoint.acknowledged(tmp_path) == 7
    assert checkpoint.prepare(tmp_path, spec, restart=False) == 1
    with pytest.raises(ConfigError):
        checkpoint.prepare(tmp_path, {"source": "other"}, restart=False)
    assert checkpoint.prepare(tmp_path, spec, restart=True) == 0
    assert not os.listdir(tmp_path / "keys")


async def test_the_failover_window_bounds_the_target_side_of_a_history_replay() -> None:
    """A replay's failover window is how long a leaderless partition is waited for on
    both sides: the producer publishing to the target topic gets it too, not the
    library's default."""
    opts = HistoryOptions(
        topic="src", to_topic="dst", start="timestamp:0", nsqd=["127.0.0.1:1"], failover_window=7.5
    )
    producer = history_producer(opts)
    try:
        assert producer.options.failover_window == 7.5
    finally:
        await producer.close()


def test_an_input_file_the_executors_did_not_find_is_told_by_where_it_is(tmp_path: Path) -> None:
    """Spark's executors did not find a file the driver listed. Still here, under a
    cluster master: the executors do not read this disk, bad input (exit 2) that says
    where to put the archive. Gone here too, or under a local master (the executors read
    this disk): removed between listing and read, a runtime failure (exit 1), not the
    damaged-archive answer either way."""
    from nsqctl.errors import NsqctlError
    from nsqctl.pipeline.spark import missing_file_error

    here = tmp_path / "part-0.parquet"
    here.write_bytes(b"PAR1")
    uri = f"file://{here}"
    err = missing_file_error(
        uri, "spark://10.1.2.3:7077", "spark could not replay A", "cannot read A"
    )
    assert isinstance(err, ConfigError), err
    assert str(err).startswith(f"cannot read A: {here} is on this machine"), err
    assert "spark://10.1.2.3:7077" in str(err) and "local[*]" in str(err), err

    for master, path in (("local[2]", uri), ("spark://10.1.2.3:7077", f"file:{tmp_path}/gone")):
        err = missing_file_error(path, master, "spark could not replay A", "cannot read A")
        assert type(err) is NsqctlError, (master, err)
        assert "was removed while Spark read it" in str(err), err
        assert str(err).startswith("spark could not replay A: "), err

    # a file system only the executors can look at: nothing to check here, said as is
    err = missing_file_error("hdfs://nn/a/p.parquet", "yarn", "spark could not replay A", "x")
    assert type(err) is NsqctlError and "hdfs://nn/a/p.parquet was removed" in str(err), err
