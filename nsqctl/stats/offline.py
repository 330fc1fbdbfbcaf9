"""Build snapshots from saved payload files: offline analysis, tests and benchmarks
use the very parser the live poller uses."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from nsqctl.stats.model import ClusterSnapshot, LookupdStatus
from nsqctl.stats.parse import (
    decode,
    parse_cluster_stats,
    parse_coordinator_stats,
    parse_nsqd_stats,
)


def load_json(path: Path | str) -> object:
    return decode(Path(path).read_bytes())


def snapshot_from_files(
    nsqd: Mapping[str, Path | str],
    *,
    taken_at: float,
    coordinator: Mapping[str, Path | str] | None = None,
    cluster: Path | str | None = None,
    lookupds: tuple[LookupdStatus, ...] = (),
) -> ClusterSnapshot:
    """``nsqd`` maps an nsqd HTTP address to its saved ``/stats`` body; every node is taken
    as fetched at ``taken_at`` (rates then use the difference between two snapshots)."""
    nodes = tuple(
        parse_nsqd_stats(load_json(path), address, fetched_at=taken_at)
        for address, path in nsqd.items()
    )
    coord = tuple(
        info
        for address, path in (coordinator or {}).items()
        for info in parse_coordinator_stats(load_json(path), address)
    )
    return ClusterSnapshot(
        taken_at=taken_at,
        nodes=nodes,
        lookupds=lookupds,
        coordinator=coord,
        cluster=parse_cluster_stats(load_json(cluster)) if cluster else None,
    )
