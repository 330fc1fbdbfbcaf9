"""Checking a redesign ``channel setoffset`` on every partition before any is moved.

youzan moves each partition's channel on its own, and nothing undoes a move: a command
that moved two partitions and failed on the third leaves the channel half set. So what
the server can be asked beforehand is asked first, and the command is refused whole when
a partition would fail:

- a ``timestamp:`` offset is searched in the partition's commit log, and a partition that
  holds no messages has none: youzan answers HTTP 500 "commit log end of file". Such a
  partition is found from its leader's ``/stats`` (message count 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import httpx

from nsqctl.admin.placement import NsqdStats, fetch_stats
from nsqctl.admin.requests import AdminRequest
from nsqctl.errors import AdminError

if TYPE_CHECKING:
    from nsqctl.stats.model import TopicPartitionStats


def partition_stats(
    stats: NsqdStats, address: str, topic: str, partition: int | None
) -> TopicPartitionStats | None:
    """What the nsqd at ``address`` reports of ``topic``'s ``partition`` (None: not told)."""
    node = stats.nodes.get(address)
    topics = node.topics if node is not None else ()
    return next((t for t in topics if t.topic == topic and t.partition == partition), None)


async def check_setoffset(
    client: httpx.AsyncClient, topic: str, channel: str, stages: Sequence[Sequence[AdminRequest]]
) -> None:
    """Raise :class:`AdminError` (nothing sent) when a partition of the plan cannot take
    the offset; the message names each such partition and the commands that would work."""
    requests = [r for stage in stages for r in stage if r.path == "/channel/setoffset"]
    if not requests or not (requests[0].body or b"").startswith(b"timestamp:"):
        return
    addresses = sorted({r.node.address for r in requests})
    stats = await fetch_stats(client, addresses, topic)
    empty: list[int] = []
    unknown: list[str] = []
    for req in requests:
        part = req.node.partition
        entry = partition_stats(stats, req.node.address, topic, part)
        if entry is None:
            reason = stats.errors.get(req.node.address, "it does not report the partition")
            unknown.append(f"partition {part} on {req.node.address} ({reason})")
        elif entry.message_count == 0 and entry.channel(channel) is not None:
            empty.append(part if part is not None else 0)
    if not empty and not unknown:
        return
    moved = sorted({r.node.partition for r in requests if r.node.partition is not None} - {*empty})
    problems = [
        *(
            f"partition {p} holds no messages, so youzan cannot search it by time "
            "(it answers 'commit log end of file')"
            for p in empty
        ),
        *(f"cannot check {u}" for u in unknown),
    ]
    hint = (
        "; to move the others, run it once per partition with `partition` "
        f"({', '.join(map(str, moved))})"
        if moved and not unknown
        else ""
    )
    raise AdminError(
        f"channel setoffset {topic}/{channel} refused, nothing was changed: "
        + "; ".join(problems)
        + hint
    )
