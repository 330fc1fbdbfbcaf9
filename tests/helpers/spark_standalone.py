"""A real Spark standalone cluster on 127.0.0.1: one master, N workers of 1 core each.

Started from the pyspark package's own ``bin/spark-class`` (it ``exec``s the JVM, so the
PID we hold is the master's or worker's JVM), never through ``sbin`` scripts that detach.
Stopping kills every process we started by PID, and the executor JVMs and Python workers
they spawned (found as their descendants before the kill), then checks none is left.

Applications that should be inspected afterwards run with :meth:`StandaloneCluster.env`:
its ``SPARK_CONF_DIR`` enables Spark's event log, from which :func:`tasks_per_worker` counts
the tasks each worker's executor completed (the driver's UI dies with the driver; the
event log stays).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from nsqctl.servers.process import free_ports
from tests.helpers.spark import FAST_JVM, spark_defaults
from tests.helpers.wait import eventually

LOOPBACK = "127.0.0.1"
WORKER_MEMORY = "768m"
EXECUTOR_MEMORY = "512m"
START_TIMEOUT = 90.0


def spark_class() -> Path:
    """``spark-class`` of the pyspark installed in this Python."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"


@dataclass
class StandaloneCluster:
    base: Path
    master_port: int
    master_ui_port: int
    worker_ui_ports: list[int]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.master_port}"

    @property
    def master_ui(self) -> str:
        return f"http://{LOOPBACK}:{self.master_ui_port}"

    @property
    def event_log(self) -> Path:
        return self.base / "events"

    @property
    def conf_dir(self) -> Path:
        return self.base / "conf"

    def env(self, python: str | None = None) -> dict[str, str]:
        """Environment for a driver process (e.g. ``nsqctl replay``) on this cluster:
        loopback only, executors on ``python`` (default: this one), event log on."""
        env = dict(os.environ)
        env.update(
            SPARK_LOCAL_IP=LOOPBACK,
            SPARK_CONF_DIR=str(self.conf_dir),
            PYSPARK_PYTHON=python or sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
        )
        env.pop("SPARK_MASTER", None)
        return env

    def state(self) -> dict[str, Any]:
        """The master's JSON status page (workers, applications)."""
        state: dict[str, Any] = httpx.get(f"{self.master_ui}/json/", timeout=10).json()
        return state

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def stop(self) -> list[int]:
        """Stop workers (which stop their executors), then the master, by PID; then kill
        any descendant still running. Returns PIDs that survived (should be empty)."""
        family = [pid for proc in self.procs for pid in _descendants(proc.pid)]
        for proc in reversed(self.procs):  # workers first, the master last
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        family += [pid for pid in _all_pids_of(family) if pid not in family]
        with contextlib.suppress(AssertionError):  # what is left is killed below
            eventually(lambda: not any(map(_alive, family)), 15, "Spark to exit", step=0.2)
        for pid in [p for p in family if _alive(p)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
        return [p for p in family if _alive(p)]


def start(base: Path, workers: int = 2) -> StandaloneCluster:
    """Master + ``workers`` workers (1 core, 768 MB each), all bound to 127.0.0.1."""
    base.mkdir(parents=True, exist_ok=True)
    master_port, master_ui, *worker_ui = free_ports(2 + workers)
    c = StandaloneCluster(base, master_port, master_ui, worker_ui)
    c.event_log.mkdir(exist_ok=True)
    c.conf_dir.mkdir(exist_ok=True)
    spark_defaults(
        c.conf_dir,
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": f"file://{c.event_log}",
            "spark.eventLog.rolling.enabled": "false",
            "spark.eventLog.compress": "false",
            "spark.executor.memory": EXECUTOR_MEMORY,
            # a job starts once every worker's executor registered (or after 120 s), not
            # when 80% did: on a loaded machine one executor may be seconds late
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        },
    )
    env = dict(os.environ)
    env.update(
        SPARK_LOCAL_IP=LOOPBACK,
        SPARK_LOG_DIR=str(base / "logs"),
        SPARK_CONF_DIR=str(c.conf_dir),
        SPARK_NO_DAEMONIZE="1",
        SPARK_DAEMON_JAVA_OPTS=FAST_JVM,  # the master's and workers' JVMs
        PYSPARK_PYTHON=sys.executable,
    )
    env.pop("SPARK_HOME", None)  # spark-class finds the pyspark it belongs to
    cls = str(spark_class())
    try:
        c.procs.append(
            _spawn(
                [
                    cls,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    LOOPBACK,
                    "--port",
                    str(master_port),
                    "--webui-port",
                    str(master_ui),
                ],
                env,
                base / "master.log",
            )
        )
        _wait(lambda: _get(f"{c.master_ui}/json/") is not None, "the Spark master", c)
        for i, ui in enumerate(worker_ui):
            work = base / f"worker{i}"
            work.mkdir(exist_ok=True)
            c.procs.append(
                _spawn(
                    [
                        cls,
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        LOOPBACK,
                        "--webui-port",
                        str(ui),
                        "--cores",
                        "1",
                        "--memory",
                        WORKER_MEMORY,
                        "--work-dir",
                        str(work),
                        c.master_url,
                    ],
                    env,
                    base / f"worker{i}.log",
                )
            )
        _wait(lambda: len(c.alive_workers()) == workers, f"{workers} alive workers", c)
    except BaseException:
        c.stop()
        raise
    return c


@contextlib.contextmanager
def running(base: Path, workers: int = 2) -> Iterator[StandaloneCluster]:
    """A started cluster, stopped on exit; fails if any process outlives the stop."""
    c = start(base, workers)
    try:
        yield c
    finally:
        left = c.stop()
        if left:
            raise AssertionError(f"Spark processes still running after stop: {left}")


def application_events(event_log: Path, app_id: str | None = None) -> list[dict[str, Any]]:
    """Events of one application (default: the only one) from the event log directory."""
    files = sorted(p for p in event_log.iterdir() if app_id is None or p.name.startswith(app_id))
    if len(files) != 1:
        raise AssertionError(f"expected one event log for {app_id or 'the app'}: {files}")
    return [json.loads(line) for line in files[0].read_text().splitlines() if line]


def tasks_per_worker(events: list[dict[str, Any]]) -> Counter[str]:
    """Successful tasks per worker (its web UI address), from executors' log URLs."""
    worker_of: dict[str, str] = {}
    for e in events:
        if e.get("Event") == "SparkListenerExecutorAdded":
            url = e["Executor Info"]["Log Urls"]["stdout"]
            worker_of[e["Executor ID"]] = urlsplit(url).netloc
    done: Counter[str] = Counter()
    for e in events:
        if e.get("Event") == "SparkListenerTaskEnd" and e["Task End Reason"]["Reason"] == "Success":
            done[worker_of.get(e["Task Info"]["Executor ID"], "driver")] += 1
    return done


def _spawn(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            cmd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _get(url: str) -> Any:
    try:
        return httpx.get(url, timeout=2).json()
    except (httpx.HTTPError, ValueError):
        return None


def _wait(ready: Callable[[], object], what: str, c: StandaloneCluster) -> None:
    def started() -> bool:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            if ready():
                return True
        dead = [p.args for p in c.procs if p.poll() is not None]
        if dead:
            raise RuntimeError(
                f"a Spark process exited while starting {what}: {dead} (logs in {c.base})"
            )
        return False

    eventually(started, START_TIMEOUT, f"{what} to start (logs in {c.base})", step=0.25)


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


def _descendants(pid: int) -> list[int]:
    """``pid`` and everything below it, now."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += _children(p)
    return found


def _all_pids_of(pids: list[int]) -> list[int]:
    return [d for p in pids for d in _descendants(p) if _alive(d)]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
