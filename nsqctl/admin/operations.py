"""The admin operations the CLI runs: create a topic (waiting until the redesign makes it
writable), and find-plan-send for every other topic and channel action."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from nsqctl.admin.base import NSQ_V1, TIMEOUT
from nsqctl.admin.leader import find_leader, lookupd_nsqds
from nsqctl.admin.placement import Placement, locate_topic
from nsqctl.admin.planners import (
    check_create_options,
    check_node_count,
    plan_channel_action,
    plan_topic_action,
    plan_topic_create,
    plan_topic_delete,
)
from nsqctl.admin.preflight import action_subject, check_nsqds_answer, check_plan
from nsqctl.admin.requests import (
    AdminReport,
    AdminRequest,
    Node,
    NodeResult,
    admin_client,
    execute,
    send_request,
)
from nsqctl.admin.settle import passing, send_until_settled
from nsqctl.admin.versions import fetch_server_version
from nsqctl.errors import AdminError, ConfigError, TopicNotFoundError
from nsqctl.lookup.topology import parse_lookup_body
from nsqctl.protocol.names import validate_channel, validate_topic
from nsqctl.protocol.raw_message import Family

T = TypeVar("T")


async def create_topic_async(
    lookupd_http: Sequence[str],
    topic: str,
    *,
    nsqd_http: Sequence[str] = (),
    partitions: int = 1,
    replicas: int = 1,
    ordered: bool = False,
    ext: bool = False,
    wait: float = 60.0,
    progress: Callable[[str], None] | None = None,
) -> AdminReport:
    """Create a topic; on the redesign wait (up to ``wait`` s) until partitions are writable.

    ``progress`` hears about a wait that takes more than a moment.
    """
    validate_topic(topic)
    async with admin_client() as client:
        leader = await find_leader(client, lookupd_http) if lookupd_http else None
        family: Family = "redesign" if leader else "original"
        nsqds: list[str] = []
        if not lookupd_http and nsqd_http:
            probe = await fetch_server_version(client, "nsqd", nsqd_http[0])
            if probe.family == "redesign":
                raise ConfigError(
                    "creating a topic on the redesign needs `lookupd_http`: its lookupd leader "
                    "creates the partitions"
                )
        if family == "original":
            check_create_options(family, partitions, replicas, ordered, ext)
            nsqds = list(nsqd_http) or await lookupd_nsqds(client, lookupd_http)
        elif leader:
            check_create_options(family, partitions, replicas, ordered, ext)
            registered = await lookupd_nsqds(client, [leader])
            check_node_count(topic, partitions, replicas, ordered, len(registered))
        stages = plan_topic_create(
            family,
            topic,
            lookupds=lookupd_http,
            nsqds=nsqds,
            leader=leader,
            partitions=partitions,
            replicas=replicas,
            ordered=ordered,
            ext=ext,
        )
        if family == "original":
            # one create per nsqd and nsqlookupd, and nothing undoes one: a silent one
            # refuses them all
            await check_nsqds_answer(
                client, action_subject("topic", "create", topic), stages, lookupds=True
            )
        report = AdminReport("topic create", topic, family)
        report.results = await execute(stages, client)
        if family == "original" and not nsqds:
            report.notes.append("no nsqd is registered yet: the topic exists on lookupd only")
        if family == "redesign" and report.ok and wait > 0 and leader:
            nudge = stages[0][0]
            seen = await wait_partitions_writable(
                client, leader, topic, partitions, wait, nudge, progress
            )
            if seen < partitions:
                report.warnings.append(
                    f"only {seen}/{partitions} partitions became writable within {wait:.0f}s: "
                    f"check the nsqd logs and `lookup({topic})`"
                )
            report.notes.append(f"{seen}/{partitions} partition(s) writable")
        return report


# nsqlookupd enables writes on a new topic in its topic check. A check triggered less than
# doCheckInterval/10 (6 s) after the last full one is dropped, and the periodic one runs
# every 60 s; so a topic created soon after another one (or after start-up) can wait two
# minutes. Creating it again with the same parameters is idempotent and triggers a new
# check: we do that every NUDGE_INTERVAL until every partition is writable.
NUDGE_INTERVAL = 6.5


async def wait_partitions_writable(
    client: httpx.AsyncClient,
    leader: str,
    topic: str,
    partitions: int,
    wait: float,
    nudge: AdminRequest | None = None,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Poll ``/lookup?access=w`` until every partition is writable or ``wait`` runs out."""
    started = time.monotonic()
    deadline = started + wait
    next_nudge = started + NUDGE_INTERVAL
    url = f"http://{leader}/lookup"
    params = {"topic": topic, "access": "w", "metainfo": "true"}
    seen = 0
    while True:
        with contextlib.suppress(httpx.HTTPError):  # a wrong shape: LookupDecodeError
            resp = await client.get(url, params=params, headers=NSQ_V1)
            if resp.status_code == 200:
                seen = len(parse_lookup_body(resp.content, source=leader).partitions)
        now = time.monotonic()
        if seen >= partitions or now > deadline:
            return seen
        if nudge is not None and now >= next_nudge:
            await send_request(client, nudge)
            next_nudge = now + NUDGE_INTERVAL
            if progress is not None:
                progress(
                    f"waiting for nsqlookupd to enable writes on {topic}: {seen}/{partitions} "
                    f"partition(s) writable after {now - started:.0f}s (asked it to check again)"
                )
        await asyncio.sleep(0.2)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running event loop
    (async tests call :func:`create_topic`): then it runs in a worker thread, blocking."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass
class TopicCreated:
    topic: str
    flavor: str
    partitions: int
    via: str


def create_topic(
    lookupd_http: list[str],
    topic: str,
    partitions: int = 1,
    replicas: int = 1,
    ordered: bool = False,
    ext: bool = False,
    wait: float = 60.0,
    progress: Callable[[str], None] | None = None,
) -> TopicCreated:
    """Synchronous create for the sandbox; raises :class:`AdminError` on any failure."""
    if not lookupd_http:
        raise AdminError("no lookupd address: give `lookupd_http`")
    report = run_sync(
        create_topic_async(
            lookupd_http,
            topic,
            partitions=partitions,
            replicas=replicas,
            ordered=ordered,
            ext=ext,
            wait=wait,
            progress=progress,
        )
    )
    report.raise_for_failures()
    if report.warnings:
        raise AdminError(f"topic {topic} was created but {report.warnings[0]}")
    via = report.results[0].request.node.address if report.family == "redesign" else ""
    return TopicCreated(
        topic, report.family or "original", partitions, via or ",".join(lookupd_http)
    )


async def prepare(
    kind: str,
    topic: str,
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    *,
    action: str,
    channel: str | None = None,
    partition: int | None = None,
    offset: str | None = None,
    node: str | None = None,
) -> tuple[Placement, list[list[AdminRequest]]]:
    """Find the topic and plan ``kind`` ("topic"/"channel") ``action``, sending nothing;
    ``partition`` and ``node`` (an nsqd, see :func:`select_nodes`) narrow where it goes.

    The CLI shows the plan before asking for confirmation; :func:`run_plan` sends it.
    """
    validate_topic(topic)
    if channel is not None:
        validate_channel(channel)
    left_over = False
    async with admin_client() as client:
        try:
            placement = await locate_topic(topic, lookupd_http, nsqd_http, client)
        except TopicNotFoundError:
            if not (kind == "topic" and action == "delete" and lookupd_http):
                raise
            from nsqctl.admin.partitions.leftover_copies import leftover_placement

            found = await leftover_placement(client, lookupd_http, topic)
            if found is None:
                raise
            placement, left_over = found, True
        needs_leader = (
            placement.family == "redesign"
            and lookupd_http
            and (
                (kind == "topic" and action == "delete")
                or (
                    kind == "channel"
                    and action in ("create", "delete")
                    and placement.meta is not None
                    and placement.meta.disable_channel_auto_create
                )
            )
        )
        leader = await find_leader(client, lookupd_http) if needs_leader else None
    if kind == "topic":
        if action == "delete":
            if node is not None:
                raise ConfigError(
                    "a topic is deleted from the whole cluster: it cannot be limited to one "
                    "nsqd (empty it there instead)",
                    setting="node",
                )
            stages = plan_topic_delete(placement, leader, force=left_over)
        else:
            stages = plan_topic_action(action, placement, node=node)
    else:
        assert channel is not None
        stages = plan_channel_action(
            action, placement, channel, partition=partition, offset=offset, leader=leader, node=node
        )
    await check_plan(placement, kind, action, stages, channel=channel, node=node)
    return placement, stages


async def run_action(
    placement: Placement,
    action: str,
    channel: str | None = None,
) -> AdminReport:
    """Plan and send a topic action (``channel`` None) or a channel action on a placement
    the caller already holds (the dashboard's last poll), with no lookup and no prompt:
    the caller asked first. Planned and checked (:func:`check_plan`) as the CLI's are, so
    both send the same requests or refuse alike."""
    if channel is None:
        kind, stages = "topic", plan_topic_action(action, placement)
    else:
        kind, stages = "channel", plan_channel_action(action, placement, channel)
    await check_plan(placement, kind, action, stages, channel=channel)
    report = AdminReport(f"{kind} {action}", placement.topic, placement.family, channel)
    async with admin_client() as client:
        report.results = await execute(stages, client)
    return report


def _is_redesign_channel_create(action: str, placement: Placement, channel: str | None) -> bool:
    """A redesign channel create found through lookupds: its replicas get it later."""
    return (
        channel is not None
        and action.split()[-1] == "create"
        and placement.family == "redesign"
        and bool(placement.lookupds)
    )


async def run_plan(
    action: str,
    placement: Placement,
    stages: list[list[AdminRequest]],
    *,
    channel: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> AdminReport:
    """Send a prepared plan; nsqds that could not be asked during discovery count as failed.

    ``progress`` hears of a redesign topic delete waiting for nsqlookupd to finish a repair
    (:func:`delete_while_repairing`). A redesign topic delete is done only once no nsqd
    nsqlookupd lists holds a copy (``leftover_copies.remove_leftovers``)."""
    report = AdminReport(action, placement.topic, placement.family, channel)
    report.warnings.extend(placement.warnings)
    async with admin_client() as client:
        if action == "topic delete" and placement.family == "redesign":
            [[req]] = stages  # the lookupd leader's, every partition at once
            report.results = [await delete_while_repairing(client, req, progress)]
            if report.ok:
                from nsqctl.admin.partitions.leftover_copies import remove_leftovers

                report.results += await remove_leftovers(client, placement.lookupds, req)
        else:
            report.results = await execute(stages, client)
        if _is_redesign_channel_create(action, placement, channel) and report.ok:
            assert channel is not None
            from nsqctl.admin.partitions.channel_copies import wait_channel_copied

            note, warning = await wait_channel_copied(
                client, placement.lookupds, placement.topic, channel, stages[-1]
            )
            report.notes.extend([note] if note else [])
            report.warnings.extend([warning] if warning else [])
    for address, error in placement.unreachable:
        req = AdminRequest(Node(address, "nsqd"), "/stats", (("topic", placement.topic),))
        report.results.append(NodeResult(req, "failed", None, f"cannot reach it: {error}"))
    return report


async def delete_while_repairing(
    client: httpx.AsyncClient,
    req: AdminRequest,
    progress: Callable[[str], None] | None = None,
    wait: float = TIMEOUT,
) -> NodeResult:
    """Send a redesign topic delete (``req``, to the lookupd leader), again for up to
    ``wait`` s while it answers "the cluster is unstable".

    nsqlookupd refuses it so, changing nothing, while it repairs what a failure broke: a
    dry run cannot foresee that, so without the wait a dry run's OK could be followed by
    a refused real run. Once ``wait`` is spent the refusal stands, saying nothing changed."""
    said = False

    def waiting(result: NodeResult, waited: float, nudged: bool) -> None:
        nonlocal said
        if not said and progress is not None:
            progress(f"nsqlookupd is repairing the cluster; retrying for up to {wait:.0f}s")
        said = True

    started = time.monotonic()
    topic = dict(req.params)["topic"]
    nudge = AdminRequest(req.node, "/topic/meta/update", (("topic", topic),))
    result = await send_until_settled(client, req, started + wait, nudge, NUDGE_INTERVAL, waiting)
    if passing(result):
        result.error += (
            f" (still after {time.monotonic() - started:.0f}s: nothing was changed; run it "
            "again once nsqlookupd has repaired the cluster)"
        )
    return result
