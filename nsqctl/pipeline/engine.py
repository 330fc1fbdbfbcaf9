"""Which engine answers a trace or runs a replay, and why.

``auto``: the local engine (pyarrow, in-process: no JVM to start) for local
sources below a size threshold; Spark for remote sources (``s3a://``, ``hdfs://``, …),
when a Spark master is asked for (``--spark-master``, ``SPARK_MASTER``), for ``--where``
(a Spark SQL predicate), and for sources too large for one process.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from nsqctl.errors import ConfigError, NsqctlError

log = logging.getLogger("nsqctl.pipeline.engine")

ENGINES = ("auto", "local", "spark")
#: Above this many bytes of local input, ``auto`` picks Spark. A trace reads a footer per
#: file and the matching row groups only, so it stays local far longer than a replay,
#: which holds every matching row in one process, and Parquet of small messages grows
#: many times over in memory (bench/README.md, Pipeline): 128 MiB keeps that to a few GB.
LOCAL_MAX_BYTES = {"trace": 16 << 30, "replay": 128 << 20}
#: What each engine needs, and the extra that brings it.
NEEDS = {"local": ("pyarrow", "archive"), "spark": ("pyspark", "spark")}


class MissingExtraError(NsqctlError):
    """An optional package is not installed (an archive engine's, the served dashboard's);
    the message names the extra that brings it."""


@dataclass(frozen=True)
class Choice:
    engine: str  # "local" | "spark"
    reason: str  # for -v output and logs: why this engine


def is_remote(source: str) -> bool:
    return "://" in source and not source.startswith("file://")


def local_bytes(sources: Iterable[str]) -> int:
    """Bytes of the input files under local sources (Parquet under a directory)."""
    total = 0
    for source in sources:
        path = Path(source.removeprefix("file://"))
        if path.is_file():
            total += path.stat().st_size
        elif path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return total


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def choose(
    command: str,
    requested: str,
    sources: list[str],
    spark_master: str | None = None,
    where: str | None = None,
) -> Choice:
    """The engine for ``command`` ("trace" or "replay") over ``sources``."""
    if requested not in ENGINES:
        raise ConfigError(f"`engine` {requested!r} is not one of {', '.join(ENGINES)}")
    remote = next((s for s in sources if is_remote(s)), None)
    if requested == "spark":
        choice = Choice("spark", "`engine` spark")
    elif requested == "local":
        if remote:
            raise ConfigError(
                f"`engine` local reads local files only and {remote} is remote: "
                "use `engine` spark (or auto)"
            )
        if where:
            raise ConfigError(
                "`where` is a Spark SQL predicate: use `engine` spark, or the filters both "
                "engines have (`since_ns`/`until_ns`/`topics`/`partition`/`trace_id`/`grep`)"
            )
        if spark_master:
            raise ConfigError("`spark_master` applies to the Spark engine: drop `engine` local")
        choice = Choice("local", "`engine` local")
    else:
        choice = _auto(command, sources, remote, spark_master, where)
    require(choice.engine)
    log.info("%s: engine %s (%s)", command, choice.engine, choice.reason)
    return choice


def _auto(
    command: str, sources: list[str], remote: str | None, master: str | None, where: str | None
) -> Choice:
    if remote:
        return Choice("spark", f"{remote} is remote")
    if master:
        return Choice("spark", f"`spark_master` {master} given")
    if os.environ.get("SPARK_MASTER"):
        return Choice("spark", f"SPARK_MASTER={os.environ['SPARK_MASTER']} is set")
    if where:
        return Choice("spark", "`where` is a Spark SQL predicate")
    size, limit = local_bytes(sources), LOCAL_MAX_BYTES[command]
    if size > limit:
        return Choice("spark", f"{_size(size)} of local input is above {_size(limit)}")
    return Choice("local", f"{_size(size)} of local input is below {_size(limit)}")


def require(engine: str) -> None:
    """One line naming the extra when the engine's package is not installed."""
    module, extra = NEEDS[engine]
    try:
        found = importlib.util.find_spec(module) is not None
    except ImportError:
        found = False
    if not found:
        raise MissingExtraError(
            f"the {engine} engine needs {module}, which is not installed: "
            f"pip install 'nsqctl[{extra}]'"
        )
