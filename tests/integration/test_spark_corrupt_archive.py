"""A corrupt Parquet file in an archive: ``replay`` and ``trace`` with ``--engine spark``
end with one line naming the file and exit 2 (bad input), in the local engine's words, not
with a Py4J and Java stack trace: the same archive gets the same answer from both engines.
The archive is a real one (``nsqctl archive`` from a real nsqd), with one file overwritten
by garbage; Spark runs for real (local mode).

The Spark commands run through the console script's ``main()`` in this process
(:func:`~tests.helpers.cli.run_main`), so they share the test session's SparkSession
rather than start a JVM each; a fresh JVM's stderr kept off the terminal is checked by
test_pipeline_archive's CLI runs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from nsqctl.servers import cluster
from tests.helpers.cli import assert_one_line_error, run_cli, run_main
from tests.helpers.spark import spark  # noqa: F401

pytestmark = pytest.mark.spark


def test_spark_engine_reports_a_corrupt_parquet_file_in_one_line(
    original_cluster: cluster.Cluster,
    tmp_path: Path,
    spark: Any,  # noqa: F811 - the session's Spark, which the in-process commands get
) -> None:
    topic = f"corrupt_{uuid.uuid4().hex[:10]}"
    nsqd = ["--nsqd", original_cluster.nsqd_tcp[0]]
    assert run_cli(["pub", topic, "one", "two", "three", *nsqd]).returncode == 0
    out = tmp_path / "archive"
    archived = run_cli(["archive", topic, "--out", str(out), "--exit-when-idle", "1", *nsqd])
    assert archived.returncode == 0, archived.stderr
    good = sorted(out.rglob("*.parquet"))
    assert good, list(out.rglob("*"))
    bad = good[0].with_name("zz-corrupt.parquet")
    bad.write_bytes(b"PAR1 this is not a parquet file, only its first magic" * 50)

    local = run_cli(["replay", str(out), "--to-topic", "x", "--engine", "local", "--dry-run", "-q"])
    line = assert_one_line_error(local, 2)
    assert bad.name in line and f"cannot read the archive at {out}: " in line, line

    replay = run_main("replay", str(out), "--to-topic", "x", "--engine", "spark", "--dry-run", "-q")
    line = assert_one_line_error(replay, 2)
    assert f"cannot read the archive at {out}: " in line, line
    assert bad.name in line and "not a Parquet file" in line, line

    local = run_cli(["trace", "0000000000000001", "--archive", str(out), "--engine", "local"])
    line = assert_one_line_error(local, 2)
    assert bad.name in line and "cannot read the archive" in line, line

    trace = run_main("trace", "0000000000000001", "--archive", str(out), "--engine", "spark")
    line = assert_one_line_error(trace, 2)
    assert "cannot read the archive: " in line, line
    assert bad.name in line and "not a Parquet file" in line, line
    # the failed jobs left the shared session usable
    assert spark.range(3).count() == 3


def test_a_parquet_file_that_is_no_archive_is_refused_as_such_by_both_engines(
    tmp_path: Path,
    spark: Any,  # noqa: F811 - the session's Spark, which the in-process commands get
) -> None:
    """A readable Parquet file another tool wrote: both engines name it as no nsqctl
    archive and the core columns it lacks (the local engine gave a KeyError traceback,
    Spark a query error and exit 1)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"topic": ["t"], "value": [1]}), other)
    expected = f"{other} is not an nsqctl archive: it has no "
    for engine in ("local", "spark"):
        replay = run_main(
            "replay", str(other), "--to-topic", "x", "--engine", engine, "--dry-run", "-q"
        )
        line = assert_one_line_error(replay, 2)
        assert expected in line and "nsqd, internal_id" in line, (engine, line)
        assert "an archive was written to" in line, (engine, line)
        trace = run_main("trace", "0000000000000001", "--archive", str(other), "--engine", engine)
        line = assert_one_line_error(trace, 2)
        assert "is not an nsqctl archive" in line and "internal_id" in line, (engine, line)


def test_an_archive_file_removed_while_spark_reads_it_is_no_damaged_archive(
    tmp_path: Path,
    spark: Any,  # noqa: F811 - the session's Spark: a real job, a real FILE_NOT_EXIST
) -> None:
    """A file listed when the job was planned and gone when an executor came to read it
    (an archive rotating or cleaned up meanwhile): one line saying so, a runtime failure
    (NsqctlError, exit 1), not "cannot read the archive" as a damaged file is (exit 2)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nsqctl.errors import ConfigError, NsqctlError
    from nsqctl.pipeline.spark import spark_errors

    for name in ("a.parquet", "b.parquet"):
        pq.write_table(pa.table({"n": list(range(5))}), tmp_path / name)
    planned = spark.read.parquet(str(tmp_path))
    (tmp_path / "b.parquet").unlink()
    with (
        pytest.raises(NsqctlError) as caught,
        spark_errors("spark could not replay A", "cannot read the archive at A"),
    ):
        planned.collect()
    assert not isinstance(caught.value, ConfigError), caught.value
    line = str(caught.value)
    assert line.startswith("spark could not replay A: "), line
    assert f"{tmp_path / 'b.parquet'} was removed while Spark read it" in line, line
    assert "\n" not in line, line
    assert spark.range(3).count() == 3


def test_the_master_a_failed_job_ran_on_is_known_from_another_thread(
    spark: Any,  # noqa: F811 - the session's Spark, made on the main thread
) -> None:
    """A library caller may run the job on another thread than the one that made the
    session: the master that decides what a missing file means is still the session's,
    not the one nsqctl would choose now (``local[*]``, or ``SPARK_MASTER``)."""
    from nsqctl.pipeline.spark import active_master, resolve_master

    with ThreadPoolExecutor(1) as pool:
        master = pool.submit(active_master).result()
    assert master == spark.sparkContext.master != resolve_master(None)


@pytest.fixture
def without_adaptive_execution(spark: Any) -> Iterator[None]:  # noqa: F811
    """The shared session with adaptive execution off (a user's spark-defaults can say
    so): then no stage reads the input before the replay's publishing job, and a file
    it cannot read fails that job instead."""
    key = "spark.sql.adaptive.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        spark.conf.set(key, before)


def test_without_adaptive_execution_the_replay_job_says_what_its_input_is(
    original_cluster: cluster.Cluster,
    tmp_path: Path,
    spark: Any,  # noqa: F811
    without_adaptive_execution: None,
) -> None:
    """The publishing job is the first to read the files: a corrupt one is still bad
    input named as such (exit 2) and one removed meanwhile still a runtime failure that
    says so, not "replay stopped: An error occurred while calling ...collectAndServe"."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nsqctl.errors import ConfigError, NsqctlError
    from nsqctl.pipeline import replay as job
    from nsqctl.pipeline.spark import spark_errors

    topic = f"noaqe_{uuid.uuid4().hex[:10]}"
    nsqd = ["--nsqd", original_cluster.nsqd_tcp[0]]
    assert run_cli(["pub", topic, "one", "two", *nsqd]).returncode == 0
    out = tmp_path / "archive"
    archived = run_cli(["archive", topic, "--out", str(out), "--exit-when-idle", "1", *nsqd])
    assert archived.returncode == 0, archived.stderr
    good = sorted(out.rglob("*.parquet"))
    bad = good[0].with_name("zz-corrupt.parquet")
    bad.write_bytes(b"PAR1 this is not a parquet file, only its first magic" * 50)
    args = ("--to-topic", f"{topic}_out", "--engine", "spark", "-q", *nsqd)
    replay = run_main("replay", str(out), *args)
    line = assert_one_line_error(replay, 2)
    assert f"cannot read the archive at {out}: " in line and "not a Parquet file" in line, line

    rows = tmp_path / "rows"
    rows.mkdir()
    for name in ("a.parquet", "b.parquet"):
        columns = {"_key": ["k"] * 3, "_o1": [1] * 3, "_o2": [0, 1, 2], "_o3": [0] * 3}
        pq.write_table(pa.table({**columns, "body": [b"x"] * 3}), rows / name)
    frame = spark.read.parquet(str(rows)).select("_key", "_o1", "_o2", "_o3", "body")
    planned = job.plan(frame, 2)
    (rows / "b.parquet").unlink()
    target = job.ReplayTarget(f"{topic}_out", nsqd=[original_cluster.nsqd_tcp[0]])
    with (
        pytest.raises(NsqctlError) as caught,
        spark_errors("spark could not replay A", "cannot read the archive at A"),
    ):
        job.run_replay(planned, target, None)
    assert not isinstance(caught.value, ConfigError), caught.value
    assert f"{rows / 'b.parquet'} was removed while Spark read it" in str(caught.value)
