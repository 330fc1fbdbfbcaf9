"""Asking every nsqd a plan will change whether it answers, before any request is sent.

An action on several nsqds is sent to all of them at once and nothing undoes it: when one
of them is down or hung (stopped, its sockets open and silent) the others change and it
does not, and the topic is left half paused, half emptied, half deleted. What can be
known beforehand is asked first (``/ping``, within the admin timeout, all at once), and
the plan is refused whole when an nsqd it needs does not answer; a dry run asks the same,
so it gives the same verdict.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import httpx

from nsqctl.admin.leader import EtcdUnreadable
from nsqctl.admin.offsets import check_setoffset
from nsqctl.admin.placement import Placement
from nsqctl.admin.requests import AdminRequest, admin_client, unanswered
from nsqctl.errors import AdminError

if TYPE_CHECKING:  # the partition package uses the operations module, which uses this one
    from nsqctl.admin.partitions.state import RegisteredNsqds, TopicState


async def check_nsqds_answer(
    client: httpx.AsyncClient,
    what: str,
    stages: Sequence[Sequence[AdminRequest]],
    unreadable: Sequence[tuple[str, str]] = (),
    *,
    lookupds: bool = False,
    found_through: Sequence[str] = (),
) -> None:
    """Raise :class:`AdminError` (nothing sent) naming each nsqd of the plan that does not
    answer, and each of ``unreadable`` (``(address, why)``: nsqds that could not be read
    while finding the topic, so may hold it); with ``lookupds``, each nsqlookupd of the
    plan too (a plan that changes every one of them, as an original create or delete does).

    ``found_through``: the original nsqlookupds the plan's nsqds were found through. Each
    must answer as well: an nsqd registers with the nsqlookupds it was told of, so one
    that is silent may be the only one that knows an nsqd holding the topic, and the plan
    would leave that nsqd out without a word. The same rule as a create's, which changes
    every nsqlookupd: the action completes on the whole cluster or is refused."""
    roles = ("nsqd", "lookupd") if lookupds else ("nsqd",)
    targets = sorted(
        {(r.node.address, r.node.role) for stage in stages for r in stage if r.node.role in roles}
        | {(a, "lookupd") for a in found_through}
    )
    found = await asyncio.gather(*(unanswered(client, a) for a, _ in targets))
    silent = [(a, why) for (a, role), why in zip(targets, found, strict=True) if why is not None]
    asked = {a for a, _ in targets}
    silent += [(a, why) for a, why in unreadable if a not in asked]
    if not silent:
        return
    word = {a: "nsqlookupd" if role == "lookupd" else "nsqd" for a, role in targets}
    # the /stats reader's reasons name the nsqd already ("nsqd A /stats: refused"): the
    # rest of such a reason is the why, so each reads "nsqd A (why) ... did not answer"
    names = "; ".join(
        f"{word.get(a, 'nsqd')} {a} ({why.partition(a)[2].strip() if a in why else why})"
        for a, why in silent
    )
    changed = {r.node.address for stage in stages for r in stage}
    if any(word.get(a) == "nsqlookupd" and a in changed for a, _ in silent):
        rest = "on the others only; run it again once every nsqd and nsqlookupd answers"
    elif any(word.get(a) == "nsqlookupd" for a, _ in silent):
        rest = (
            "only the nsqds the others know of, missing any registered with it alone; run it "
            "again once every nsqlookupd answers, or name every nsqd to change with "
            "`nsqd_http` and no `lookupd_http`"
        )
    else:
        rest = "on the other nsqds only; run it again once every nsqd answers"
    raise AdminError(
        f"{what} refused, nothing was changed: {names} did not answer, so it would change {rest}"
    )


async def check_partitions_in_sync(
    client: httpx.AsyncClient,
    what: str,
    lookupd_http: Sequence[str],
    topic: str,
    stages: Sequence[Sequence[AdminRequest]],
) -> None:
    """Raise :class:`AdminError` (nothing sent) when a redesign partition the plan changes
    has too few in-sync copies up to take the change.

    youzan's leader applies a channel change (pause, skip, offset, empty, delete) and then
    has every ISR member apply it, answering an error (or nothing, for 10 s) unless all
    have, and keeps its own change: the partition is left changed on the leader alone. A
    dead member is dropped from the ISR (by nsqlookupd's topic check, or the leader after
    many retries) only while more than ``replicas/2`` would remain. So a partition whose
    ISR lists a member that is down is refused here, before any partition changes: for
    good while ``replicas/2`` or fewer members are up, until the drop otherwise.
    The ISR comes from each partition leader's ``/coordinator/stats`` and "up" means
    registered with the lookupd leader now; a partition whose ISR is not told is let go.

    While etcd is down nsqlookupd cannot name its leader, but the check needs none: the
    nsqlookupd that said so still knows the registered nsqds and each partition's leader
    from memory, and a leader keeps its ISR in memory and passes the change on over RPC
    without etcd. So the same check is asked there, and the action is sent as usual when
    it passes (every in-sync copy up, which youzan's leader then changes in full). What
    etcd's absence changes is the way out of a refusal: no lost copy can be dropped from
    an ISR until etcd is back, so the refusal says so rather than to wait for the drop.
    """
    targets = {
        r.node.partition: r.node.address
        for stage in stages
        for r in stage
        if r.node.role == "nsqd" and r.node.partition is not None
    }
    if not targets or not lookupd_http:
        return
    # loaded here: the partition package uses the operations module, which uses this one
    from nsqctl.admin.partitions.state import (
        redesign_leader_or_etcd_down,
        registered_nsqds,
        topic_state,
    )

    found = await redesign_leader_or_etcd_down(client, lookupd_http, what)
    etcd_down = found.answer if isinstance(found, EtcdUnreadable) else None
    leader = found.lookupd if isinstance(found, EtcdUnreadable) else found
    nodes = await registered_nsqds(client, leader)
    state = await topic_state(client, leader, topic, nodes)
    short = [
        why
        for part in sorted(targets)
        for why in in_sync_refusals(state, part, nodes, etcd_down=etcd_down is not None)
    ]
    if short:
        said = f"{what} refused, nothing was changed: " + "; ".join(short)
        raise AdminError(said + (f" (etcd is down: {etcd_down})" if etcd_down else ""))


def in_sync_refusals(
    state: TopicState, part: int, nodes: RegisteredNsqds, *, etcd_down: bool = False
) -> list[str]:
    """Why partition ``part`` of ``state`` cannot take a change now (none: it can), ``nodes``
    the nsqds registered with the lookupd leader (see :func:`check_partitions_in_sync`). An
    ISR member nsqlookupd lists that does not answer is said to hang, not to be down: it
    is to be resumed, where a down one is to be brought back.

    ``etcd_down``: nsqlookupd cannot read etcd, so it can change no ISR (neither drop a
    lost copy nor let a caught-up one join) until etcd is back, and the way out says so."""
    from nsqctl.admin.partitions.state import HUNG, absent_copies, is_hung, them
    from nsqctl.stats.parse import node_id_key

    p = state.partitions.get(part)
    if p is None or not p.isr:
        if not etcd_down:
            return []  # not told: let go (see check_partitions_in_sync)
        # Without etcd, nsqlookupd names a partition's leader from its cache only while
        # that cache is current: a topic changed just before etcd went away leaves it
        # asking etcd, and naming no leader, for the whole outage. A leader applies a
        # channel change to its own copy first and keeps it when a copy in its ISR fails
        # it: with the ISR unread, nothing tells the change would be whole.
        return [
            f"partition {part}'s ISR could not be read (etcd is down, and nsqlookupd names "
            "no leader for it): its leader would keep the change if a copy in its ISR "
            "failed it; bring etcd back and run it again"
        ]
    need = state.meta.write_quorum
    up = [a for a in p.isr if a in nodes]
    if len(up) < need:
        named, advice = absent_copies(state.topic, p, nodes, need, etcd_down=etcd_down)
        return [
            f"partition {part} has {len(up)} in-sync cop{'y' if len(up) == 1 else 'ies'} "
            f"up of an ISR of {len(p.isr)}{named} and youzan needs {need} of "
            f"{state.meta.replica} to apply a change: {advice}"
        ]
    down = [node_id_key(a) or a for a in p.isr if a not in nodes and not is_hung(a, nodes)]
    hung = [node_id_key(a) or a for a in p.isr if is_hung(a, nodes)]
    said = []
    fails = "its leader would apply the change and fail to pass it on"
    if down and etcd_down:
        said.append(
            f"partition {part}'s ISR still lists {', '.join(down)}, which is down: {fails}, "
            f"and nsqlookupd cannot drop {them(down)} from the ISR while etcd is down: bring "
            f"etcd back, then run it again once nsqlookupd's topic check has dropped {them(down)}"
        )
    elif down:
        said.append(
            f"partition {part}'s ISR still lists {', '.join(down)}, which is down: {fails}; "
            "nsqlookupd drops a lost copy from the ISR in its topic check, run it again then"
        )
    if hung:
        out = (
            f": nsqlookupd cannot drop {them(hung)} from the ISR while etcd is down"
            if etcd_down
            else ", or stop it for good and run it again once nsqlookupd's topic check has "
            "dropped it from the ISR"
        )
        said.append(
            f"partition {part}'s ISR still lists {', '.join(hung)}, {HUNG}: {fails}; resume "
            f"it (or bring it back if it crashed) and run it again{out}"
        )
    return said


def action_subject(kind: str, action: str, topic: str, channel: str | None = None) -> str:
    """How a refusal names the action: ``channel pause orders/billing``."""
    return f"{kind} {action} {topic}" + ("" if channel is None else f"/{channel}")


async def check_plan(
    placement: Placement,
    kind: str,
    action: str,
    stages: Sequence[Sequence[AdminRequest]],
    *,
    channel: str | None = None,
    node: str | None = None,
) -> None:
    """Everything asked before a ``kind`` ("topic"/"channel") ``action`` plan is sent,
    whichever front end sends it (the CLI's run and dry run, the dashboard, the library's
    :func:`run_action`), so that each refuses the same plan in the same words: every nsqd
    answers, every redesign partition has the in-sync copies to take it, a setoffset fits
    every partition. Raises :class:`AdminError`; nothing is sent."""
    what = action_subject(kind, action, placement.topic, channel)
    # an nsqd /stats could not read may hold the topic too, unless the action is for one
    unreadable = placement.unreachable if node is None else ()
    # an original plan sends one request to every nsqlookupd it unregisters from (delete):
    # those must answer too; the redesign's go to the leader just found
    lookupds = placement.family == "original"
    # and on the original, the nsqlookupds the nsqds were found through (none for an
    # action limited to one nsqd: that one was named, not found)
    found_through = placement.lookupds if lookupds and node is None else ()
    async with admin_client() as client:
        await check_nsqds_answer(
            client, what, stages, unreadable, lookupds=lookupds, found_through=found_through
        )
        if placement.family == "redesign":
            await check_partitions_in_sync(
                client, what, placement.lookupds, placement.topic, stages
            )
        if action == "setoffset" and channel is not None:
            await check_setoffset(client, placement.topic, channel, stages)
