"""Undo a node drain (``nsqctl node restore``), from what the drain recorded in the state
directory (:mod:`.records`).

First the record says ``restored``, so that a drain still running stops before its next
tombstone or move, and we wait for its process to end. Then, on the original family, the
nsqd drops and re-opens its nsqlookupd connections, which clears its tombstones at once
(:mod:`.original`; without it they would last nsqlookupd's tombstone lifetime). On
the redesign, each leader the drain moved is moved back to the node, and each copy it moved
off comes back; youzan elects leaders itself, so one may end elsewhere: that is reported,
not hidden.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from nsqctl.admin.drain.defaults import DEFAULT_RESTORE_WAIT
from nsqctl.admin.drain.moves import LeaderMove
from nsqctl.admin.drain.original import find_peer, listed_topics, reregister
from nsqctl.admin.drain.records import (
    DrainRecord,
    MovedLeader,
    read_drains,
    running_elsewhere,
    update_drain,
)
from nsqctl.admin.drain.redesign import move_leader, read_topic_states
from nsqctl.admin.partitions import TopicState, redesign_leader, registered_nsqds
from nsqctl.admin.requests import AdminReport, admin_client
from nsqctl.errors import NotFoundError, NsqctlError
from nsqctl.stats.read import fetch_nsqd_stats

Say = Callable[[str], None]


@dataclass
class RestoreResult:
    node: str
    family: str
    ok: bool
    notes: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "family": self.family,
            "ok": self.ok,
            "notes": self.notes,
            "failed": self.failed,
        }


async def _drain_gone(record: DrainRecord, deadline: float) -> bool:
    """Wait for a drain still running elsewhere to see ``restored`` and stop (it checks
    before each step), so that no tombstone or move of it lands after the undo."""
    while running_elsewhere(record):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.2)
    return True


async def restore_node(
    lookupd_http: Sequence[str],
    node: str,
    *,
    wait: float = DEFAULT_RESTORE_WAIT,
    say: Say | None = None,
    state_dir: Path | None = None,
) -> RestoreResult:
    """Undo the drain of ``node`` recorded in the state directory (see the module doc)."""
    tell = say or (lambda _line: None)
    records = read_drains(state_dir)
    record = records.get(node) or next(
        (r for r in records.values() if node in (r.node, r.node.rsplit(":", 1)[0])), None
    )
    if record is None:
        raise NotFoundError(f"no drain of {node} is recorded on this machine: nothing to restore")
    lookupd = tuple(lookupd_http) or record.lookupd
    deadline = time.monotonic() + wait
    update_drain(record.node, lambda old: replace(old or record, state="restored"), state_dir)
    result = RestoreResult(record.node, record.family, ok=True)
    if not await _drain_gone(record, deadline):
        result.notes.append(f"the drain (pid {record.pid}) has not stopped yet")
    if record.family == "original":
        await _restore_original(record, lookupd, deadline, result, tell)
    else:
        await _restore_redesign(record, lookupd, deadline, result, tell)
    result.ok = not result.failed
    return result


async def _restore_original(
    record: DrainRecord, lookupd: Sequence[str], deadline: float, result: RestoreResult, say: Say
) -> None:
    async with admin_client() as client:
        peer = await find_peer(client, lookupd, record.node)
        if peer is None:
            result.notes.append(
                f"{record.node} is not registered with nsqlookupd (stopped?): it registers "
                "afresh, without tombstones, when it starts"
            )
            return
        say(f"{record.node}: reconnecting to its nsqlookupds to register afresh")
        try:
            await reregister(client, record.node, peer.http_key, lookupd, deadline)
        except NsqctlError as err:
            result.failed.append(str(err))
            return
        topics = sorted({t.topic for t in (await fetch_nsqd_stats(client, record.node)).topics})
        pairs = len(lookupd) * len(topics)
        while True:
            listed = await listed_topics(client, lookupd, topics, peer.http_key)
            if len(listed) == pairs:
                result.notes.append(
                    f"nsqlookupd lists {record.node} again for {len(topics)} topic(s)"
                )
                return
            if time.monotonic() > deadline:
                result.failed.append(
                    f"nsqlookupd lists {record.node} for {len(listed)} of {pairs} "
                    "topic registrations so far"
                )
                return
            await asyncio.sleep(0.2)


async def _back_already(lookupd: Sequence[str], moves: Sequence[MovedLeader]) -> set[int]:
    """The indexes of ``moves`` already undone: the partition led by the move's source again
    (a leader move), or the source in its ISR again (a copy moved off). youzan may have
    put them back itself (an election after the drain), and a move there would be refused
    as one that does nothing: counted as a failed restore of what is restored. The topics
    are read at once, each failure its own: a move whose topic cannot be read now, or every
    move when the cluster cannot be, says for itself when sent."""
    states: list[TopicState] = []
    with contextlib.suppress(NsqctlError, httpx.HTTPError):
        async with admin_client() as client:
            leader = await redesign_leader(client, lookupd, "node restore")
            nodes = await registered_nsqds(client, leader)
            topics = list(dict.fromkeys(m.topic for m in moves))
            states, _ = await read_topic_states(client, leader, topics, nodes)
    by_topic = {s.topic: s for s in states}
    done: set[int] = set()
    for i, m in enumerate(moves):
        state = by_topic.get(m.topic)
        part = state.partitions.get(m.partition) if state else None
        if part is not None and (m.source in part.isr if m.copy else part.leader == m.source):
            done.add(i)
    return done


async def _restore_redesign(
    record: DrainRecord, lookupd: Sequence[str], deadline: float, result: RestoreResult, say: Say
) -> None:
    """Move back each leader the drain moved (youzan may elect another copy: reported)."""
    if not record.moved:
        result.notes.append("the drain moved no leader: nothing to move back")
    back_already = await _back_already(lookupd, record.moved)
    for i, m in reversed(list(enumerate(record.moved))):  # last first: a copy before its leader
        again = "in sync on" if m.copy else "led by"
        if i in back_already:
            result.notes.append(
                f"{m.topic} partition {m.partition}: {again} {record.node} again already, "
                "nothing to move"
            )
            continue
        back = LeaderMove(m.topic, m.partition, m.target, record.node, copy=m.copy)
        say(back.describe())
        wait = max(1.0, deadline - time.monotonic())
        outcome = await move_leader(lookupd, back, wait=wait, progress=say)
        if isinstance(outcome, str) and "already leads" not in outcome:
            result.failed.append(f"{m.topic} partition {m.partition}: {outcome}")
        elif isinstance(outcome, AdminReport) and not outcome.ok:
            result.failed.extend(
                f"{m.topic} partition {m.partition}: {r.error}" for r in outcome.failures
            )
        else:
            result.notes.append(f"{m.topic} partition {m.partition}: {again} {record.node} again")
