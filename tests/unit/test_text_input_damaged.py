"""A damaged nsq_to_file gzip file given to replay: one line naming the file and what to
do, exit 2; before, gzip's EOFError reached click, which reported "aborted" (exit 130)
as if the operator had pressed Ctrl-D.

Core install (no pyarrow): textinput is what both replay engines read files with; the
replay command itself needs pyarrow.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from nsqctl.errors import ConfigError
from nsqctl.pipeline.textinput import read_bodies
from tests.helpers.cli import assert_one_line_error, run_main
from tests.helpers.spark import spark  # noqa: F401 - the shared session, for --engine spark


def _gzip_lines(count: int) -> bytes:
    return gzip.compress(b"".join(b"message %d\n" % i for i in range(count)))


def test_a_gzip_file_cut_short_is_named_not_taken_for_ctrl_d(tmp_path: Path) -> None:
    whole = _gzip_lines(1000)
    cut = tmp_path / "orders.web1-000000.2026-11-29_10.log.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ConfigError, match="ends in the middle of its gzip stream") as caught:
        list(read_bodies(cut))
    assert str(cut) in str(caught.value)


@pytest.mark.spark  # the replay command needs pyarrow even for text input
@pytest.mark.parametrize("engine", ["local", "spark", "spark-no-aqe"])
def test_replay_of_a_gzip_file_cut_short_is_one_line_exit_2(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    """Replay plans before it publishes: nothing went out (no nsqd listens there). The
    Spark engine reads files in its executors, where the error would fail the job in
    Spark's words (exit 1): nsqctl's own one-line error is taken from the worker's.
    Without adaptive execution the files are read only in the publishing job, which
    must say it the same."""
    if engine != "local":
        spark = request.getfixturevalue("spark")  # the command reuses the session
        if engine == "spark-no-aqe":
            key = "spark.sql.adaptive.enabled"
            before = spark.conf.get(key)
            spark.conf.set(key, "false")
            request.addfinalizer(lambda: spark.conf.set(key, before))
            engine = "spark"
    whole = _gzip_lines(1000)
    cut = tmp_path / "orders.log.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    args = ["--to-topic", "x", "--nsqd", "127.0.0.1:1", "-q", "--engine", engine]
    proc = run_main("replay", str(cut), *args)
    line = assert_one_line_error(proc, 2)
    assert "ends in the middle of its gzip stream" in line, line


def test_a_damaged_gzip_stream_is_named(tmp_path: Path) -> None:
    whole = bytearray(_gzip_lines(1000))
    whole[20:40] = bytes(20)  # the deflate data, past the header
    bad = tmp_path / "orders.log.gz"
    bad.write_bytes(bytes(whole))
    with pytest.raises(ConfigError, match="is not a valid gzip file") as caught:
        list(read_bodies(bad))
    assert str(bad) in str(caught.value)
