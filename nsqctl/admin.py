"""Cluster administration over the servers' HTTP APIs, for both families.

Where each operation goes (taken from nsqadmin and the servers' HTTP handlers):

- Original: topic create registers the topic on every lookupd (as nsqadmin does) and also
  creates it on every nsqd, so it is visible and writable everywhere at once. Delete finds
  the topic's producers *first*, then deletes on every lookupd, then on those nsqds
  (nsqadmin's order). Pause/unpause/empty go to every nsqd that has the topic; channel
  create/delete also go to every lookupd.
- Redesign: topic create/delete only on the lookupd *leader* (``partition=**`` deletes every
  partition); channel operations on each partition's leader nsqd with ``partition=``. Its
  nsqd has no topic pause/empty. skip/unskip/setoffset exist only there.

The planners (``plan_*``) are pure: they turn a :class:`Placement` into HTTP requests, so
both families' URLs are unit-tested without servers. :func:`execute` runs the requests in
stages and reports per node.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import urlencode

import httpx

from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.lookup.client import LookupClient
from nsqctl.lookup.model import TopicMeta, Topology, unwrap_payload
from nsqctl.protocol.names import validate_channel, validate_topic

NSQ_V1 = {"Accept": "application/vnd.nsq; version=1.0"}
TIMEOUT = 10.0
MAX_PARTITIONS = 255  # redesign lookupd limits
MAX_REPLICAS = 5

Family = Literal["original", "redesign"]
T = TypeVar("T")
TOPIC_ACTIONS = ("pause", "unpause", "empty")
CHANNEL_ACTIONS = ("create", "delete", "pause", "unpause", "empty", "skip", "unskip", "setoffset")
REDESIGN_ONLY = ("skip", "unskip", "setoffset")
_NOT_FOUND = ("TOPIC_NOT_FOUND", "CHANNEL_NOT_FOUND", "E_TOPIC_NOT_EXIST", "NOT EXIST")


class AdminError(NsqctlError):
    """An admin request was refused or could not be made."""


class TopicNotFoundError(AdminError):
    """No lookupd or nsqd knows the topic."""


def unwrap_response(body: object) -> dict:
    """Both response shapes (``{"status_code", "data"}``-wrapped or bare) as a dict."""
    data = unwrap_payload(body)[0]
    return data if isinstance(data, dict) else {}


def topic_not_found(topic: str, where: Sequence[str]) -> TopicNotFoundError:
    """The one-line unknown-topic error every command uses."""
    return TopicNotFoundError(
        f"topic {topic!r} not found (asked {', '.join(where) or 'nobody'}): list topics with "
        f"`nsqctl topic list`, or create it with `nsqctl topic create {topic}`"
    )


# ----------------------------------------------------------------- lookupd leader


def _leader_from(lookupd_http: str, resp: httpx.Response) -> str | None:
    if resp.status_code == 404:
        return None
    if resp.status_code != 200:
        raise AdminError(f"{lookupd_http} /listlookup answered {resp.status_code}")
    try:
        leader = unwrap_response(resp.json()).get("lookupdleader") or {}
    except ValueError:
        raise AdminError(
            f"{lookupd_http} /listlookup answered non-JSON: is it nsqlookupd's HTTP port?"
        ) from None
    if not leader.get("NodeIP") or not leader.get("HttpPort"):
        raise AdminError(
            f"the lookupd cluster behind {lookupd_http} has no leader yet: retry in a few seconds"
        )
    return f"{leader['NodeIP']}:{leader['HttpPort']}"


def lookupd_leader(client: httpx.Client, lookupd_http: str) -> str | None:
    """The redesign lookupd leader (HOST:HTTPPORT); None on an original lookupd (404)."""
    try:
        resp = client.get(f"http://{lookupd_http}/listlookup", headers=NSQ_V1)
    except httpx.HTTPError as err:
        raise AdminError(f"cannot reach nsqlookupd {lookupd_http}: {_describe(err)}") from None
    return _leader_from(lookupd_http, resp)


async def find_leader(client: httpx.AsyncClient, lookupd_http: Sequence[str]) -> str | None:
    """Async :func:`lookupd_leader` over several lookupds: the first that answers decides."""
    errors: list[str] = []
    for address in lookupd_http:
        try:
            resp = await client.get(f"http://{address}/listlookup", headers=NSQ_V1)
        except httpx.HTTPError as err:
            errors.append(f"{address} ({_describe(err)})")
            continue
        return _leader_from(address, resp)
    raise AdminError(
        f"no nsqlookupd answered (tried {', '.join(errors)}): check that nsqlookupd is running "
        "and that the address is its HTTP port (default 4161)"
    )


# ----------------------------------------------------------------- requests and results


@dataclass(frozen=True)
class Node:
    """One server an admin request goes to; ``partition`` only on the redesign."""

    address: str
    role: Literal["nsqd", "lookupd"]
    partition: int | None = None

    def __str__(self) -> str:
        where = f"{self.role} {self.address}"
        return where if self.partition is None else f"{where} (partition {self.partition})"


@dataclass(frozen=True)
class AdminRequest:
    """One POST; ``params`` keep their order so URLs are stable for tests and output."""

    node: Node
    path: str
    params: tuple[tuple[str, str], ...]
    body: bytes | None = None

    @property
    def target(self) -> str:
        return f"{self.path}?{urlencode(self.params, safe='*')}" if self.params else self.path

    @property
    def url(self) -> str:
        return f"http://{self.node.address}{self.target}"

    def describe(self) -> str:
        body = f" body={self.body.decode(errors='replace')!r}" if self.body else ""
        return f"POST {self.target}{body}"


Outcome = Literal["ok", "skipped", "failed"]


@dataclass
class NodeResult:
    """What one request did; ``skipped`` is a not-found on some nodes while others worked."""

    request: AdminRequest
    outcome: Outcome
    status: int | None = None
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        node = self.request.node
        return {
            "node": node.address,
            "role": node.role,
            "partition": node.partition,
            "request": self.request.describe(),
            "outcome": self.outcome,
            "status": self.status,
            "error": self.error or None,
        }


@dataclass
class AdminReport:
    """Per-node results of one command, plus warnings that did not fail it."""

    action: str
    topic: str
    family: Family | None
    channel: str | None = None
    results: list[NodeResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[NodeResult]:
        return [r for r in self.results if r.outcome == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "topic": self.topic,
            "channel": self.channel,
            "family": self.family,
            "ok": self.ok,
            "results": [r.to_json() for r in self.results],
            "warnings": self.warnings,
            "notes": self.notes,
        }

    def raise_for_failures(self) -> None:
        """One line naming every failed node, for the CLI's exit status."""
        bad = self.failures
        if bad:
            what = "; ".join(f"{r.request.node} ({r.error})" for r in bad)
            raise AdminError(
                f"{self.action} failed on {len(bad)} of {len(self.results)} request(s): {what}"
            )


def _describe(err: BaseException) -> str:
    if isinstance(err, httpx.ConnectError):
        return "connection refused or host unreachable"
    if isinstance(err, httpx.TimeoutException):
        return "timed out"
    return f"{type(err).__name__}: {err}".rstrip(": ")


def _error_text(resp: httpx.Response) -> str:
    """The server's reason: v1 ``{"message"}``, wrapped ``status_txt`` or plain text."""
    text = resp.text.strip()
    with contextlib.suppress(ValueError):
        body = resp.json()
        if isinstance(body, dict):
            text = str(body.get("message") or body.get("status_txt") or text)
    hint = ""
    if resp.status_code in (401, 403):
        hint = " (permission denied: check TLS/auth settings and the server's access rules)"
    elif "NOT_LEADER" in text.upper():
        hint = " (the partition leader moved: run the command again)"
    return f"HTTP {resp.status_code} {text[:200]}".rstrip() + hint


def _is_not_found(resp: httpx.Response) -> bool:
    return resp.status_code == 404 and any(t in resp.text.upper() for t in _NOT_FOUND)


async def _send(client: httpx.AsyncClient, req: AdminRequest) -> tuple[NodeResult, bool]:
    """Run one request; the flag marks a not-found that may become ``skipped``."""
    try:
        resp = await client.post(req.url, content=req.body, headers=NSQ_V1)
    except httpx.HTTPError as err:
        return NodeResult(req, "failed", None, f"cannot reach it: {_describe(err)}"), False
    if resp.status_code == 200:
        return NodeResult(req, "ok", 200), False
    return NodeResult(req, "failed", resp.status_code, _error_text(resp)), _is_not_found(resp)


async def execute(
    stages: Sequence[Sequence[AdminRequest]], client: httpx.AsyncClient
) -> list[NodeResult]:
    """Run each stage's requests concurrently, stages in order (nsqadmin's delete order).

    A not-found on an nsqd counts as ``skipped`` when another nsqd did the job (that node
    never had the topic/channel); when no nsqd succeeded it stays a failure.
    """
    results: list[NodeResult] = []
    maybe_skip: list[NodeResult] = []
    for stage in stages:
        done = await asyncio.gather(*(_send(client, r) for r in stage))
        for result, not_found in done:
            results.append(result)
            if not_found and result.request.node.role == "nsqd":
                maybe_skip.append(result)
    if any(r.outcome == "ok" and r.request.node.role == "nsqd" for r in results):
        for result in maybe_skip:
            result.outcome = "skipped"
    return results


# ----------------------------------------------------------------- where a topic lives


@dataclass(frozen=True)
class Placement:
    """Where one topic lives: the nsqds to act on and the lookupds that know it."""

    topic: str
    family: Family
    nsqds: tuple[Node, ...] = ()
    lookupds: tuple[str, ...] = ()
    meta: TopicMeta | None = None
    channels: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    unreachable: tuple[tuple[str, str], ...] = ()


def placement_from_topology(topo: Topology, lookupds: Sequence[str]) -> Placement:
    """Nodes from a lookup: each partition's leader (redesign) or each producer (original)."""
    family: Family = "redesign" if topo.is_redesign else "original"
    nodes = tuple(
        Node(peer.http_key, "nsqd", part if family == "redesign" else None)
        for peer, part in topo.targets()
    )
    warnings = tuple(
        f"nsqlookupd {s.address} did not answer: {s.error}" for s in topo.sources if not s.ok
    )
    return Placement(topo.topic, family, nodes, tuple(lookupds), topo.meta, topo.channels, warnings)


def placement_from_stats(topic: str, stats: dict[str, dict[str, Any] | str]) -> Placement:
    """Nodes from nsqd ``/stats`` (no lookupd): nsqds holding the topic; leaders only on the
    redesign (its topics carry ``topic_partition`` and ``is_leader``)."""
    nodes: list[Node] = []
    unreachable: list[tuple[str, str]] = []
    channels: set[str] = set()
    redesign = False
    for address, body in stats.items():
        if isinstance(body, str):
            unreachable.append((address, body))
            continue
        for t in body.get("topics") or []:
            if t.get("topic_name") != topic:
                continue
            channels.update(c.get("channel_name", "") for c in t.get("channels") or [])
            if "topic_partition" in t:
                redesign = True
                if t.get("is_leader", True):
                    nodes.append(Node(address, "nsqd", int(t["topic_partition"])))
            else:
                nodes.append(Node(address, "nsqd"))
    return Placement(
        topic,
        "redesign" if redesign else "original",
        tuple(nodes),
        channels=tuple(sorted(c for c in channels if c)),
        unreachable=tuple(unreachable),
    )


async def fetch_stats(
    client: httpx.AsyncClient, nsqd_http: Sequence[str], topic: str | None = None
) -> dict[str, dict[str, Any] | str]:
    """``/stats?format=json`` from each nsqd; an error string for those that fail."""

    async def one(address: str) -> dict[str, Any] | str:
        params = {"format": "json", **({"topic": topic} if topic else {})}
        try:
            resp = await client.get(f"http://{address}/stats", params=params, headers=NSQ_V1)
        except httpx.HTTPError as err:
            return _describe(err)
        if resp.status_code != 200:
            return _error_text(resp)
        try:
            return unwrap_response(resp.json())
        except ValueError:
            return "answered non-JSON: is this nsqd's HTTP port (default 4151)?"

    found = await asyncio.gather(*(one(a) for a in nsqd_http))
    return dict(zip(nsqd_http, found, strict=True))


async def locate_topic(
    topic: str,
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    client: httpx.AsyncClient,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Placement:
    """Where ``topic`` lives, via lookupd when given (as nsqadmin), else the nsqds' /stats.

    Raises :class:`TopicNotFoundError` when nobody knows it.
    """
    if lookupd_http:
        async with LookupClient(list(lookupd_http), timeout=TIMEOUT, transport=transport) as lk:
            topo = await lk.lookup(topic, "r", metainfo=True)
        if topo.topic_not_found:
            raise topic_not_found(topic, [f"nsqlookupd {a}" for a in lookupd_http])
        return placement_from_topology(topo, lookupd_http)
    placement = placement_from_stats(topic, await fetch_stats(client, nsqd_http, topic))
    if not placement.nsqds and not placement.unreachable:
        raise topic_not_found(topic, [f"nsqd {a}" for a in nsqd_http])
    if not placement.nsqds:
        raise AdminError(
            "no nsqd answered: "
            + "; ".join(f"{a} ({e})" for a, e in placement.unreachable)
            + ": check the --nsqd-http addresses (nsqd's HTTP port, default 4151)"
        )
    return placement


# ----------------------------------------------------------------- planners (pure)


def _req(node: Node, path: str, body: bytes | None = None, **params: str) -> AdminRequest:
    return AdminRequest(node, path, tuple(params.items()), body)


def _need_nsqds(placement: Placement, what: str) -> None:
    if not placement.nsqds:
        raise AdminError(
            f"topic {placement.topic!r} is registered but no nsqd has it yet, so there is "
            f"nothing to {what}: publish to it, or check `nsqctl lookup {placement.topic}`"
        )


def check_create_options(
    family: Family, partitions: int, replicas: int, ordered: bool, ext: bool
) -> None:
    """Reject options the family cannot honour before anything is sent."""
    if family == "original":
        if partitions != 1 or replicas != 1 or ordered or ext:
            raise ConfigError(
                "the original NSQ has no partitions, replicas, ordered or ext topics: drop "
                "--partitions/--replicas/--ordered/--ext, or point at a redesign cluster"
            )
        return
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ConfigError(f"--partitions must be between 1 and {MAX_PARTITIONS}")
    if not 1 <= replicas <= MAX_REPLICAS:
        raise ConfigError(f"--replicas must be between 1 and {MAX_REPLICAS}")


def check_node_count(
    topic: str, partitions: int, replicas: int, ordered: bool, nodes: int
) -> None:
    """nsqlookupd's placement rule, said before it answers a bare "No node is available".

    Every replica of a partition needs its own nsqd. An unordered topic also puts at most
    one partition replica on a node (partitions × replicas nodes); an ordered topic may
    put several partitions on one node.
    """
    if replicas > nodes:
        raise ConfigError(
            f"topic {topic}: {replicas} replicas need {replicas} nsqd nodes, but {nodes} "
            f"registered with lookupd: add nsqd nodes or use --replicas {nodes}"
        )
    if not ordered and partitions * replicas > nodes:
        raise ConfigError(
            f"topic {topic}: an unordered topic puts each partition replica on its own nsqd, "
            f"so {partitions} partitions x {replicas} replica(s) need {partitions * replicas} "
            f"nodes and {nodes} registered: add nsqd nodes, use fewer partitions/replicas, or "
            "--ordered (ordered topics may share nodes)"
        )


def plan_topic_create(
    family: Family,
    topic: str,
    *,
    lookupds: Sequence[str] = (),
    nsqds: Sequence[str] = (),
    leader: str | None = None,
    partitions: int = 1,
    replicas: int = 1,
    ordered: bool = False,
    ext: bool = False,
) -> list[list[AdminRequest]]:
    """Original: every lookupd, then every nsqd. Redesign: one request to the leader."""
    check_create_options(family, partitions, replicas, ordered, ext)
    if family == "original":
        return [
            [_req(Node(a, "lookupd"), "/topic/create", topic=topic) for a in lookupds],
            [_req(Node(a, "nsqd"), "/topic/create", topic=topic) for a in nsqds],
        ]
    if leader is None:
        raise AdminError("creating a redesign topic needs the lookupd leader: pass --lookupd")
    params = {"topic": topic, "partition_num": str(partitions), "replicator": str(replicas)}
    if ordered:
        params["orderedmulti"] = "true"
    if ext:
        params["extend"] = "true"
    return [[_req(Node(leader, "lookupd"), "/topic/create", **params)]]


def plan_topic_delete(placement: Placement, leader: str | None = None) -> list[list[AdminRequest]]:
    """Original: lookupds, then the producers found beforehand. Redesign: leader, all parts."""
    topic = placement.topic
    if placement.family == "redesign":
        if leader is None:
            raise AdminError("deleting a redesign topic needs the lookupd leader: pass --lookupd")
        return [[_req(Node(leader, "lookupd"), "/topic/delete", topic=topic, partition="**")]]
    return [
        [_req(Node(a, "lookupd"), "/topic/delete", topic=topic) for a in placement.lookupds],
        [_req(n, "/topic/delete", topic=topic) for n in placement.nsqds],
    ]


def plan_topic_action(action: str, placement: Placement) -> list[list[AdminRequest]]:
    """pause / unpause / empty on every nsqd holding the topic (original only)."""
    if action not in TOPIC_ACTIONS:
        raise ConfigError(f"unknown topic action {action!r}")
    if placement.family == "redesign":
        raise AdminError(
            f"the redesign nsqd has no topic {action}: use `nsqctl channel {action} "
            f"{placement.topic} CHANNEL` on each channel instead"
        )
    _need_nsqds(placement, action)
    return [[_req(n, f"/topic/{action}", topic=placement.topic) for n in placement.nsqds]]


def parse_offset(
    *,
    timestamp: int | None = None,
    virtual_offset: int | None = None,
    msgcount: int | None = None,
    end: bool = False,
) -> str:
    """The redesign ``/channel/setoffset`` body, ``TYPE:VALUE``; exactly one choice allowed."""
    given = [
        (name, value)
        for name, value in (
            ("timestamp", timestamp),
            ("virtual_queue", virtual_offset),
            ("msgcount", msgcount),
            ("special", -1 if end else None),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise ConfigError(
            "setoffset needs exactly one of --timestamp SECONDS, --virtual-offset BYTES, "
            "--msgcount N or --end"
        )
    name, value = given[0]
    if value < 0 and name != "special":
        raise ConfigError(f"the {name} offset must not be negative")
    return f"{name}:{value}"


def _select_partition(placement: Placement, partition: int | None) -> tuple[Node, ...]:
    if partition is None:
        return placement.nsqds
    if placement.family != "redesign":
        raise ConfigError("--partition exists only on the redesign (partitioned topics)")
    nodes = tuple(n for n in placement.nsqds if n.partition == partition)
    if not nodes:
        have = sorted({n.partition for n in placement.nsqds if n.partition is not None})
        raise ConfigError(
            f"topic {placement.topic!r} has no partition {partition} (partitions: {have})"
        )
    return nodes


def plan_channel_action(
    action: str,
    placement: Placement,
    channel: str,
    *,
    partition: int | None = None,
    offset: str | None = None,
    leader: str | None = None,
) -> list[list[AdminRequest]]:
    """A channel operation on every nsqd (original) or every partition leader (redesign).

    Original create/delete also (un)register the channel on every lookupd, as nsqadmin does.
    On a redesign topic with ``disable_channel_auto_create`` the channel is (un)registered
    on the lookupd leader, and its nsqds refuse local create/delete.
    """
    if action not in CHANNEL_ACTIONS:
        raise ConfigError(f"unknown channel action {action!r}")
    topic = placement.topic
    if placement.family == "original" and action in REDESIGN_ONLY:
        hint = "`nsqctl channel empty`" if action != "unskip" else "`nsqctl channel unpause`"
        raise ConfigError(
            f"channel {action} exists only on the redesign (youzan) nsqd; on the original "
            f"NSQ use {hint}"
        )
    nodes = _select_partition(placement, partition)
    body = None
    if action == "setoffset":
        if offset is None:
            raise ConfigError("setoffset needs an offset")
        if (
            offset.split(":")[0] in ("virtual_queue", "msgcount")
            and partition is None
            and len(nodes) > 1
        ):
            raise ConfigError(
                "virtual-queue and message-count offsets differ per partition: pass --partition N"
            )
        body = offset.encode()

    def params(node: Node) -> dict[str, str]:
        out = {"topic": topic, "channel": channel}
        if node.partition is not None:
            out["partition"] = str(node.partition)
        return out

    if placement.family == "original":
        stages: list[list[AdminRequest]] = []
        if action in ("create", "delete"):
            stages.append(
                [
                    _req(Node(a, "lookupd"), f"/channel/{action}", topic=topic, channel=channel)
                    for a in placement.lookupds
                ]
            )
        if action != "create":
            _need_nsqds(placement, action)
        stages.append([_req(n, f"/channel/{action}", **params(n)) for n in nodes])
        return stages
    _need_nsqds(placement, action)
    registered = placement.meta is not None and placement.meta.disable_channel_auto_create
    if action in ("create", "delete") and registered:
        if leader is None:
            raise AdminError(
                f"topic {topic!r} registers channels on the lookupd leader: pass --lookupd"
            )
        reg = [_req(Node(leader, "lookupd"), f"/channel/{action}", topic=topic, channel=channel)]
        if action == "delete":
            return [reg]  # its nsqds refuse local deletes (HTTP 403)
        return [reg, [_req(n, "/channel/create", **params(n)) for n in nodes]]
    return [[_req(n, f"/channel/{action}", body, **params(n)) for n in nodes]]


# ----------------------------------------------------------------- operations


def _client(transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=TIMEOUT, headers=NSQ_V1, transport=transport)


async def _lookupd_nsqds(client: httpx.AsyncClient, lookupd_http: Sequence[str]) -> list[str]:
    """Every nsqd HTTP address registered with any lookupd (``/nodes``)."""
    found: dict[str, None] = {}
    for address in lookupd_http:
        try:
            resp = await client.get(f"http://{address}/nodes", headers=NSQ_V1)
        except httpx.HTTPError:
            continue
        if resp.status_code != 200:
            continue
        for peer in unwrap_response(resp.json()).get("producers") or []:
            if peer.get("http_port"):
                found.setdefault(f"{peer['broadcast_address']}:{peer['http_port']}", None)
    return list(found)


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
    transport: httpx.AsyncBaseTransport | None = None,
    progress: Callable[[str], None] | None = None,
) -> AdminReport:
    """Create a topic; on the redesign wait (up to ``wait`` s) until partitions are writable.

    ``progress`` hears about a wait that takes more than a moment.
    """
    validate_topic(topic)
    async with _client(transport) as client:
        leader = await find_leader(client, lookupd_http) if lookupd_http else None
        family: Family = "redesign" if leader else "original"
        nsqds: list[str] = []
        if not lookupd_http and nsqd_http:
            probe = await _info(client, "nsqd", nsqd_http[0])
            if probe.family == "redesign":
                raise ConfigError(
                    "creating a topic on the redesign needs --lookupd: its lookupd leader "
                    "creates the partitions"
                )
        if family == "original":
            check_create_options(family, partitions, replicas, ordered, ext)
            nsqds = list(nsqd_http) or await _lookupd_nsqds(client, lookupd_http)
        elif leader:
            check_create_options(family, partitions, replicas, ordered, ext)
            registered = await _lookupd_nsqds(client, [leader])
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
        report = AdminReport("topic create", topic, family)
        report.results = await execute(stages, client)
        if family == "original" and not nsqds:
            report.notes.append("no nsqd is registered yet: the topic exists on lookupd only")
        if family == "redesign" and report.ok and wait > 0 and leader:
            nudge = stages[0][0]
            seen = await _wait_partitions(client, leader, topic, partitions, wait, nudge, progress)
            if seen < partitions:
                report.warnings.append(
                    f"only {seen}/{partitions} partitions became writable within {wait:.0f}s: "
                    f"check the nsqd logs and `nsqctl lookup {topic}`"
                )
            report.notes.append(f"{seen}/{partitions} partition(s) writable")
        return report


# nsqlookupd enables writes on a new topic in its topic check. A check triggered less than
# doCheckInterval/10 (6 s) after the last full one is dropped, and the periodic one runs
# every 60 s; so a topic created soon after another one (or after start-up) can wait two
# minutes. Creating it again with the same parameters is idempotent and triggers a new
# check: we do that every NUDGE_INTERVAL until every partition is writable.
NUDGE_INTERVAL = 6.5


async def _wait_partitions(
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
        with contextlib.suppress(httpx.HTTPError, ValueError):
            resp = await client.get(url, params=params, headers=NSQ_V1)
            if resp.status_code == 200:
                seen = len(unwrap_response(resp.json()).get("partitions") or {})
        now = time.monotonic()
        if seen >= partitions or now > deadline:
            return seen
        if nudge is not None and now >= next_nudge:
            await _send(client, nudge)
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
        raise AdminError("no lookupd address: pass --lookupd HOST:PORT")
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
    transport: httpx.AsyncBaseTransport | None = None,
) -> tuple[Placement, list[list[AdminRequest]]]:
    """Find the topic and plan ``kind`` ("topic"/"channel") ``action``, sending nothing.

    The CLI shows the plan before asking for confirmation; :func:`run_plan` sends it.
    """
    validate_topic(topic)
    if channel is not None:
        validate_channel(channel)
    async with _client(transport) as client:
        placement = await locate_topic(topic, lookupd_http, nsqd_http, client, transport=transport)
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
            return placement, plan_topic_delete(placement, leader)
        return placement, plan_topic_action(action, placement)
    assert channel is not None
    return placement, plan_channel_action(
        action, placement, channel, partition=partition, offset=offset, leader=leader
    )


async def run_plan(
    action: str,
    placement: Placement,
    stages: list[list[AdminRequest]],
    *,
    channel: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AdminReport:
    """Send a prepared plan; nsqds that could not be asked during discovery count as failed."""
    report = AdminReport(action, placement.topic, placement.family, channel)
    report.warnings.extend(placement.warnings)
    async with _client(transport) as client:
        report.results = await execute(stages, client)
    for address, error in placement.unreachable:
        req = AdminRequest(Node(address, "nsqd"), "/stats", (("topic", placement.topic),))
        report.results.append(NodeResult(req, "failed", None, f"cannot reach it: {error}"))
    return report


# ----------------------------------------------------------------- listing


@dataclass
class Listing:
    """Names gathered from several servers; ``errors`` names those that did not answer."""

    names: list[str]
    errors: dict[str, str] = field(default_factory=dict)
    family: Family | None = None


async def _from_lookupds(
    lookupd_http: Sequence[str], fetch: str, topic: str | None, transport: Any
) -> Listing:
    names: set[str] = set()
    errors: dict[str, str] = {}
    async with LookupClient(list(lookupd_http), timeout=TIMEOUT, transport=transport) as lk:
        for address in lookupd_http:
            try:
                got = await (
                    lk.topics(address) if fetch == "topics" else lk.channels(topic or "", address)
                )
            except NsqctlError as err:
                errors[address] = str(err)
                continue
            names.update(got)
    if len(errors) == len(lookupd_http):
        if len(errors) == 1:
            raise AdminError(next(iter(errors.values())))
        raise AdminError(
            "no nsqlookupd answered: " + "; ".join(f"{a}: {e}" for a, e in errors.items())
        )
    return Listing(sorted(names), errors)


async def list_topics(
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Listing:
    """Union of every lookupd's ``/topics`` (as nsqadmin), else of the nsqds' ``/stats``."""
    if lookupd_http:
        return await _from_lookupds(lookupd_http, "topics", None, transport)
    async with _client(transport) as client:
        stats = await fetch_stats(client, nsqd_http)
    names = {
        t.get("topic_name", "")
        for body in stats.values()
        if isinstance(body, dict)
        for t in body.get("topics") or []
    }
    errors = {a: b for a, b in stats.items() if isinstance(b, str)}
    if len(errors) == len(stats):
        raise AdminError("no nsqd answered: " + "; ".join(f"{a}: {e}" for a, e in errors.items()))
    return Listing(sorted(n for n in names if n), errors)


async def list_channels(
    topic: str,
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Listing:
    """Channels of ``topic``; an unknown topic raises :class:`TopicNotFoundError`."""
    validate_topic(topic)
    if lookupd_http:
        listing = await _from_lookupds(lookupd_http, "channels", topic, transport)
        if not listing.names:
            topics = await _from_lookupds(lookupd_http, "topics", None, transport)
            if topic not in topics.names:
                raise topic_not_found(topic, [f"nsqlookupd {a}" for a in lookupd_http])
        return listing
    async with _client(transport) as client:
        placement = await locate_topic(topic, (), nsqd_http, client)
    return Listing(list(placement.channels), dict(placement.unreachable), placement.family)


# ----------------------------------------------------------------- topic description


def describe_topic(topo: Topology, channels: Sequence[str]) -> dict[str, Any]:
    """What ``nsqctl lookup`` shows: family, meta, partition leaders, nsqds, channels."""
    meta = topo.meta
    return {
        "topic": topo.topic,
        "family": "redesign" if topo.is_redesign else "original",
        "meta": None
        if meta is None
        else {
            "partition_num": meta.partition_num,
            "replicas": meta.replica,
            "ordered": meta.ordered,
            "ext": meta.extend_support,
            "multi_part": meta.multi_part,
            "disable_channel_auto_create": meta.disable_channel_auto_create,
        },
        "partition_count": topo.partition_num,
        "partitions": [
            {
                "partition": p.partition,
                "leader_tcp": str(p.leader.tcp_address),
                "leader_http": p.leader.http_key,
                "hostname": p.leader.hostname,
            }
            for p in topo.partition_infos
        ],
        "nsqds": [
            {
                "tcp": str(peer.tcp_address),
                "http": peer.http_key,
                "hostname": peer.hostname,
                "version": peer.version,
            }
            for peer in topo.producers
        ],
        "channels": sorted(set(channels) | set(topo.channels)),
        "lookupds": [
            {"address": s.address, "ok": s.ok, "error": s.error or None} for s in topo.sources
        ],
        "stale": topo.stale,
    }


async def lookup_topic(
    topic: str,
    lookupd_http: Sequence[str],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """Look a topic up (read access, with meta) plus ``/channels``; unknown → error."""
    validate_topic(topic)
    async with LookupClient(list(lookupd_http), timeout=TIMEOUT, transport=transport) as lk:
        topo = await lk.lookup(topic, "r", metainfo=True)
        if topo.topic_not_found:
            raise topic_not_found(topic, [f"nsqlookupd {a}" for a in lk.addresses])
        channels: list[str] = []
        with contextlib.suppress(NsqctlError):
            channels = await lk.channels(topic)
    return describe_topic(topo, channels)


# ----------------------------------------------------------------- versions


@dataclass
class ServerVersion:
    """One server's ``/info`` answer, or why there is none."""

    role: Literal["nsqlookupd", "nsqd"]
    address: str
    version: str | None = None
    family: Family | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "address": self.address,
            "version": self.version,
            "family": self.family,
            "reachable": self.error is None,
            "error": self.error,
        }


def family_of(info: dict[str, Any]) -> Family:
    """Redesign servers report ``ha_support`` and versions like ``0.3.7-HA.1.13.0``."""
    version = str(info.get("version") or "")
    return "redesign" if "ha_support" in info or "-HA." in version else "original"


async def _info(
    client: httpx.AsyncClient, role: Literal["nsqlookupd", "nsqd"], address: str
) -> ServerVersion:
    try:
        resp = await client.get(f"http://{address}/info", headers=NSQ_V1)
    except httpx.HTTPError as err:
        return ServerVersion(role, address, error=f"unreachable ({_describe(err)})")
    if resp.status_code != 200:
        return ServerVersion(role, address, error=_error_text(resp))
    try:
        info = unwrap_response(resp.json())
    except ValueError:
        return ServerVersion(role, address, error="answered non-JSON: is this the HTTP port?")
    return ServerVersion(role, address, str(info.get("version") or "?"), family_of(info))


async def server_versions(
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> list[ServerVersion]:
    """``/info`` of every lookupd, and of every nsqd (given, or registered via ``/nodes``)."""
    async with _client(transport) as client:
        nsqds = list(dict.fromkeys([*nsqd_http, *await _lookupd_nsqds(client, lookupd_http)]))
        found = await asyncio.gather(
            *(_info(client, "nsqlookupd", a) for a in lookupd_http),
            *(_info(client, "nsqd", a) for a in nsqds),
        )
    return list(found)


__all__ = [
    "CHANNEL_ACTIONS",
    "NSQ_V1",
    "TOPIC_ACTIONS",
    "AdminError",
    "AdminReport",
    "AdminRequest",
    "Listing",
    "Node",
    "NodeResult",
    "Placement",
    "ServerVersion",
    "TopicCreated",
    "TopicNotFoundError",
    "check_create_options",
    "create_topic",
    "create_topic_async",
    "describe_topic",
    "execute",
    "family_of",
    "find_leader",
    "list_channels",
    "list_topics",
    "locate_topic",
    "lookup_topic",
    "lookupd_leader",
    "parse_offset",
    "placement_from_stats",
    "placement_from_topology",
    "plan_channel_action",
    "plan_topic_action",
    "plan_topic_create",
    "plan_topic_delete",
    "prepare",
    "run_plan",
    "server_versions",
    "unwrap_response",
]
