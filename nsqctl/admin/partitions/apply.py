"""Sending a checked partition plan and waiting until its effect is visible: the cluster
stable enough for nsqlookupd to take it, the new partitions writable, the moved leader
and a full ISR, the new replica count in sync."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

import httpx

from nsqctl.admin.base import NSQ_V1, TIMEOUT, AdminError
from nsqctl.admin.operations import NUDGE_INTERVAL, _wait_partitions
from nsqctl.admin.partitions.plans import PartitionPlan, _req, plan_expand, plan_move, plan_update
from nsqctl.admin.partitions.state import TopicState, topic_state
from nsqctl.admin.requests import AdminReport, AdminRequest, NodeResult, _send

Progress = Callable[[str], None]
POLL = 0.25
_UNSTABLE = "cluster is unstable"


async def _send_when_stable(
    client: httpx.AsyncClient,
    req: AdminRequest,
    topic: str,
    deadline: float,
    progress: Progress | None,
) -> NodeResult:
    """Send ``req``; while nsqlookupd calls the cluster unstable, ask it to check the
    cluster (a meta update that changes nothing) and send again until ``deadline``."""
    nudge = _req(req.node.address, "/topic/meta/update", topic=topic)
    started = time.monotonic()
    next_nudge = started
    while True:
        result, _ = await _send(client, req)
        if result.outcome == "ok" or _UNSTABLE not in result.error:
            return result
        now = time.monotonic()
        if now > deadline:
            result.error += (
                f" (for {now - started:.0f}s: a partition may be leaderless or under repair; "
                "check `nsqctl dash`, then retry)"
            )
            return result
        if now >= next_nudge:
            await _send(client, nudge)
            next_nudge = now + NUDGE_INTERVAL
            if progress is not None and now - started > 1:
                progress(
                    f"nsqlookupd reports the cluster unstable ({now - started:.0f}s): asked it "
                    "to check the cluster again"
                )
        await asyncio.sleep(POLL)


async def _watch(
    client: httpx.AsyncClient,
    plan: PartitionPlan,
    part: int,
    progress: Progress | None,
    transport: httpx.AsyncBaseTransport | None,
) -> None:
    """Report the partition's leader, ISR and catch-up whenever they change (until cancelled)."""
    last = ""
    while True:
        with contextlib.suppress(AdminError, httpx.HTTPError):
            state = await topic_state(client, plan.leader, plan.topic, plan.nodes, transport)
            line = state.describe(part)
            if line != last and progress is not None:
                progress(line)
            last = line
        await asyncio.sleep(POLL * 2)


async def _until(
    client: httpx.AsyncClient,
    plan: PartitionPlan,
    done: Callable[[TopicState], bool],
    deadline: float,
    transport: httpx.AsyncBaseTransport | None,
    nudge: bool = False,
) -> TopicState | None:
    """Poll the topic until ``done`` holds (that state) or ``deadline`` (None); ``nudge``
    asks nsqlookupd for a topic check every ``NUDGE_INTERVAL`` meanwhile."""
    ask = _req(plan.leader, "/topic/meta/update", topic=plan.topic)
    next_nudge = time.monotonic() + NUDGE_INTERVAL
    while True:
        with contextlib.suppress(AdminError, httpx.HTTPError):
            state = await topic_state(client, plan.leader, plan.topic, plan.nodes, transport)
            if done(state):
                return state
        now = time.monotonic()
        if now > deadline:
            return None
        if nudge and now >= next_nudge:
            await _send(client, ask)
            next_nudge = now + NUDGE_INTERVAL
        await asyncio.sleep(POLL)


def _settled(plan: PartitionPlan) -> Callable[[TopicState], bool]:
    """The first move is done: no catch-up left and, for a leader move, a new leader."""
    part = plan.partition
    assert part is not None

    def check(state: TopicState) -> bool:
        p = state.partitions.get(part)
        if p is None or not p.isr or p.catchup or plan.target not in p.isr:
            return False
        return not plan.move_leader or p.leader not in (None, plan.source)

    return check


def _moved(plan: PartitionPlan) -> Callable[[TopicState], bool]:
    part, target, source = plan.partition, plan.target, plan.source
    assert part is not None

    def check(state: TopicState) -> bool:
        p = state.partitions.get(part)
        if p is None or target not in p.isr or source in p.isr or p.catchup:
            return False
        return p.leader == target if plan.move_leader else True

    return check


async def _lead_on(
    client: httpx.AsyncClient,
    plan: PartitionPlan,
    deadline: float,
    report: AdminReport,
    progress: Progress | None,
    transport: httpx.AsyncBaseTransport | None,
) -> bool:
    """After a leader move youzan may have elected another in-sync replica than the
    target: move leadership on to the target (now in the ISR). False when that failed."""
    part, target = plan.partition, plan.target
    assert part is not None and target is not None
    while True:
        state = await _until(client, plan, _settled(plan), deadline, transport)
        p = state.partitions.get(part) if state else None
        src = plan.nodes.get(p.leader or "") if p else None
        if p is None or src is None or p.leader == target:
            return True  # settled on the target, or out of time (the final wait says so)
        again = _req(
            plan.leader, "/topic/partition/move", topic=plan.topic, partition=str(part),
            move_leader="true", move_from=src.node_id, move_to=plan.nodes[target].node_id,
        )  # fmt: skip
        result = await _send_when_stable(client, again, plan.topic, deadline, progress)
        if result.outcome == "ok" or time.monotonic() > deadline:
            report.notes.append(f"nsqlookupd elected {p.leader}; moved leadership on to {target}")
            report.results.append(result)
            return result.outcome == "ok"
        if "not the topic leader" not in result.error:  # else the lookup lagged: look again
            report.results.append(result)
            return False
        await asyncio.sleep(POLL)


async def _move(
    client: httpx.AsyncClient,
    plan: PartitionPlan,
    deadline: float,
    report: AdminReport,
    progress: Progress | None,
    transport: httpx.AsyncBaseTransport | None,
) -> None:
    part = plan.partition
    assert part is not None and plan.target is not None
    watcher = asyncio.create_task(_watch(client, plan, part, progress, transport))
    try:
        result = await _send_when_stable(client, plan.stages[0][0], plan.topic, deadline, progress)
        report.results.append(result)
        if result.outcome != "ok":
            return
        if plan.move_leader and not await _lead_on(client, plan, deadline, report, progress,
                                                   transport):  # fmt: skip
            return
        final = await _until(client, plan, _moved(plan), deadline, transport, nudge=True)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    if final is None:
        report.warnings.append(
            f"the move was accepted but {plan.topic} partition {part} did not settle in time: "
            f"check `nsqctl dash` or `nsqctl lookup {plan.topic}`"
        )
    else:
        report.notes.append(final.describe(part))


def _replicas_in_sync(replicas: int) -> Callable[[TopicState], bool]:
    def check(state: TopicState) -> bool:
        return state.meta.replica == replicas and all(
            len(p.isr) == replicas and not p.catchup for p in state.partitions.values()
        )

    return check


async def apply_plan(
    plan: PartitionPlan,
    *,
    wait: float = 120.0,
    progress: Progress | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AdminReport:
    """Send a checked plan and wait (up to ``wait`` s) until its effect is visible.

    The report holds the per-request results; a change accepted but not visible in time
    is a warning naming what is missing.
    """
    report = AdminReport(plan.action, plan.topic, "redesign")
    report.notes.extend(plan.notes)
    deadline = time.monotonic() + wait
    # the move's request blocks while the target catches up: let it take the whole wait
    timeout = httpx.Timeout(TIMEOUT, read=max(wait, TIMEOUT))
    async with httpx.AsyncClient(timeout=timeout, headers=NSQ_V1, transport=transport) as client:
        if plan.action == "topic move":
            await _move(client, plan, deadline, report, progress, transport)
            return report
        req = plan.stages[0][0]
        result = await _send_when_stable(client, req, plan.topic, deadline, progress)
        report.results.append(result)
        if result.outcome != "ok":
            return report
        if plan.action == "topic expand":
            left = max(0.0, deadline - time.monotonic())
            n = plan.partition_num
            seen = await _wait_partitions(client, plan.leader, plan.topic, n, left, req, progress)
            report.notes.append(f"{seen}/{n} partition(s) writable")
            if seen < n:
                report.warnings.append(
                    f"only {seen}/{n} partitions became writable within {wait:.0f}s: check the "
                    f"nsqd logs and `nsqctl lookup {plan.topic}`"
                )
            return report
        await _settle_update(client, plan, deadline, report, progress, transport)
    return report


async def _settle_update(
    client: httpx.AsyncClient,
    plan: PartitionPlan,
    deadline: float,
    report: AdminReport,
    progress: Progress | None,
    transport: httpx.AsyncBaseTransport | None,
) -> None:
    """Wait for a replica count change to show in every partition's ISR."""
    if plan.replicas is None:
        return
    if progress is not None:
        progress(f"waiting for every partition of {plan.topic} to have {plan.replicas} in sync")
    done = _replicas_in_sync(plan.replicas)
    state = await _until(client, plan, done, deadline, transport, nudge=True)
    if state is None:
        report.warnings.append(
            f"replicas set to {plan.replicas}, but not every partition has {plan.replicas} "
            "in-sync copies yet: nsqlookupd adds a missing replica after its 10-minute "
            "migrate interval (10 s when at most half are in sync) and refuses other "
            "partition operations as 'cluster unstable' meanwhile; watch `nsqctl dash`"
        )
        return
    report.notes.extend(state.describe(p) for p in state.partitions)


async def expand_partitions(
    lookupd_http: Sequence[str],
    topic: str,
    partitions: int,
    *,
    wait: float = 120.0,
    progress: Progress | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AdminReport:
    """Grow ``topic`` to ``partitions`` and wait until every partition is writable."""
    plan = await plan_expand(lookupd_http, topic, partitions, transport=transport)
    return await apply_plan(plan, wait=wait, progress=progress, transport=transport)


async def move_partition(
    lookupd_http: Sequence[str],
    topic: str,
    partition: int,
    to: str,
    *,
    source: str | None = None,
    wait: float = 120.0,
    progress: Progress | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AdminReport:
    """Move ``partition``'s leader (or, with ``source``, the replica there) to the nsqd
    at HTTP address ``to``; wait until the leader and a full ISR show it."""
    plan = await plan_move(lookupd_http, topic, partition, to, source=source, transport=transport)
    return await apply_plan(plan, wait=wait, progress=progress, transport=transport)


async def update_topic_meta(
    lookupd_http: Sequence[str],
    topic: str,
    *,
    replicas: int | None = None,
    sync_every: int | None = None,
    retention_days: int | None = None,
    channel_auto_create: bool | None = None,
    upgrade_ext: bool = False,
    wait: float = 120.0,
    progress: Progress | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AdminReport:
    """Change a topic's dynamic parameters; with ``replicas``, wait for the ISRs to match."""
    plan = await plan_update(
        lookupd_http, topic, replicas=replicas, sync_every=sync_every,
        retention_days=retention_days, channel_auto_create=channel_auto_create,
        upgrade_ext=upgrade_ext, transport=transport,
    )  # fmt: skip
    return await apply_plan(plan, wait=wait, progress=progress, transport=transport)
