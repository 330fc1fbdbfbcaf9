"""How a failed read of an input file is said when Spark ran the job: a damaged file is
bad input (exit 2); a read that failed on the way to the file (HDFS, S3, the network) is
a runtime failure to run again (exit 1), not a damaged archive.

The JVM errors here are scripted Python objects shaped like Py4J's (``java_exception``,
``getCause``, ``getMessage``, ``getClass().getName()``): no real Spark job can be made to
lose its network to HDFS or S3 on cue, and this module must run without pyspark. The
damaged-file and removed-file cases meet a real Spark in
tests/integration/test_spark_corrupt_archive.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.pipeline.spark import spark_errors, transient_read_causes

READ = "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file hdfs://nn/a.parquet."


@dataclass
class JavaClass:
    name: str

    def getName(self) -> str:
        return self.name


@dataclass
class JavaThrowable:
    """One JVM exception as Py4J shows it (its methods in the JVM's spelling)."""

    class_name: str
    message: str | None
    cause: JavaThrowable | None = None

    def getMessage(self) -> str | None:
        return self.message

    def getCause(self) -> JavaThrowable | None:
        return self.cause

    def getClass(self) -> JavaClass:
        return JavaClass(self.class_name)


class FakePy4JError(Exception):
    def __init__(self, java_exception: JavaThrowable) -> None:
        super().__init__("An error occurred while calling o42.collectToPython.")
        self.java_exception = java_exception


def job_failed(inner: JavaThrowable) -> FakePy4JError:
    """A job aborted by a task that could not read its file, because of ``inner``."""
    read = JavaThrowable("org.apache.spark.SparkException", READ, inner)
    return FakePy4JError(JavaThrowable("org.apache.spark.SparkException", "Job aborted", read))


def raised(err: Exception) -> NsqctlError:
    with pytest.raises(NsqctlError) as caught, spark_errors("replay stopped", "cannot read"):
        raise err
    return caught.value


@pytest.mark.parametrize(
    "name",
    [
        "java.net.SocketTimeoutException",
        "java.net.ConnectException",
        "java.net.SocketException",
        "org.apache.hadoop.hdfs.BlockMissingException",
        "org.apache.hadoop.fs.s3a.AWSClientIOException",
        "software.amazon.awssdk.core.exception.SdkClientException",
        "com.amazonaws.SdkClientException",
    ],
)
def test_a_read_failing_on_the_way_is_a_runtime_failure(name: str) -> None:
    assert transient_read_causes(["org.apache.spark.SparkException", name])
    err = raised(job_failed(JavaThrowable(name, "Read timed out")))
    assert type(err) is NsqctlError  # exit 1: not ConfigError (exit 2)
    assert str(err) == (
        "replay stopped: reading the archive failed on the way (Read timed out): run it again"
    )


@pytest.mark.parametrize(
    "name",
    [
        "org.apache.parquet.io.ParquetDecodingException",
        "java.lang.RuntimeException",
        "java.io.EOFException",
        "java.lang.NullPointerException",
        "java.io.IOException",
    ],
)
def test_a_damaged_file_stays_bad_input(name: str) -> None:
    assert not transient_read_causes(["org.apache.spark.SparkException", name])
    err = raised(job_failed(JavaThrowable(name, "is not a Parquet file")))
    assert isinstance(err, ConfigError)
    assert str(err) == "cannot read: is not a Parquet file"
