"""Session-wide real clusters, started through the same code as ``nsqctl sandbox``.

One original cluster and one redesign cluster (2 nsqd each) serve the whole test run;
tests that need to kill or reconfigure servers start their own with ``start_cluster``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nsqctl.servers import build, cluster, process
from nsqctl.servers.catalog import Flavor
from tests.helpers.clusters import running_cluster

# Servers started by this test run die with it, even when pytest is killed with -9.
process.DIE_WITH_PARENT = True


def _bins(flavor: Flavor) -> Path:
    """Build once per session (cached). A build failure fails the tests that need it:
    nothing skips. Without proxy access, set NSQCTL_GO_MODULE_SOURCES (see README)."""
    return build.build(flavor)


@pytest.fixture(scope="session")
def original_bins() -> Path:
    return _bins("original")


@pytest.fixture(scope="session")
def redesign_bins() -> Path:
    return _bins("redesign")


StartCluster = Callable[..., cluster.Cluster]


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[StartCluster]:
    """Start private clusters for one test; every one is killed by PID afterwards (its
    data is thrown away, so no node need spend its second leaving gracefully)."""
    started: list[cluster.Cluster] = []

    def _start(flavor: Flavor, **kwargs: object) -> cluster.Cluster:
        bins = _bins(flavor)
        directory = tmp_path / f"{flavor}-{len(started)}"
        c = cluster.start(flavor, directory, bin_dir=bins, **kwargs)  # type: ignore[arg-type]
        started.append(c)
        return c

    yield _start
    for c in started:
        c.kill()


def _session_cluster(
    flavor: Flavor, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[cluster.Cluster]:
    directory = tmp_path_factory.mktemp(f"{flavor}-cluster")
    yield from running_cluster(flavor, directory, nsqd=2, lookupd=1)


@pytest.fixture(scope="session")
def original_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.Cluster]:
    yield from _session_cluster("original", tmp_path_factory)


@pytest.fixture(scope="session")
def redesign_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.Cluster]:
    yield from _session_cluster("redesign", tmp_path_factory)


@pytest.fixture(params=["original", "redesign"])
def any_cluster(request: pytest.FixtureRequest) -> cluster.Cluster:
    """Runs a test once against each family's session cluster."""
    chosen: cluster.Cluster = request.getfixturevalue(f"{request.param}_cluster")
    return chosen


def pytest_report_header(config: pytest.Config) -> str:
    return f"nsqctl server cache: {os.environ.get('NSQCTL_SERVER_CACHE') or build.cache_root()}"


#: Modules that import the Spark pipeline's packages (pyspark/pyarrow) at their top.
SPARK_ONLY_MODULES = {"test_pipeline_archive.py", "test_pipeline_units.py"}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``-m "not spark"`` is the core install's run (no pyspark/pyarrow): modules that need
    the extra are left out there instead of being imported only to skip."""
    markexpr = " ".join(str(config.getoption("markexpr", "") or "").split())
    if collection_path.name in SPARK_ONLY_MODULES and markexpr == "not spark":
        return True
    return None
