"""The shared filter spec, the local engine, the engine choice, lookup-friendly archive
files and the trace timeline's layout, without servers or Spark (the engines are compared
row for row on real archives in tests/integration/test_pipeline_engines.py).

pyarrow is imported inside the tests: the core install (``-m "not spark"``) runs only the
layout tests here, which need neither.
"""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path
from typing import Any

import pytest

from nsqctl.cli.commands.trace import render_trace
from nsqctl.errors import ConfigError

spark_extra = pytest.mark.spark

T0 = 1_795_000_000 * 10**9  # 2026-11-18 UTC


def _write(out: Path, rows_per_partition: int = 3000, files: int = 3) -> None:
    """A redesign-style archive: 2 partitions, files written in reverse id order, every
    odd message traced, and the first ten of partition 1 archived twice."""
    from nsqctl.pipeline.schema import OfflineMessage
    from nsqctl.pipeline.writer import ArchiveBuffer, ArchiveWriter
    from nsqctl.protocol.raw_message import RawMessage

    writer = ArchiveWriter(out, fsync=False)

    def msg(i: int, part: int) -> OfflineMessage:
        iid = (part << 50) + i
        raw = RawMessage(
            T0 + i * 10**6,
            1,
            iid.to_bytes(8, "big") + bytes(8),
            b'{"k":"k%d","seq":%d}' % (i % 3, i),
            internal_id=iid,
            trace_id=1000 + i if i % 2 else 0,
            offset=i * 100,
            size=100,
        )
        return OfflineMessage(raw, "orders", "ch", part, "127.0.0.1:4150")

    per_file = rows_per_partition // files
    for part in (0, 1):
        for lo in range(0, rows_per_partition, per_file):
            buf: ArchiveBuffer[Any] = ArchiveBuffer()
            for i in reversed(range(lo, lo + per_file)):
                buf.add(msg(i, part))
            writer.write(buf)
    again: ArchiveBuffer[Any] = ArchiveBuffer()
    for i in range(10):
        again.add(msg(i, 1))
    writer.write(again)


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("filters") / "archive"
    _write(out)
    return out


@spark_extra
def test_writer_sorts_and_makes_lookup_friendly_files(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from nsqctl.pipeline import writer

    _write(tmp_path, rows_per_partition=40_000, files=1)
    files = sorted(tmp_path.rglob("*.parquet"), key=lambda p: p.stat().st_size)
    meta = pq.ParquetFile(files[-1]).metadata
    assert meta.num_rows == 40_000 and meta.num_row_groups == 3  # 16,384 rows a group
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    iid = names.index("internal_id")
    stats = [meta.row_group(g).column(iid).statistics for g in range(meta.num_row_groups)]
    ranges = [(s.min, s.max) for s in stats]
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))  # disjoint, ascending
    ids = pq.read_table(files[-1], columns=["internal_id"]).column(0).to_pylist()
    assert ids == sorted(ids)  # written in reverse: sorted by the writer
    group = meta.row_group(0)
    assert [s.column_index for s in group.sorting_columns] == [names.index("partition"), iid]
    if writer.BLOOM_SUPPORTED:
        for name in writer.BLOOM_COLUMNS:
            assert group.column(names.index(name)).bloom_filter_offset is not None, name


@spark_extra
@pytest.mark.parametrize(
    ("ident", "flags", "expect"),
    [
        (str((1 << 50) + 7), {"internal": True}, {(1, (1 << 50) + 7)}),
        (str(7), {"internal": True}, {(0, 7)}),
        ("1007", {}, {(0, 7), (1, (1 << 50) + 7)}),  # a trace id: both partitions have it
        (
            ((1 << 50) + 7).to_bytes(8, "big").hex() + (1007).to_bytes(8, "big").hex(),
            {},
            {(1, (1 << 50) + 7)},
        ),
        (((1 << 50) + 7).to_bytes(8, "big").hex() + (1008).to_bytes(8, "big").hex(), {}, set()),
        ("1007", {"topic": "other"}, set()),
    ],
)
def test_trace_filter_finds_exactly_the_message(
    archive: Path, ident: str, flags: dict[str, Any], expect: set[tuple[int, int]]
) -> None:
    from nsqctl.pipeline import filters as flt
    from nsqctl.pipeline.local import LocalReader
    from nsqctl.pipeline.trace import parse_query

    q = parse_query(ident, **flags)
    rows = LocalReader().archive_rows([str(archive)], flt.archive_filter(q))
    assert {(r["partition"], r["internal_id"]) for r in rows} == expect
    assert all(Path(r["_file"]).is_file() for r in rows)


@spark_extra
def test_original_hex_id_matches_only_original_rows() -> None:
    from nsqctl.pipeline import filters as flt
    from nsqctl.pipeline.trace import parse_query

    q = parse_query("18a381c98ba69000")  # made by nsqd on 2026-11-21 at 20:26:07 UTC
    assert flt.archive_filter(q) == (
        flt.Cmp("internal_id", "==", 0x18A381C98BA69000),
        flt.Cmp("partition", "==", -1),
        flt.Cmp("date", ">=", dt.date(2026, 11, 20), prune=True),
        flt.Cmp("date", "<=", dt.date(2026, 11, 22), prune=True),
    )
    assert flt.log_filter(q) == (flt.LowerEq("id", "18a381c98ba69000"),)
    first = flt.archive_filter(parse_query("ffffffffffffffff"))[0]
    assert isinstance(first, flt.Cmp) and first.value == -1  # signed
    # a redesign id above partition 0's range names its partition directory
    p3 = flt.archive_filter(parse_query(str((3 << 50) + 9), internal=True))
    assert p3 == (
        flt.Cmp("internal_id", "==", (3 << 50) + 9),
        flt.Cmp("partition", "in", (-1, 3), prune=True),
    )
    assert flt.archive_filter(parse_query("9", internal=True)) == (  # standalone: any
        flt.Cmp("internal_id", "==", 9),
    )


@spark_extra
def test_original_id_reads_only_the_days_around_its_time(tmp_path: Path) -> None:
    """An original id encodes when nsqd made it: a lookup opens the files of that day and
    the days either side, not the archive's other days."""
    from nsqctl.pipeline import filters as flt
    from nsqctl.pipeline.local import LocalReader, open_archive
    from nsqctl.pipeline.schema import GUID_TIMESTAMP_SHIFT, GUID_TWEPOCH, OfflineMessage
    from nsqctl.pipeline.trace import parse_query
    from nsqctl.pipeline.writer import ArchiveBuffer, ArchiveWriter
    from nsqctl.protocol.raw_message import RawMessage

    writer = ArchiveWriter(tmp_path, fsync=False)
    ids = []
    for day in range(10):
        ts = T0 + day * 86_400 * 10**9
        guid = ((ts >> 20) - GUID_TWEPOCH) << GUID_TIMESTAMP_SHIFT | 5 << 12 | day
        ids.append(b"%016x" % guid)
        buf: ArchiveBuffer[Any] = ArchiveBuffer()
        buf.add(
            OfflineMessage(
                RawMessage(ts, 1, ids[-1], b"day %d" % day), "t", "ch", None, "127.0.0.1:4150"
            )
        )
        writer.write(buf)
    q = parse_query(ids[4].decode())
    expr = flt.to_arrow(flt.archive_filter(q))
    assert len(list(open_archive(str(tmp_path)).get_fragments(filter=expr))) == 3
    rows = LocalReader().archive_rows([str(tmp_path)], flt.archive_filter(q))
    assert [r["id"] for r in rows] == [ids[4]]
    # a date directory given as the archive has no date column: the bound is left out
    (day_dir,) = {Path(r["_file"]).parent for r in rows}
    again = LocalReader().archive_rows([str(day_dir)], flt.archive_filter(q))
    assert [r["id"] for r in again] == [ids[4]]


@spark_extra
def test_replay_plan_filters_dedupes_and_orders(archive: Path) -> None:
    from nsqctl.pipeline.local import archive_plan
    from nsqctl.pipeline.selection import ReplayFilters

    everything = archive_plan(str(archive), ReplayFilters(), None)
    assert everything.counts() == {
        "matching": 6010,
        "to_publish": 6000,
        "duplicates": 10,
        "keys": 2,
    }
    rows = list(everything.rows())
    assert [r[0] for r in rows] == ["orders/0/"] * 3000 + ["orders/1/"] * 3000
    assert [r[1] for r in rows[:3000]] == list(range(3000))  # by internal id
    assert [r[2] for r in rows[:3]] == [0, 100, 200]  # then offset
    # time range: a half-open [since, until) on the message timestamp
    window = ReplayFilters(since_ns=T0 + 100 * 10**6, until_ns=T0 + 200 * 10**6)
    assert archive_plan(str(archive), window, None).counts()["to_publish"] == 200
    some = ReplayFilters(partitions=[1], trace_id=1007, topics=["orders"])
    assert [r[4] for r in archive_plan(str(archive), some, None).rows()] == [b'{"k":"k1","seq":7}']
    grep = archive_plan(str(archive), ReplayFilters(grep='"k":"k2"'), "k")
    keyed = list(grep.rows())
    assert {r[0] for r in keyed} == {"k2"} and len(keyed) == 2000
    assert [r[1] for r in keyed] == sorted(r[1] for r in keyed)  # by time across partitions
    with pytest.raises(ConfigError, match="`where` is a Spark SQL predicate"):
        archive_plan(str(archive), ReplayFilters(where="attempts > 1"), None)
    with pytest.raises(ConfigError, match="not a valid regex"):
        archive_plan(str(archive), ReplayFilters(grep="("), None)


@spark_extra
def test_json_field_reads_like_get_json_object() -> None:
    from nsqctl.pipeline.filters import json_field

    doc = b'{"user": {"id": 42, "name": "ann", "tags": ["a", "b"], "none": null}}'
    assert json_field(doc, "user.name") == "ann"
    assert json_field(doc, "user.id") == "42"
    assert json_field(doc, "user.tags") == '["a","b"]'
    assert json_field(doc, "user.none") is None
    assert json_field(doc, "user.missing") is None
    assert json_field(b"\xff not json", "user") is None


@spark_extra
def test_text_plan_keeps_file_line_order_and_greps(tmp_path: Path) -> None:
    from nsqctl.pipeline.local import text_plan
    from nsqctl.pipeline.selection import ReplayFilters

    (tmp_path / "a.log").write_bytes(b"".join(b"a-%03d\n" % i for i in range(30)))
    (tmp_path / "b.log").write_bytes(b"".join(b"b-%03d\n" % i for i in range(20)))
    plan = text_plan(str(tmp_path), ReplayFilters(grep=r"-0[01]\d$"))
    assert [r[4] for r in plan.rows()] == [b"a-%03d" % i for i in range(20)] + [
        b"b-%03d" % i for i in range(20)
    ]
    with pytest.raises(ConfigError, match="need an archive source"):
        text_plan(str(tmp_path), ReplayFilters(partitions=[1]))


@spark_extra
def test_local_lookup_reads_a_fraction_of_the_archive(tmp_path: Path) -> None:
    """Bytes read by one lookup (the process's read() total, /proc/self/io): each file's
    tail (pyarrow reads the last 64 KiB for the footer) and one row group's columns."""
    from nsqctl.pipeline import filters as flt
    from nsqctl.pipeline.local import LocalReader
    from nsqctl.pipeline.trace import parse_query

    _write(tmp_path, rows_per_partition=100_000, files=1)
    size = sum(p.stat().st_size for p in tmp_path.rglob("*.parquet"))
    q = parse_query(str((1 << 50) + 51_000), internal=True)

    def rchar() -> int:
        io = Path("/proc/self/io").read_text().split("\n")
        return int(next(line for line in io if line.startswith("rchar")).split()[1])

    before = rchar()
    rows = LocalReader().archive_rows([str(tmp_path)], flt.archive_filter(q))
    read = rchar() - before
    assert [r["internal_id"] for r in rows] == [(1 << 50) + 51_000]
    assert read < size / 5, (read, size)
    print(f"lookup read {read} of {size} bytes")


@spark_extra
def test_engine_choice_and_its_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nsqctl.pipeline import engine

    monkeypatch.delenv("SPARK_MASTER", raising=False)
    (tmp_path / "f.parquet").write_bytes(b"x" * 2048)
    local = engine.choose("trace", "auto", [str(tmp_path)])
    assert local == engine.Choice("local", "2.0 KiB of local input is below 16.0 GiB")
    assert (
        engine.choose("replay", "auto", ["s3a://b/archive"]).reason == "s3a://b/archive is remote"
    )
    assert engine.choose("replay", "auto", [str(tmp_path)], "spark://h:7077").engine == "spark"
    assert engine.choose("replay", "auto", [str(tmp_path)], where="a > 1").engine == "spark"
    monkeypatch.setattr(engine, "LOCAL_MAX_BYTES", {"trace": 1024, "replay": 1024})
    big = engine.choose("replay", "auto", [str(tmp_path)])
    assert big == engine.Choice("spark", "2.0 KiB of local input is above 1.0 KiB")
    assert engine.choose("replay", "local", [str(tmp_path)]).engine == "local"
    monkeypatch.setenv("SPARK_MASTER", "local[1]")
    assert engine.choose("trace", "auto", [str(tmp_path)]).reason == "SPARK_MASTER=local[1] is set"
    assert engine.choose("trace", "local", [str(tmp_path)]).engine == "local"  # flag wins
    refused: list[tuple[tuple[str, str, list[str], str | None, str | None], str]] = [
        (("trace", "fast", [str(tmp_path)], None, None), "is not one of auto, local, spark"),
        (
            ("trace", "local", ["hdfs://nn/a"], None, None),
            "hdfs://nn/a is remote: use `engine` spark",
        ),
        (("replay", "local", [str(tmp_path)], None, "x > 1"), "`where` is a Spark SQL"),
        (("replay", "local", [str(tmp_path)], "spark://h:7077", None), "drop `engine` local"),
    ]
    for args, message in refused:
        with pytest.raises(ConfigError, match=message):
            engine.choose(*args)


def test_engine_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from nsqctl.pipeline import engine

    real = importlib.util.find_spec
    hidden = ("pyspark", "pyarrow")
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in hidden else real(name)
    )
    with pytest.raises(engine.MissingExtraError, match=r"pip install 'nsqctl\[spark\]'"):
        engine.require("spark")
    with pytest.raises(engine.MissingExtraError, match=r"pip install 'nsqctl\[archive\]'"):
        engine.choose("trace", "local", ["/nonexistent"])


def _event(at: dt.datetime, event: str, where: str, **detail: Any) -> dict[str, Any]:
    return {
        "time": at.timestamp(),
        "at": at.isoformat(timespec="milliseconds"),
        "event": event,
        "where": where,
        "detail": detail,
    }


def test_timeline_at_80_columns_keeps_every_value_whole() -> None:
    """The issue's case: an archived file's path wrapped over five lines and the ids over
    two. Every line fits 80 columns and every value appears whole on one line."""
    at = dt.datetime(2026, 11, 21, 10, 0, 0, 123000, tzinfo=dt.UTC)
    root = "/var/lib/nsq-archive/production/cluster-a"
    directory = "topic=orders_refunds_eu/partition=12/date=2026-11-21"
    name = "part-20261121T100001-1a2b3c4d-000042.parquet"
    hex_id = "0030000000001234000000000000beef"
    events = [
        _event(at, "accepted by nsqd", "10.0.0.1:4150 orders_refunds_eu partition 12"),
        _event(
            at + dt.timedelta(seconds=0.02),
            "published",
            "10.0.0.1:4150 orders_refunds_eu partition 12",
            offset=123456789,
            internal_id=13510798882116148,
            trace_id=48879,
        ),
        _event(
            at + dt.timedelta(seconds=1),
            "delivered, FIN",
            "orders_refunds_eu/refunds from 10.0.0.1:4150 to 127.0.0.1:53312",
            attempts=1,
            id=hex_id,
            internal_id=13510798882116148,
            trace_id=48879,
        ),
        _event(
            at + dt.timedelta(seconds=2),
            "archived",
            f"{root}/{directory}/{name}",
            channel="nsqctl_archive",
            id=hex_id,
            internal_id=13510798882116148,
        ),
    ]
    lines = render_trace(f"message id {hex_id}", events, [root], 80)
    assert all(len(line) <= 80 for line in lines), [ln for ln in lines if len(ln) > 80]
    text = "\n".join(lines)
    assert lines[0] == f"timeline of message id {hex_id} (UTC, 2026-11-21)"
    # the timeline first: one line per event, in order, time then event
    assert lines[1].startswith(" 1  10:00:00.123  accepted by nsqd")
    assert lines[4].startswith(" 4  10:00:02.123  archived          topic=orders_refunds_eu/")
    # then the details, each value whole on one line
    for value in (
        root,
        directory,
        name,
        hex_id,
        "internal_id=13510798882116148",
        "127.0.0.1:53312",
        "offset=123456789",
    ):
        assert any(value in line for line in lines), value
    assert text.index("details") > text.index(" 4  10:00:02.123")
    assert f"file    {name}" in text and f"dir     {directory}" in text


def test_timeline_over_several_days_shows_dates() -> None:
    at = dt.datetime(2026, 11, 21, 23, 59, 59, tzinfo=dt.UTC)
    events = [_event(at, "published", "a"), _event(at + dt.timedelta(seconds=2), "archived", "b")]
    lines = render_trace("trace id 5", events, [], 80)
    assert lines[0] == "timeline of trace id 5 (UTC)"
    assert lines[1].startswith(" 1  2026-11-21 23:59:59.000  published")
    assert lines[2].startswith(" 2  2026-11-22 00:00:01.000  archived")


@spark_extra
def test_a_trace_in_a_directory_with_no_archive_files_says_so(tmp_path: Path) -> None:
    """An empty directory (or one whose Hive directories hold no Parquet file) is no
    archive: said in those words, exit 2, not pyarrow's complaint about a filter column
    that no file has."""
    from tests.helpers.cli import assert_one_line_error, run_main

    (tmp_path / "topic=orders").mkdir()
    proc = run_main("trace", "123", "--archive", str(tmp_path), "--engine", "local")
    line = assert_one_line_error(proc, 2)
    assert f"no archive files under {tmp_path}" in line, line


@spark_extra
def test_a_trace_log_that_is_no_trace_log_says_what_it_is(tmp_path: Path) -> None:
    """A directory is not "missing", and a file none of whose lines is JSON (a gzip,
    a binary) is no trace log: each said so, exit 2, not "trace id not found" (exit 1)."""
    from tests.helpers.cli import assert_one_line_error, run_main

    binary = tmp_path / "receipts.bin"
    binary.write_bytes(b"\x00\x01 not json\nnor this\n\xff\xfe")
    for given, said in [
        (tmp_path, f"trace log {tmp_path} is not a file"),
        (binary, f"trace log {binary} holds no JSON record"),
    ]:
        proc = run_main("trace", "123", "--trace-log", str(given), "--engine", "local")
        line = assert_one_line_error(proc, 2)
        assert said in line, line
