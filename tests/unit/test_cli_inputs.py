"""Pure parts of the CLI: input splitting, shard keys from JSON, tail filters, time and
start arguments, and the pub flag checks."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsqctl.cli.commands.pub import PubPlan, parse_trace_id
from nsqctl.cli.commands.pub_input import (
    Batch,
    Record,
    parse_delimiter,
    shard_key_from_json,
    split_batches,
    split_stream,
)
from nsqctl.cli.commands.tail import MessageFilter, parse_start
from nsqctl.errors import ConfigError
from nsqctl.timeparse import parse_time_ns, parse_time_s


def test_split_stream_numbers_lines_and_skips_blank_ones() -> None:
    data = b"a\n\nb\nc"
    records = list(split_stream(io.BytesIO(data), b"\n", chunk_size=2))
    assert records == [Record(1, b"a"), Record(3, b"b"), Record(4, b"c")]


@given(
    st.lists(st.binary(min_size=1, max_size=20).filter(lambda b: b"\x00" not in b), max_size=30),
    st.integers(min_value=1, max_value=17),
)
def test_split_stream_any_chunking_gives_the_records(bodies: list[bytes], chunk: int) -> None:
    data = b"\x00".join(bodies)
    got = [r.body for r in split_stream(io.BytesIO(data), b"\x00", chunk_size=chunk)]
    assert got == bodies


def test_batches_number_lines_across_reads_and_blank_lines() -> None:
    batches = list(split_batches(io.BytesIO(b"a\nb\n\nc\nd\ne"), b"\n", chunk_size=4))
    joined = Batch([])
    for batch in batches:
        joined = joined.join(batch)
    assert joined.bodies == [b"a", b"b", b"c", b"d", b"e"]
    assert [joined.number(i) for i in range(len(joined))] == [1, 2, 4, 5, 6]
    assert sum(b.size for b in batches) == len(b"a\nb\n\nc\nd\ne")
    tail = joined.cut(2, 5)
    assert [r.number for r in tail.records()] == [4, 5, 6]


def test_batches_without_blank_lines_number_by_offset() -> None:
    (batch,) = split_batches(io.BytesIO(b"x\ny\nz\n"), b"\n")
    assert batch.numbers is None and batch.first == 1 and len(batch) == 3
    assert batch.cut(1, 3).first == 2
    assert batch.join(Batch([b"w"], 4)).numbers is None  # contiguous: no list of numbers


def test_a_short_read_flushes_a_full_read_holds_back() -> None:
    class Pipe(io.RawIOBase):
        """Hands out reads of the given sizes, like a pipe written in bursts."""

        def __init__(self, reads: list[bytes]) -> None:
            self.reads = reads

        def read1(self, size: int = -1) -> bytes:
            return self.reads.pop(0) if self.reads else b""

    full = b"".join(b"%07d\n" % i for i in range(8192))  # 64 KiB: the input is flowing
    assert len(full) == 1 << 16
    batches = list(split_batches(Pipe([full, b"late\n"]), b"\n"))  # type: ignore[arg-type]
    assert [b.flush for b in batches] == [False, True]
    assert batches[1].bodies == [b"late"] and batches[1].first == 8193


def test_multi_byte_delimiter_across_chunks() -> None:
    got = [r.body for r in split_stream(io.BytesIO(b"one||two||three"), b"||", chunk_size=3)]
    assert got == [b"one", b"two", b"three"]


def test_parse_delimiter_escapes_and_errors() -> None:
    assert parse_delimiter("\\n") == b"\n"
    assert parse_delimiter("\\x00") == b"\x00"
    assert parse_delimiter(",") == b","
    with pytest.raises(ConfigError, match="must not be empty"):
        parse_delimiter("")


def test_shard_key_from_json_field_and_nested_path() -> None:
    assert shard_key_from_json(Record(1, b'{"k": "abc"}'), "k") == "abc"
    assert shard_key_from_json(Record(1, b'{"u": {"id": 42}}'), "u.id") == "42"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "line 7 is not JSON"),
        (b'{"other": 1}', "line 7 has no field 'k'"),
        (b'{"k": {"x": 1}}', "line 7: field 'k' must be a string or a number"),
        (b'{"k": null}', "line 7: field 'k' must be a string or a number"),
    ],
)
def test_shard_key_errors_name_the_line(body: bytes, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        shard_key_from_json(Record(7, body), "k")


def test_message_filter_grep_and_fields() -> None:
    keep = MessageFilter.parse("err", ["user.id=42", "level=warn"])
    assert keep.matches(b'{"user": {"id": 42}, "level": "warn", "m": "err!"}')
    assert not keep.matches(b'{"user": {"id": 41}, "level": "warn", "m": "err!"}')
    assert not keep.matches(b'{"user": {"id": 42}, "level": "warn", "m": "fine"}')
    assert not keep.matches(b"err but not json")
    assert MessageFilter.parse(None, None).active is False


def test_message_filter_bad_input() -> None:
    with pytest.raises(ConfigError, match="bad --grep regex"):
        MessageFilter.parse("(", None)
    with pytest.raises(ConfigError, match="FIELD=VALUE"):
        MessageFilter.parse(None, ["novalue"])


def test_parse_time_forms() -> None:
    assert parse_time_s("1700000000") == 1700000000
    expected = int(datetime(2026, 11, 21, 10, 0, tzinfo=UTC).timestamp())
    assert parse_time_s("2026-11-21T10:00:00") == expected
    assert parse_time_s("2026-11-21T11:00:00+01:00") == expected
    with pytest.raises(ConfigError, match="bad time"):
        parse_time_s("yesterday")


def test_parse_time_ns_is_exact_to_the_nanosecond() -> None:
    """One reader for tail and replay: fractions of a second are kept exactly (a float
    would round 1764151200.123456789 s), ISO 8601 keeps its microseconds."""
    assert parse_time_ns("1764151200.123456789") == 1_764_151_200_123_456_789
    assert parse_time_ns("1764151200.5") == 1_764_151_200_500_000_000
    assert parse_time_ns(" 10 ") == 10 * 10**9
    assert parse_time_ns("1970-01-01T00:00:01.000002") == 1_000_002_000
    for bad in ("1.", ".5", "-1", "1e9", "1.1234567891"):
        with pytest.raises(ConfigError, match="Unix seconds"):
            parse_time_ns(bad)


def test_parse_start_maps_flags_to_sub_advanced() -> None:
    assert parse_start(False, None, None) is None
    assert parse_start(True, None, None) == "msgcount:0"
    assert parse_start(False, "1700000000", None) == "timestamp:1700000000"
    assert parse_start(False, None, 4096) == "virtual_queue:4096"
    with pytest.raises(ConfigError, match="only one of"):
        parse_start(True, "1", None)


def test_pub_plan_rejects_conflicting_routing_and_tunes_batch_to_rate() -> None:
    with pytest.raises(ConfigError, match="only one of --partition, --shard"):
        PubPlan("t", 200, partition=1, shard="k").check()
    with pytest.raises(ConfigError, match="--defer and --trace"):
        PubPlan("t", 200, trace="auto", defer_ms=10).check()
    with pytest.raises(ConfigError, match="--rate must be a positive"):
        PubPlan("t", 200, rate=0).check()
    plan = PubPlan("t", 200, rate=50)
    plan.check()
    assert plan.batch == 5  # about ten sends a second


def test_parse_trace_id() -> None:
    assert parse_trace_id("0x10") == 16
    assert parse_trace_id("123") == 123
    with pytest.raises(ConfigError, match="unsigned 64-bit"):
        parse_trace_id(str(1 << 64))
    with pytest.raises(ConfigError, match="give a number"):
        parse_trace_id("abc")


@pytest.mark.spark  # the replay command, history mode too, needs the archive extra
@pytest.mark.parametrize("start", [["--from-offset", "0"], ["--from-time", "1700000000"]])
def test_history_replay_refuses_a_shard_field_it_could_not_honour(start: list[str]) -> None:
    """A history replay keeps each source partition's order and nothing else: it refuses
    ``--shard-field`` up front (before any server is asked) rather than ignore it."""
    from tests.helpers.cli import assert_one_line_error, run_main

    args = ["replay", "orders", "--to-topic", "copy", "--shard-field", "k", *start]
    line = assert_one_line_error(run_main(*args, "--nsqd", "127.0.0.1:1"), 2)
    assert line == (
        "nsqctl: error: --shard-field applies to archive and nsq_to_file replays only: a "
        "history replay (--from-time/--from-offset) keeps each source partition's order; "
        "drop --shard-field, or replay an archive of the topic with it"
    )
