"""Private clusters for module fixtures (the session ones are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nsqctl.servers import build, cluster
from nsqctl.servers.catalog import Flavor
from nsqctl.servers.cluster import Cluster


def running_cluster(flavor: Flavor, directory: Path, **kwargs: Any) -> Iterator[Cluster]:
    """A fixture's body: a cluster of ``flavor``'s built servers in ``directory``
    (``kwargs`` as :func:`nsqctl.servers.cluster.start` takes them), killed by PID when
    the fixture ends, however the tests went (nothing reads its data afterwards, so no
    node need spend its second leaving gracefully)."""
    c = cluster.start(flavor, directory, bin_dir=build.build(flavor), **kwargs)
    try:
        yield c
    finally:
        c.kill()
