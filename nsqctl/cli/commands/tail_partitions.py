"""``tail --partition``: checked against the topic's topology before subscribing.

The consumer takes the partitions it is given as a filter on what the lookup lists, so a
partition the topic does not have (or any partition, on the original family, which has
none) matches nothing and tail would wait in silence for ever. ``pub`` refuses the same
values from the same topology; tail refuses them before it subscribes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from nsqctl.errors import ConfigError, NsqctlError

__all__ = ["check_partitions"]

log = logging.getLogger("nsqctl.cli.tail")


async def check_partitions(lookupd: Sequence[str], topic: str, partitions: Sequence[int]) -> None:
    """Raise :class:`ConfigError` when the lookup shows ``topic`` cannot have every one of
    ``partitions``. Nothing is refused on what cannot be seen (no lookupd, no answer, a
    topic not created yet): the consumer then waits and reports as it always does."""
    if not partitions or not lookupd:
        return
    from nsqctl.lookup.client import LookupClient

    try:
        async with LookupClient(lookupd, discover=False) as client:
            topo = await client.lookup(topic, access="r", metainfo=True)
    except NsqctlError as err:
        log.debug("no topology for %s to check --partition against: %s", topic, err)
        return
    if topo.is_empty and not topo.is_redesign:
        return
    if not topo.is_redesign:
        raise ConfigError(
            f"topic {topic!r} is on original NSQ servers, which have no partitions: "
            "leave out --partition"
        )
    num = topo.partition_num
    missing = sorted({p for p in partitions if p >= num})
    if num > 0 and missing:
        raise ConfigError(
            f"topic {topic!r} has {num} partition(s), numbered 0-{num - 1}: there is no "
            f"partition {', '.join(map(str, missing))} (pick --partition from 0-{num - 1})"
        )
