"""replay and trace on a real Spark standalone cluster (a master and two 1-core workers on
127.0.0.1), not only ``local[*]``: the work must spread over both workers' executors,
which Spark's event log shows task by task; and a cluster whose executors lack what
replay needs must fail the executor check with one line.

Most of its time is Spark applications starting their executors, so it runs four: the
replay, the trace, every executor-check round (one driver), the unreachable replay.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nsqctl.producer import Producer
from nsqctl.servers import cluster
from nsqctl.servers.process import free_ports
from tests.helpers import spark_standalone as sa
from tests.helpers.cli import NSQCTL
from tests.helpers.redesign import read_messages

pytestmark = pytest.mark.spark  # pyarrow is imported inside: core CI deselects, not skips

#: enough for eight archive files and four replay tasks of a few batches each
N_MESSAGES = 2_000


@dataclass
class Setup:
    spark: sa.StandaloneCluster
    nsq: cluster.Cluster
    topic: str
    archive: Path
    bodies: list[bytes]
    env: dict[str, str]


@pytest.fixture(scope="module")
def setup(original_bins: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    base = tmp_path_factory.mktemp("standalone")
    nsq = cluster.start("original", base / "nsq", nsqd=1, bin_dir=original_bins)
    try:
        with sa.running(base / "spark") as spark:
            topic = f"sa_{uuid.uuid4().hex[:8]}"
            bodies = [b"standalone-%06d" % i for i in range(N_MESSAGES)]

            async def publish() -> None:
                async with Producer(nsqd_tcp=nsq.nsqd_tcp) as producer:
                    for start in range(0, N_MESSAGES, 1000):
                        await producer.publish_many(topic, bodies[start : start + 1000])

            asyncio.run(publish())
            archive = base / "archive"
            env = spark.env()
            env["NSQCTL_STATE_DIR"] = str(base / "state")
            r = subprocess.run(
                [
                    NSQCTL,
                    "archive",
                    topic,
                    "--out",
                    str(archive),
                    "--nsqd",
                    nsq.nsqd_tcp[0],
                    "--exit-when-idle",
                    "1",
                    "--rotate-rows",
                    str(N_MESSAGES // 8),
                    "-q",
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
            )
            assert r.returncode == 0, r.stderr
            yield Setup(spark, nsq, topic, archive, bodies, env)
    finally:
        nsq.stop()


def _app(s: Setup, name: str) -> dict[str, Any]:
    apps = [a for a in s.spark.state()["completedapps"] if a["name"] == name]
    assert len(apps) == 1, s.spark.state()
    app: dict[str, Any] = apps[0]
    return app


def test_replay_and_trace_spread_over_both_workers(setup: Setup) -> None:
    s = setup
    workers = {w["webuiaddress"].removeprefix("http://") for w in s.spark.alive_workers()}
    assert len(workers) == 2
    to_topic = f"sa_replayed_{uuid.uuid4().hex[:8]}"
    r = subprocess.run(
        [
            NSQCTL,
            "replay",
            str(s.archive),
            "--to-topic",
            to_topic,
            "--nsqd",
            s.nsq.nsqd_tcp[0],
            "--engine",
            "spark",
            "--spark-master",
            s.spark.master_url,
            "--tasks",
            "4",
            "--batch-size",
            "100",
        ],
        capture_output=True,
        text=True,
        env=s.env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert f"spark master {s.spark.master_url}" in r.stderr
    assert f"replayed {N_MESSAGES} message(s)" in r.stdout
    got = asyncio.run(
        read_messages(s.nsq.lookupd_http, to_topic, "check", N_MESSAGES, max_in_flight=2000)
    )
    assert Counter(m.body for m in got) == Counter(s.bodies)  # every message exactly once

    replay_app = _app(s, "nsqctl-replay")
    tasks = sa.tasks_per_worker(sa.application_events(s.spark.event_log, replay_app["id"]))
    print(f"replay tasks per worker: {dict(tasks)}")
    assert set(tasks) == workers and all(n > 0 for n in tasks.values()), tasks

    import pyarrow.dataset as ds

    table = ds.dataset(s.archive, format="parquet", partitioning="hive").to_table(["id"])
    msg_id = table.column("id")[N_MESSAGES // 2].as_py().decode()
    r = subprocess.run(
        [
            NSQCTL,
            "trace",
            msg_id,
            "--archive",
            str(s.archive),
            "--json",
            "--engine",
            "spark",
            "--spark-master",
            s.spark.master_url,
        ],
        capture_output=True,
        text=True,
        env=s.env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    events = json.loads(r.stdout)["events"]
    assert [e["detail"]["id"] for e in events if e["event"] == "archived"] == [msg_id]
    trace_app = _app(s, "nsqctl-trace")
    tasks = sa.tasks_per_worker(sa.application_events(s.spark.event_log, trace_app["id"]))
    print(f"trace tasks per worker: {dict(tasks)}")
    assert set(tasks) <= workers and sum(tasks.values()) > 0, tasks  # ran on the executors


# A driver that runs nsqctl's executor check on the cluster and prints its outcomes. The
# rounds share one application and its executors: the Python an executor starts for a task
# is the one named in the task's function, which pyspark takes from the context's
# ``pythonExec`` (PYSPARK_PYTHON when the context started) as each job is submitted, and an
# executor keeps a worker pool per Python. So a round sets ``pythonExec`` instead of
# starting a context of its own, whose executors would take longer to start than the check
# takes to run.
CHECK_DRIVER = textwrap.dedent("""
    import json, sys
    from nsqctl.pipeline.spark import ExecutorError, check_executors, spark_session
    spark = spark_session(sys.argv[1], "nsqctl-check")
    rounds = []
    for python, reaches in json.loads(sys.argv[2]):
        spark.sparkContext.pythonExec = python
        out = []
        for reach in reaches:
            try:
                out.append({"ok": len(check_executors(spark, reach, timeout=90))})
            except ExecutorError as err:
                out.append({"error": str(err)})
        rounds.append(out)
    spark.stop()
    print(json.dumps(rounds))
""")


def _check(s: Setup, rounds: list[tuple[str, list[list[str]]]]) -> list[list[dict[str, Any]]]:
    """Each round's outcomes: (executors' Python, the address lists to check with it)."""
    r = subprocess.run(
        [sys.executable, "-c", CHECK_DRIVER, s.spark.master_url, json.dumps(rounds)],
        capture_output=True,
        text=True,
        env=s.spark.env(),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_executor_check_one_line_errors(setup: Setup, tmp_path: Path) -> None:
    s = setup
    (dead,) = free_ports(1)  # nobody listens here
    # Executors whose Python has pyspark (Spark ships it) but not nsqctl: the same
    # interpreter with site-packages off, so the editable nsqctl install is not seen.
    bare = tmp_path / "python-without-nsqctl"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    # A PYSPARK_PYTHON that does not exist on the workers: Spark cannot start the task.
    absent = tmp_path / "no-such-python"
    (good, unreachable), (missing,), (no_python,) = _check(
        s,
        [
            (sys.executable, [s.nsq.nsqd_tcp, [s.nsq.nsqd_tcp[0], f"127.0.0.1:{dead}"]]),
            (str(bare), [[]]),
            (str(absent), [[]]),
        ],
    )

    assert good == {"ok": 2}  # one report per core: both executors checked in
    error = unreachable["error"]
    assert "\n" not in error
    assert f"cannot reach 127.0.0.1:{dead} (Connection refused)" in error
    assert "every worker needs network access" in error

    error = missing["error"]
    assert "\n" not in error
    assert "cannot import nsqctl (ModuleNotFoundError: No module named 'nsqctl')" in error
    assert "set PYSPARK_PYTHON" in error and str(bare) in error

    error = no_python["error"]
    assert "\n" not in error
    assert error.startswith("Spark executors could not run Python (Cannot run program"), error
    assert "set PYSPARK_PYTHON to a Python that exists on every worker" in error


def test_replay_on_a_cluster_that_cannot_reach_nsqd_fails_in_one_line(setup: Setup) -> None:
    """The CLI runs the executor check before the job: one error line, exit 1, nothing
    published, rather than a task failing four times inside a Java traceback."""
    s = setup
    (dead,) = free_ports(1)  # nobody listens here
    r = subprocess.run(
        [
            NSQCTL,
            "replay",
            str(s.archive),
            "--to-topic",
            "never",
            "--nsqd",
            f"127.0.0.1:{dead}",
            "--engine",
            "spark",
            "--spark-master",
            s.spark.master_url,
        ],
        capture_output=True,
        text=True,
        env=s.env,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("nsqctl: error: ")]
    assert len(errors) == 1, r.stderr
    assert f"cannot reach 127.0.0.1:{dead} (Connection refused)" in errors[0]
    assert "replayed" not in r.stdout
