"""Sending a checked partition plan and waiting until its effect is visible: the cluster
stable enough for nsqlookupd to take it, the new partitions writable, the moved leader
and a full ISR, the new replica count in sync."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from nsqctl.admin.base import NSQ_V1, TIMEOUT
from nsqctl.admin.operations import NUDGE_INTERVAL, wait_partitions_writable
from nsqctl.admin.partitions.carry import (
    Carried,
    NewPartitions,
    create_until_led,
    register_again,
    rewind_early_writes,
    wait_registered,
)
from nsqctl.admin.partitions.channel_copies import wait_channel_copied
from nsqctl.admin.partitions.plans import (
    MetaChange,
    PartitionPlan,
    leader_request,
    plan_expand,
    plan_move,
    plan_update,
)
from nsqctl.admin.partitions.state import TopicState, leader_load_factors, topic_state
from nsqctl.admin.requests import AdminReport, AdminRequest, NodeResult, send_request
from nsqctl.admin.settle import TEMPORARY, passing, send_until_settled
from nsqctl.errors import AdminError, NsqctlError
from nsqctl.httpclient import http_client
from nsqctl.lookup.client import LookupClient

Progress = Callable[[str], None]
Check = Callable[[TopicState], bool]
POLL = 0.25
# Leader moves one ``topic move`` makes at most while youzan's elections tie: each round
# is a coin toss between the target and another copy, so this many misses are unlikely.
MAX_LEADER_MOVES = 8


@dataclass
class _Run:
    """One plan being applied: where to send, until when, and what to tell."""

    client: httpx.AsyncClient
    plan: PartitionPlan
    deadline: float
    report: AdminReport
    progress: Progress | None

    def say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    async def send(self, req: AdminRequest) -> NodeResult:
        """Send ``req``, again while nsqlookupd turns it away in passing (asking it to check
        the cluster meanwhile), until the deadline (:func:`send_until_settled`)."""
        nudge = leader_request(req.node.address, "/topic/meta/update", topic=self.plan.topic)
        said_temporary = False

        def waiting(result: NodeResult, waited: float, nudged: bool) -> None:
            nonlocal said_temporary
            if TEMPORARY.search(result.error) is not None:
                if not said_temporary:
                    said_temporary = True
                    self.say(f"nsqlookupd: {result.error}; sending again until it settles")
            elif nudged and waited > 1:
                self.say(
                    f"nsqlookupd reports the cluster unstable ({waited:.0f}s): "
                    "asked it to check the cluster again"
                )

        started = time.monotonic()
        result = await send_until_settled(
            self.client, req, self.deadline, nudge, NUDGE_INTERVAL, waiting
        )
        if passing(result):
            result.error += (
                f" (for {time.monotonic() - started:.0f}s: a partition may be leaderless or "
                "under repair; check `dash()`, then retry)"
            )
        return result

    async def state(self) -> TopicState:
        p = self.plan
        return await topic_state(self.client, p.leader, p.topic, p.nodes)

    async def watch(self, part: int) -> None:
        """Tell the partition's leader, ISR and catch-up whenever they change (until
        cancelled)."""
        last = ""
        while True:
            with contextlib.suppress(AdminError, httpx.HTTPError):
                line = (await self.state()).describe(part)
                if line != last:
                    self.say(line)
                last = line
            await asyncio.sleep(POLL * 2)

    async def until(self, done: Check, nudge: bool = False) -> TopicState | None:
        """Poll the topic until ``done`` holds (that state) or the deadline (None);
        ``nudge`` asks nsqlookupd for a topic check every ``NUDGE_INTERVAL`` meanwhile."""
        ask = leader_request(self.plan.leader, "/topic/meta/update", topic=self.plan.topic)
        next_nudge = time.monotonic() + NUDGE_INTERVAL
        while True:
            with contextlib.suppress(AdminError, httpx.HTTPError):
                state = await self.state()
                if done(state):
                    return state
            now = time.monotonic()
            if now > self.deadline:
                return None
            if nudge and now >= next_nudge:
                await send_request(self.client, ask)
                next_nudge = now + NUDGE_INTERVAL
            await asyncio.sleep(POLL)

    # ---------------------------------------------------------------- per operation

    async def expand(self, req: AdminRequest, wait: float) -> None:
        """Create the topic's channels on the new partitions as soon as their leaders
        accept them, or for a topic whose channels nsqlookupd registers have it write the
        list onto the new partitions (see :mod:`nsqctl.admin.partitions.carry`), meanwhile
        waiting until every partition is writable, re-sending the expand as the nudge."""
        p, left = self.plan, max(0.0, self.deadline - time.monotonic())
        n = p.partition_num
        new_parts = range(p.before.meta.partition_num, n)
        new = NewPartitions(p.topic, p.channels, new_parts, sorted(p.nodes), self.deadline)
        registered = p.before.meta.disable_channel_auto_create and bool(p.channels)
        registrations = await register_again(self.send, p.leader, p.topic) if registered else []
        carrying = asyncio.create_task(
            wait_registered(self.client, p.leader, new)
            if registered
            else create_until_led(self.client, new)
        )
        try:
            seen = await wait_partitions_writable(
                self.client, p.leader, p.topic, n, left, req, self.progress
            )
            carried = await carrying
        finally:
            carrying.cancel()
        carried.registered = registrations
        if p.channels:
            await rewind_early_writes(self.client, p.topic, carried)
            self.report.results.extend(carried.results())
            self.report.notes.extend(carried.notes)
            if carried.complete:
                self.report.notes.append(
                    f"channel(s) {', '.join(p.channels)} present on new partition(s) "
                    f"{', '.join(map(str, new_parts))} before the expand was reported done"
                )
                await self.channels_copied(carried)
        self.report.notes.append(f"{seen}/{n} partition(s) writable")
        if seen < n:
            self.report.warnings.append(
                f"only {seen}/{n} partitions became writable within {wait:.0f}s: check the "
                f"nsqd logs and `lookup({p.topic})`"
            )

    async def channels_copied(self, carried: Carried) -> None:
        """Wait until every replica of the new partitions holds the carried channels, as
        `channel create` does: a failover to a replica without one would start it at the
        end there."""
        if self.plan.before.meta.replica <= 1:
            return
        for channel in self.plan.channels:
            again = [r.request for (_, c), r in carried.created.items() if c == channel]
            note, warning = await wait_channel_copied(
                self.client, [self.plan.leader], self.plan.topic, channel, again
            )
            self.report.notes.extend([note] if note else [])
            self.report.warnings.extend([warning] if warning else [])

    async def move(self) -> None:
        plan, part = self.plan, self.plan.partition
        assert part is not None and plan.target is not None
        watcher = asyncio.create_task(self.watch(part))
        try:
            result = await self.send(plan.stages[0][0])
            self.report.results.append(result)
            if result.outcome != "ok":
                return
            if plan.move_leader and not await self.lead_on():
                return
            final = await self.until(_moved(plan), nudge=True)
            if final is not None and plan.move_leader and not await self.writable_on_target():
                self.fail(
                    f"{plan.target} leads {plan.topic} partition {part}, but nsqlookupd does "
                    "not send writes to it yet: check `lookup("
                    f"{plan.topic})` and the nsqd logs"
                )
                return
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        if final is None:  # a failure, not a warning: the caller must not take it as moved
            self.fail(
                f"the move was accepted but {plan.topic} partition {part} did not settle in "
                f"time: check `dash()` or `lookup({plan.topic})`"
            )
        else:
            self.report.notes.append(final.describe(part))

    async def writable_on_target(self) -> bool:
        """Producers are sent to the target: the plain ``/lookup?access=w`` (what clients
        ask) names it for the partition. The consistent lookup shows a new leader a moment
        before it registers as writable; seen right after a move: no writable leader."""
        plan, part = self.plan, self.plan.partition
        async with LookupClient([plan.leader], timeout=TIMEOUT) as lk:
            while True:
                with contextlib.suppress(NsqctlError, httpx.HTTPError):
                    topo = await lk.lookup(plan.topic, "w")
                    if any(
                        p.partition == part and p.leader.http_key == plan.target
                        for p in topo.partition_infos
                    ):
                        return True
                if time.monotonic() > self.deadline:
                    return False
                await asyncio.sleep(POLL)

    def fail(self, error: str) -> None:
        """The last request was accepted but did not do what the command asked."""
        last = self.report.results[-1]
        last.outcome, last.error = "failed", error

    async def lead_on(self) -> bool:
        """Move leadership on until the target leads. youzan does not elect ``move_to``: a
        leader move makes it elect, among the in-sync copies but the leader, the one with
        the least leader load factor (``move_to`` only says where a missing copy goes). So
        move on from each copy it chose; when it chooses one that already led here it would
        only go round (a target loaded more than both others never gets elected): stop, a
        failure. Unless the target weighs no more than that copy: youzan breaks ties at
        random, so move on again, up to ``MAX_LEADER_MOVES`` moves in all. True when the
        target leads or time ran out (the final wait says so).
        """
        plan, part, target = self.plan, self.plan.partition, self.plan.target
        assert part is not None and target is not None and plan.source is not None
        moved_from = [plan.source]  # the copies that led here and were moved away from
        while True:
            state = await self.until(_settled(plan, moved_from[-1]))
            p = state.partitions.get(part) if state else None
            src = plan.nodes.get(p.leader or "") if p else None
            if p is None or src is None or p.leader is None or p.leader == target:
                return True  # on the target, or out of time (the final wait says so)
            elected = p.leader
            if p.leader in moved_from:
                await asyncio.sleep(POLL * 4)  # the same after a second look: not a lag
                again_state = await self.until(_settled(plan, moved_from[-1]))
                again_p = again_state.partitions.get(part) if again_state else None
                if again_p is not None and again_p.leader != p.leader:
                    continue
                loads = await leader_load_factors(self.client, plan.leader)
                if not _ties(loads, target, p.leader) or len(moved_from) >= MAX_LEADER_MOVES:
                    self.went_round([*moved_from[1:], p.leader], loads)
                    return False
                self.say(
                    f"nsqlookupd elected {p.leader} again: {target} ties with it in leader load "
                    "factor, a tie youzan breaks at random"
                )
            again = leader_request(
                plan.leader,
                "/topic/partition/move",
                topic=plan.topic,
                partition=str(part),
                move_leader="true",
                move_from=src.node_id,
                move_to=plan.nodes[target].node_id,
            )
            self.say(f"nsqlookupd elected {p.leader}, not {target}: moving leadership on")
            result = await self.send(again)
            lagged = "not the topic leader" in result.error and time.monotonic() < self.deadline
            if result.outcome != "ok" and lagged:  # /lookup lagged behind the election
                await asyncio.sleep(POLL)
                continue
            self.report.results.append(result)
            if result.outcome != "ok":
                return False
            self.report.notes.append(f"nsqlookupd elected {p.leader}; moved leadership on")
            moved_from.append(elected)

    def went_round(self, elected: list[str], loads: dict[str, float]) -> None:
        """Fail the move: youzan's elections came back to a copy that already led
        (``loads``: the leader load factors that election was judged by)."""
        plan = self.plan
        shown = ", ".join(f"{a} {loads[a]:.4f}" for a in sorted(loads, key=loads.__getitem__))
        self.fail(
            f"the move was accepted but nsqlookupd elected {' then '.join(elected)}, not "
            f"{plan.target}: youzan makes the in-sync copy with the least leader load factor "
            f"the leader, whatever `to` says ({shown or 'load factors not reported'}); "
            f"{plan.topic} partition {plan.partition} is led by {elected[-1]}"
        )

    async def settle_update(self) -> None:
        """Wait for a replica count change to show in every partition's ISR."""
        plan = self.plan
        if plan.replicas is None:
            return
        self.say(f"waiting for every partition of {plan.topic} to have {plan.replicas} in sync")
        state = await self.until(_replicas_in_sync(plan.replicas), nudge=True)
        if state is None:
            self.report.warnings.append(
                f"replicas set to {plan.replicas}, but not every partition has {plan.replicas} "
                "in-sync copies yet: nsqlookupd adds a missing replica after its 10-minute "
                "migrate interval (10 s when at most half are in sync) and refuses other "
                "partition operations as 'cluster unstable' meanwhile; watch `dash()`"
            )
            return
        self.report.notes.extend(state.describe(p) for p in state.partitions)


def _ties(loads: dict[str, float], target: str, elected: str) -> bool:
    """The target weighs no more than the copy just elected, so the next election may go
    its way: youzan ranges over a Go map of load factors (random order) and keeps the
    first least one, and its figures are up to a minute old."""
    ours, theirs = loads.get(target), loads.get(elected)
    return ours is not None and theirs is not None and ours <= theirs


def _settled(plan: PartitionPlan, moved_from: str) -> Check:
    """A leader move from ``moved_from`` is done: no catch-up left and another leader."""
    part = plan.partition
    assert part is not None

    def check(state: TopicState) -> bool:
        p = state.partitions.get(part)
        if p is None or not p.isr or p.catchup or plan.target not in p.isr:
            return False
        return p.leader not in (None, moved_from)

    return check


def _moved(plan: PartitionPlan) -> Check:
    """All done: the target in the ISR (leading, for a leader move), the source out of it.

    Leadership handed to a copy already in sync is a transfer: youzan keeps the source's
    copy in the ISR then (with replicas = nsqd count there is nowhere else for it), so
    waiting for it to leave would wait out the whole --wait on a finished move."""
    part, target, source = plan.partition, plan.target, plan.source
    assert part is not None
    before = plan.before.partitions.get(part)
    transfer = plan.move_leader and before is not None and target in before.isr

    def check(state: TopicState) -> bool:
        p = state.partitions.get(part)
        if p is None or target not in p.isr or p.catchup or (source in p.isr and not transfer):
            return False
        return p.leader == target if plan.move_leader else True

    return check


def _replicas_in_sync(replicas: int) -> Check:
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
) -> AdminReport:
    """Send a checked plan and wait (up to ``wait`` s) until its effect is visible.

    The report holds the per-request results; a change accepted but not visible in time
    is a warning naming what is missing.
    """
    report = AdminReport(plan.action, plan.topic, "redesign")
    # the move's request blocks while the target catches up: let it take the whole wait
    timeout = httpx.Timeout(TIMEOUT, read=max(wait, TIMEOUT))
    async with http_client(timeout=timeout, headers=NSQ_V1) as client:
        await _send(_Run(client, plan, time.monotonic() + wait, report, progress), wait)
    if report.ok:
        # the plan's notes speak of the change as made ("reported as accepted"): after a
        # refusal they would read as if part of it went through
        report.notes[:0] = plan.notes
    return report


async def _send(run: _Run, wait: float) -> None:
    """Carry out ``run``'s plan, its results in ``run.report``: a move is sent and watched
    by :meth:`_Run.move` (it may move leadership on); any other plan (an expand, an
    update) is one request, and only once that was accepted is its effect waited for (the
    new partitions writable, or every ISR at a new replica count): after a refusal nothing
    changed, so there is nothing to wait for."""
    plan, report = run.plan, run.report
    if plan.action == "topic move":
        await run.move()
        return
    req = plan.stages[0][0]
    result = await run.send(req)
    report.results.append(result)
    if result.outcome != "ok":
        return
    if plan.action == "topic expand":
        await run.expand(req, wait)
    else:
        await run.settle_update()


async def expand_partitions(
    lookupd_http: Sequence[str],
    topic: str,
    partitions: int,
    *,
    wait: float = 120.0,
    progress: Progress | None = None,
) -> AdminReport:
    """Grow ``topic`` to ``partitions`` and wait until every partition is writable."""
    plan = await plan_expand(lookupd_http, topic, partitions)
    return await apply_plan(plan, wait=wait, progress=progress)


async def move_partition(
    lookupd_http: Sequence[str],
    topic: str,
    partition: int,
    to: str,
    *,
    source: str | None = None,
    wait: float = 120.0,
    progress: Progress | None = None,
) -> AdminReport:
    """Move ``partition``'s leader (or, with ``source``, the replica there) to the nsqd
    at address ``to``; wait until the leader and a full ISR show it."""
    plan = await plan_move(lookupd_http, topic, partition, to, source=source)
    return await apply_plan(plan, wait=wait, progress=progress)


async def update_topic_meta(
    lookupd_http: Sequence[str],
    topic: str,
    change: MetaChange,
    *,
    wait: float = 120.0,
    progress: Progress | None = None,
) -> AdminReport:
    """Change a topic's dynamic parameters; with ``replicas``, wait for the ISRs to match."""
    plan = await plan_update(lookupd_http, topic, change)
    return await apply_plan(plan, wait=wait, progress=progress)
