"""One SparkSession for the whole test session (Spark starts slowly), and the JVM options
every Spark JVM of the test run gets.

Import the fixture into a test module: ``from tests.helpers.spark import spark  # noqa: F401``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nsqctl.pipeline.spark import spark_session

TEST_MASTER = "local[2]"

#: JVM options for every Spark JVM the tests start (the session's driver, the CLI drivers
#: run as subprocesses, a standalone cluster's daemons and executors): the client compiler
#: only and the serial collector. A test JVM lives seconds to minutes and runs tiny jobs;
#: the server compiler's and the parallel collector's threads cost it more CPU than they
#: give back, and on CI's two cores, shared by every JVM of a test, CPU is wall time. A
#: JVM option changes no result. nsqctl itself sets none of these: a user's real jobs
#: keep the JVM's defaults.
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: Spark settings carrying :data:`FAST_JVM`. The ``defaultJavaOptions`` keys are prepended
#: to the ``extraJavaOptions`` nsqctl sets (its log4j file), so both apply.
TEST_CONF = {
    "spark.driver.defaultJavaOptions": FAST_JVM,
    "spark.executor.defaultJavaOptions": FAST_JVM,
}


def spark_defaults(conf_dir: Path, extra: dict[str, str] | None = None) -> Path:
    """A ``SPARK_CONF_DIR`` whose ``spark-defaults.conf`` holds :data:`TEST_CONF` (and
    ``extra``): give it to an ``nsqctl`` subprocess that starts Spark, so its JVMs start
    like the session's."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    lines = [f"{k} {v}\n" for k, v in {**TEST_CONF, **(extra or {})}.items()]
    (conf_dir / "spark-defaults.conf").write_text("".join(lines))
    return conf_dir


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = spark_session(TEST_MASTER, "nsqctl-tests", TEST_CONF)
    yield session
    session.stop()
