"""Cluster administration over the servers' HTTP APIs, for both families.

The redesign only accepts topic/channel admin on the lookupd *leader*, and creates
partitions there; the original registers topics on lookupd and creates them on each
nsqd. Callers pass lookupd HTTP addresses; this module finds the leader itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from nsqctl.errors import NsqctlError
from nsqctl.lookup.model import unwrap_payload
from nsqctl.protocol.names import validate_topic

NSQ_V1 = {"Accept": "application/vnd.nsq; version=1.0"}


class AdminError(NsqctlError):
    """An admin request was refused or could not be made."""


def unwrap_response(body: object) -> dict:
    """Both response shapes (``{"status_code", "data"}``-wrapped or bare) as a dict."""
    data = unwrap_payload(body)[0]
    return data if isinstance(data, dict) else {}


def _get(client: httpx.Client, url: str) -> httpx.Response:
    try:
        return client.get(url, headers=NSQ_V1)
    except httpx.HTTPError as err:
        raise AdminError(f"cannot reach {url.split('?')[0]}: {err}") from None


def _post(client: httpx.Client, url: str, what: str) -> httpx.Response:
    try:
        resp = client.post(url, headers=NSQ_V1)
    except httpx.HTTPError as err:
        raise AdminError(f"{what}: cannot reach {url.split('?')[0]}: {err}") from None
    if resp.status_code != 200:
        raise AdminError(f"{what}: server answered {resp.status_code} {resp.text.strip()[:200]}")
    return resp


def lookupd_leader(client: httpx.Client, lookupd_http: str) -> str | None:
    """The redesign lookupd leader (HOST:HTTPPORT); None on an original lookupd (404)."""
    resp = _get(client, f"http://{lookupd_http}/listlookup")
    if resp.status_code == 404:
        return None
    if resp.status_code != 200:
        raise AdminError(f"{lookupd_http} /listlookup answered {resp.status_code}")
    leader = unwrap_response(resp.json()).get("lookupdleader") or {}
    if not leader.get("NodeIP") or not leader.get("HttpPort"):
        raise AdminError(
            f"the lookupd cluster behind {lookupd_http} has no leader yet: retry in a few seconds"
        )
    return f"{leader['NodeIP']}:{leader['HttpPort']}"


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
    wait: float = 30.0,
) -> TopicCreated:
    """Create a topic; on the redesign wait until its partitions are writable."""
    validate_topic(topic)
    if not lookupd_http:
        raise AdminError("no lookupd address: pass --lookupd HOST:PORT")
    if partitions < 1 or replicas < 1:
        raise AdminError("--partitions and --replicas must be at least 1")
    with httpx.Client(timeout=10.0) as client:
        leader = lookupd_leader(client, lookupd_http[0])
        if leader is None:
            return _create_original(client, lookupd_http, topic, partitions, ordered, ext)
        query = f"topic={topic}&partition_num={partitions}&replicator={replicas}"
        if ordered:
            query += "&orderedmulti=true"
        if ext:
            query += "&extend=true"
        _post(client, f"http://{leader}/topic/create?{query}", f"creating topic {topic}")
        _wait_partitions(client, leader, topic, partitions, wait)
        return TopicCreated(topic, "redesign", partitions, leader)


def _create_original(
    client: httpx.Client,
    lookupd_http: list[str],
    topic: str,
    partitions: int,
    ordered: bool,
    ext: bool,
) -> TopicCreated:
    if partitions != 1 or ordered or ext:
        raise AdminError(
            "the original NSQ has no partitions, ordered or ext topics: drop "
            "--partitions/--ordered/--ext, or point at a redesign cluster"
        )
    nsqds: set[str] = set()
    for lookupd in lookupd_http:
        _post(client, f"http://{lookupd}/topic/create?topic={topic}", f"creating topic {topic}")
        nodes = unwrap_response(_get(client, f"http://{lookupd}/nodes").json())
        for peer in nodes.get("producers") or []:
            nsqds.add(f"{peer['broadcast_address']}:{peer['http_port']}")
    for nsqd in sorted(nsqds):
        _post(client, f"http://{nsqd}/topic/create?topic={topic}", f"creating topic {topic}")
    return TopicCreated(topic, "original", 1, ",".join(lookupd_http))


def _wait_partitions(
    client: httpx.Client, leader: str, topic: str, partitions: int, wait: float
) -> None:
    deadline = time.monotonic() + wait
    url = f"http://{leader}/lookup?topic={topic}&access=w&metainfo=true"
    seen = 0
    while True:
        resp = _get(client, url)
        if resp.status_code == 200:
            seen = len(unwrap_response(resp.json()).get("partitions") or {})
            if seen >= partitions:
                return
        if time.monotonic() > deadline:
            raise AdminError(
                f"topic {topic} was created but only {seen}/{partitions} partitions became "
                f"writable within {wait:.0f}s: check the nsqd logs and `nsqctl lookup {topic}`"
            )
        time.sleep(0.2)
