"""A SparkSession for nsqctl's jobs: master from flag, ``SPARK_MASTER`` or ``local[*]``.

Local masters bind to 127.0.0.1 with the UI off and logging quiet; a cluster master keeps
Spark's own networking settings (executors must reach the driver) and needs nsqctl
installed on the executors' Python.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from nsqctl.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
MIN_JAVA = 17

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark: %p %c{1}: %m%n
"""


def resolve_master(flag: str | None) -> str:
    """Flag beats ``SPARK_MASTER`` beats ``local[*]``."""
    return flag or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER


def java_major(version_output: str) -> int | None:
    """The major version from ``java -version`` output ("1.8.0_x" → 8, "17.0.2" → 17)."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> str:
    """Path of a usable java (≥ 17), or a ConfigError saying how to get one."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise ConfigError(
            f"Spark needs Java {MIN_JAVA}+ but `java` was not found: install a JDK "
            "(e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME"
        )
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as err:
        raise ConfigError(f"cannot run {java} -version: {err}") from err
    major = java_major(out.stderr + out.stdout)
    if major is None or major < MIN_JAVA:
        raise ConfigError(
            f"Spark needs Java {MIN_JAVA}+ but {java} is version {major or 'unknown'}: "
            "install a newer JDK or point JAVA_HOME at one"
        )
    return java


def _log4j_file() -> str:
    path = Path(tempfile.gettempdir()) / f"nsqctl-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J)
        os.replace(tmp, path)
    return str(path)


def spark_session(
    master: str | None = None, app_name: str = "nsqctl", conf: dict[str, str] | None = None
) -> SparkSession:
    """Get (or create) the process's SparkSession with nsqctl's defaults."""
    check_java()
    try:
        from pyspark.sql import SparkSession
    except ImportError as err:
        raise ConfigError(
            "the data pipeline needs PySpark: `pip install 'pyspark>=4'`"
        ) from err
    master = resolve_master(master)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = f"-Dlog4j2.configurationFile={_log4j_file()}"
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.extraJavaOptions", log4j)
        .config("spark.executor.extraJavaOptions", log4j)
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master.startswith("local"):
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.memory", os.environ.get("NSQCTL_SPARK_MEMORY", "1g"))
        )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    with _jvm_stderr_to(spark_log_path()):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_log_path() -> Path | None:
    """Where the JVM's stderr goes (None: the terminal, with NSQCTL_DEBUG set)."""
    if os.environ.get("NSQCTL_DEBUG"):
        return None
    return Path(tempfile.gettempdir()) / f"nsqctl-spark-{os.getuid()}.log"


@contextlib.contextmanager
def _jvm_stderr_to(path: Path | None) -> Iterator[None]:
    """The JVM inherits fd 2 at launch: point it at a log file so Spark's banner lines
    do not mix with nsqctl's one-line output."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)
