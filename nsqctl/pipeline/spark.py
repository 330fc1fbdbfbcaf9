"""A SparkSession for nsqctl's jobs: master from flag, ``SPARK_MASTER`` or ``local[*]``.

Local masters bind to 127.0.0.1 with the UI off and logging quiet; so does a cluster
master on 127.0.0.1 (a local standalone cluster). Any other cluster master keeps Spark's
own networking settings (executors must reach the driver). On a cluster, executors run
nsqctl's Python code themselves: :func:`check_executors` proves they can (nsqctl
importable, nsqd reachable) with a tiny job before the real one, so a cluster that cannot
fails with one line instead of a Java stack trace (docs/pipeline-cluster.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsqctl.debug_env import debug_from_env
from nsqctl.errors import ConfigError, NsqctlError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
MIN_JAVA = 17
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
EXECUTOR_CHECK_TIMEOUT = 120.0

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark: %p %c{1}: %m%n
"""


class ExecutorError(NsqctlError):
    """Spark executors lack what an nsqctl job needs (nsqctl importable, network reach)."""


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
        raise ConfigError("the data pipeline needs PySpark: `pip install 'pyspark>=4'`") from err
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
        builder = builder.config("spark.driver.memory", os.environ.get("NSQCTL_SPARK_MEMORY", "1g"))
    if master.startswith("local") or _loopback_cluster(master):
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    with _jvm_stderr_to(spark_log_path()):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_log_path() -> Path | None:
    """Where the JVM's stderr goes (None: the terminal, with NSQCTL_DEBUG set)."""
    if debug_from_env():
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


def _loopback_cluster(master: str) -> bool:
    """``spark://127.0.0.1:7077``: a cluster on this machine, so the driver needs (and
    should offer) nothing beyond loopback."""
    match = re.fullmatch(r"spark://([^:/,]+):\d+", master)
    return match is not None and match.group(1) in LOOPBACK_HOSTS


def check_executors(
    spark: SparkSession,
    reach: list[str] | None = None,
    timeout: float = EXECUTOR_CHECK_TIMEOUT,
) -> list[dict[str, object]]:
    """Before a job whose executors run nsqctl code (replay): a tiny job on the cluster
    imports the replay module and opens a TCP connection to each ``reach`` address
    (HOST:PORT of nsqd/nsqlookupd). Raises ExecutorError with one actionable line
    when any task could not; returns each task's report. Local masters run executors in
    this Python on this machine: nothing to check.

    Spark places tasks where it likes: with one task per core every executor usually
    runs one, but an executor added later is not covered.
    """
    sc = spark.sparkContext
    if (sc.master or "").startswith("local"):
        return []
    addresses = list(reach or [])
    tasks = max(sc.defaultParallelism, 1)
    rdd = sc.parallelize(range(tasks), tasks).mapPartitions(_probe(addresses))
    reports = _collect_within(sc, rdd, timeout)
    from nsqctl import __version__

    python = getattr(sc, "pythonExec", None) or "python3"  # what executors were told to run
    for r in reports:
        where = f"Spark executor on {r['host']} (Python {python})"
        if r["import_error"]:
            raise ExecutorError(
                f"{where} cannot import nsqctl ({r['import_error']}): install nsqctl with "
                "its spark extra into that Python on every worker, or set PYSPARK_PYTHON to "
                "a Python there that has it"
            )
        if r["nsqctl"] != __version__:
            raise ExecutorError(
                f"{where} has nsqctl {r['nsqctl']}, this driver {__version__}: install the "
                "same nsqctl version on the workers"
            )
        unreachable = r["unreachable"]
        if unreachable:
            assert isinstance(unreachable, list)
            raise ExecutorError(
                f"{where} cannot reach {', '.join(map(str, unreachable))}: replay publishes from "
                "the executors, so every worker needs network access to the "
                "`nsqd_tcp`/`lookupd_http` addresses; give addresses the workers can reach"
            )
    return reports


def _probe(addresses: list[str]) -> Callable[[Iterable[int]], Iterator[dict[str, object]]]:
    """The executor-side check. A closure, so Spark ships it by value: it must run (and
    report) where nsqctl itself cannot be imported, so it uses the standard library only."""

    def probe(_rows: Iterable[int]) -> Iterator[dict[str, object]]:
        import importlib
        import socket

        report: dict[str, object] = {
            "host": socket.gethostname(),
            "nsqctl": None,
            "import_error": None,
            "unreachable": [],
        }
        try:
            importlib.import_module("nsqctl.pipeline.replay")
            report["nsqctl"] = importlib.import_module("nsqctl").__version__
        except Exception as err:  # reported to the driver, whatever it is
            report["import_error"] = f"{type(err).__name__}: {err}"
        unreachable: list[str] = []
        for addr in addresses:
            host, _, port = addr.rpartition(":")
            try:
                socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
            except (OSError, ValueError) as err:
                unreachable.append(f"{addr} ({getattr(err, 'strerror', None) or err})")
        report["unreachable"] = unreachable
        yield report

    return probe


def _collect_within(sc: Any, rdd: Any, timeout: float) -> list[dict[str, object]]:
    """rdd.collect(), cancelled after ``timeout`` (a cluster without free cores or memory
    never runs it: Spark only logs 'Initial job has not accepted any resources')."""
    import threading

    group = f"nsqctl-executor-check-{os.getpid()}"
    out: list[Any] = []

    def run() -> None:
        try:
            sc.setJobGroup(group, "nsqctl executor check", interruptOnCancel=True)
            out.append(rdd.collect())
        except Exception as err:  # re-raised in the caller's thread
            out.append(err)

    worker = threading.Thread(target=run, name="nsqctl-executor-check", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        sc.cancelJobGroup(group)
        worker.join(10)
        raise ExecutorError(
            f"no Spark executor ran nsqctl's check job within {timeout:.0f}s on "
            f"{sc.master}: check that the cluster has alive workers with a free core and "
            "enough memory (its master's web UI lists them)"
        )
    result = out[0]
    if isinstance(result, Exception):
        raise ExecutorError(
            f"Spark executors could not run Python ({_executor_failure(result)}): set "
            "PYSPARK_PYTHON to a Python that exists on every worker with pyspark and "
            "nsqctl installed"
        ) from result
    return result  # type: ignore[no-any-return]


def _executor_failure(err: Exception) -> str:
    """The line of a Py4J/Python task failure that says why (not the Java stack)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    for pattern in (r"Cannot run program", r"No module named", r"\w+(Error|Exception): "):
        for line in lines:
            if match := re.search(pattern, line):
                return line[match.start() :][:300]
    return lines[0][:300] if lines else type(err).__name__


# Spark's error class for a file it could not read (a corrupt or truncated Parquet file,
# or not Parquet at all): bad input, as the local engine's pyarrow read error is.
FAILED_READ_FILE = "FAILED_READ_FILE"


@contextlib.contextmanager
def spark_errors(what: str, unreadable: str) -> Iterator[None]:
    """Turn a failed Spark job into one line: ``what``, then the root cause's message.

    A job that fails in the JVM (a corrupt Parquet file, a file gone while read) reaches
    Python as a Py4J error whose text is a Java stack trace of hundreds of lines; the
    reason is the innermost cause's message. A file Spark could not read is bad input:
    :class:`ConfigError` (exit 2), said as ``unreadable`` then the reason, as the local
    engine says it, so both engines answer the same archive alike. A file the executors
    did not find is not a damaged one (:func:`missing_file_error` says which it is), nor
    is one whose read failed on the way to it (:func:`read_failed_on_the_way`: a runtime
    failure, exit 1, to run again). Anything else passes through untouched.
    """
    try:
        yield
    except NsqctlError:
        raise
    except Exception as err:
        gone = missing_file(err)
        if gone is not None:
            raise missing_file_error(gone, active_master(), what, unreadable) from err
        unread = unreadable_file_reason(err)
        if unread is not None and read_failed_on_the_way(err):
            raise NsqctlError(
                f"{what}: reading the archive failed on the way ({unread}): run it again"
            ) from err
        if unread is not None:
            raise ConfigError(f"{unreadable}: {unread}") from err
        refused = worker_config_error(err)
        if refused is not None:
            raise ConfigError(refused) from err
        reason = spark_failure_reason(err)
        if reason is None:
            raise
        raise NsqctlError(f"{what}: {reason}") from err


#: How a ConfigError raised in a Python worker (an executor reading a damaged input file
#: with nsqctl's own reader) reads in the failed job's text: its traceback's last line.
_WORKER_CONFIG_ERROR = re.compile(r"nsqctl\.errors\.ConfigError: (.+)")


def worker_config_error(err: BaseException) -> str | None:
    """The message of a :class:`ConfigError` an executor's Python worker raised, if that
    is what failed the job: the same bad input, found where the data is read rather than
    by reading everything twice on the driver first."""
    found = _WORKER_CONFIG_ERROR.findall(str(err))
    return found[-1].strip() if found else None


def _java_causes(err: BaseException) -> list[Any]:
    """The JVM exception behind ``err`` and its causes, outermost first (none when ``err``
    is not a Py4J error)."""
    causes: list[Any] = []
    cause = getattr(err, "java_exception", None)  # py4j.protocol.Py4JJavaError
    while cause is not None and len(causes) < 20:  # a cause chain is short; never loop forever
        causes.append(cause)
        cause = cause.getCause()
    return causes


def _message(cause: Any) -> str | None:
    text = cause.getMessage()
    return None if text is None else str(text)


def unreadable_file_reason(err: BaseException) -> str | None:
    """Why Spark could not read an input file, one line, when that is what failed
    (its ``FAILED_READ_FILE`` error); None otherwise. The innermost cause that says
    something (a truncated file's is a bare NullPointerException), else Spark's own
    words without their ``[ERROR_CLASS]`` tag."""
    causes = _java_causes(err)
    failed = [c for c in causes if (_message(c) or "").startswith(f"[{FAILED_READ_FILE}")]
    if not failed:
        return None
    inner = causes[causes.index(failed[-1]) + 1 :]
    said = [text for c in inner if (text := _message(c))]
    if said:
        return _one_line(said[-1])
    return _one_line(re.sub(r"^\[[A-Z_.]+\]\s*", "", _message(failed[-1]) or ""))


#: JVM exceptions that say a read failed on the way to the file (the network, the
#: storage service), not in it: the same read may well succeed when run again. Matched on
#: the class name of each cause inside Spark's FAILED_READ_FILE.
TRANSIENT_READ_CAUSES = re.compile(
    r"^java\.net\."  # a connection refused, reset or timed out; a host not resolved
    r"|^java\.io\.InterruptedIOException$"
    r"|^java\.util\.concurrent\.TimeoutException$"
    r"|^org\.apache\.hadoop\.hdfs\.BlockMissingException$"  # no datanode served a block
    r"|^org\.apache\.hadoop\.fs\.s3a\.AWSClientIOException$"
    r"|\.SdkClientException$"  # the AWS SDKs' client-side (network) failures
    r"|^org\.apache\.http\.(NoHttpResponseException|ConnectionClosedException)$"
)


def transient_read_causes(class_names: Iterable[str]) -> bool:
    """Whether any of these JVM exception class names is a read failing on the way
    (:data:`TRANSIENT_READ_CAUSES`)."""
    return any(TRANSIENT_READ_CAUSES.search(name) for name in class_names)


def read_failed_on_the_way(err: BaseException) -> bool:
    """Whether a failed read of an input file (Spark's ``FAILED_READ_FILE``) failed on
    the way to the file rather than in it: an archive on HDFS or S3 read through a
    network that dropped. That is no damaged archive, and saying so (bad input, exit 2)
    would send an operator to inspect good files."""
    names = []
    for cause in _java_causes(err):
        try:
            names.append(str(cause.getClass().getName()))
        except Exception:
            continue
    return transient_read_causes(names)


#: Spark's error condition for an input file that was listed but is gone when read.
FILE_NOT_EXIST = f"{FAILED_READ_FILE}.FILE_NOT_EXIST"


def missing_file(err: BaseException) -> str | None:
    """The path (a URI) of the input file Spark listed and then could not find when an
    executor came to read it, when that is what failed the job; None otherwise."""
    for cause in _java_causes(err):
        try:
            if cause.getCondition() != FILE_NOT_EXIST:
                continue
            path = cause.getMessageParameters().get("path")
        except Exception:
            continue
        return None if path is None else str(path)
    return None


def active_master() -> str:
    """The master of this process's SparkSession (the one that ran the failed job).

    The active session is the calling thread's; a library caller may run the job on
    another thread than the one that made the session, so the process's default one
    counts too (``SparkSession.active``). Only with neither is the master the one
    nsqctl would choose now."""
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    try:
        master = SparkSession.active().sparkContext.master
    except PySparkRuntimeError:  # NO_ACTIVE_OR_DEFAULT_SESSION
        master = None
    return master or resolve_master(None)


def local_file(uri: str) -> Path | None:
    """``uri`` as a path on this machine (``file:`` or no scheme); None for any other
    file system, which only the executors can look at."""
    from nsqctl.pipeline.trace import file_path

    if uri.startswith("file:") or "://" not in uri:
        return Path(file_path(uri))
    return None


def missing_file_error(uri: str, master: str, what: str, unreadable: str) -> NsqctlError:
    """What an input file that Spark's executors did not find means, in one line.

    The driver lists the input and the executors read it. When the file is still here,
    the executors are not reading this machine's disk (a cluster master, with the archive
    on a local path): the input must be put where every executor sees it, which is bad
    input (exit 2) rather than a damaged file. When it is gone here too, it was removed
    between the listing and the read (an archive rotating or being cleaned up): nothing
    is wrong with what was asked, and running again reads what is there then (exit 1)."""
    here = local_file(uri)
    shown = str(here) if here is not None else uri
    if here is not None and here.exists() and not master.startswith("local"):
        return ConfigError(
            f"{unreadable}: {shown} is on this machine but Spark's executors (master "
            f"{master}) did not find it: put the archive where every executor reads the "
            "same path (shared storage, hdfs://, s3a://), or use a local master (local[*])"
        )
    return NsqctlError(
        f"{what}: {shown} was removed while Spark read it (the archive rotated or was "
        "cleaned up meanwhile?): run it again"
    )


def spark_failure_reason(err: BaseException) -> str | None:
    """The innermost JVM cause of a failed Spark call, one line; None when ``err`` is not
    a Spark/JVM failure."""
    causes = _java_causes(err)
    if causes:
        messages = [_message(c) or str(c.toString()) for c in causes]
        return _one_line(messages[-1])
    from pyspark.errors.exceptions.captured import CapturedException

    if isinstance(err, CapturedException):
        return _one_line(str(err))
    return None


def _one_line(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first or "no reason given"
