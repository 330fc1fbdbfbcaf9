"""The original family's side of a node drain: nsqlookupd tombstones, and the undo.

What nsqio/nsq v1.3's nsqlookupd does (``nsqlookupd/http.go``, ``registration_db.go``):

- ``POST /topic/tombstone?topic=T&node=BROADCAST:HTTP_PORT`` marks the nsqd's producer of
  topic T; ``/lookup`` leaves a marked producer out for ``--tombstone-lifetime`` (45 s by
  default) after the mark, then lists it again by itself. Marking again restarts the
  lifetime, so a drain re-tombstones before it runs out. nsqlookupd does not tell its
  lifetime over HTTP: we re-tombstone every ``retombstone_every`` seconds, and at once
  whenever a lookupd lists the node again (a shorter lifetime than our period).
- nsqd's REGISTER of a producer nsqlookupd already has changes nothing (``AddProducer``
  keeps the old entry), so a new channel or a reconnect on the same connection does not
  clear a tombstone. What clears it is the producer going away: nsqlookupd drops every
  producer of an nsqd whose connection closes, and the nsqd registers all its topics and
  channels afresh when it connects again. Restore makes that happen on purpose: nsqd's
  ``PUT /config/nsqlookupd_tcp_addresses`` with an empty list closes its lookupd
  connections, the same list put back reconnects them (``nsqd/lookup.go``). Without it a
  restored node would wait out the lifetime.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

import httpx

from nsqctl import answers
from nsqctl.admin.base import NSQ_V1
from nsqctl.admin.requests import AdminRequest, Node, NodeResult, send_request
from nsqctl.errors import AdminError, NsqctlTimeoutError
from nsqctl.httpclient import describe_http_error
from nsqctl.lookup.topology import (
    LookupProtocolError,
    Peer,
    parse_lookup_response,
    parse_nodes_body,
)

POLL = 0.2
LOOKUPD_OPTION = "nsqlookupd_tcp_addresses"


def tombstone_request(lookupd: str, topic: str, producer: str) -> AdminRequest:
    """The tombstone of ``producer`` (``BROADCAST:HTTP_PORT``) for ``topic`` on ``lookupd``."""
    return AdminRequest(
        Node(lookupd, "lookupd"), "/topic/tombstone", (("topic", topic), ("node", producer))
    )


async def tombstone(
    client: httpx.AsyncClient, lookupds: Sequence[str], topics: Sequence[str], producer: str
) -> list[NodeResult]:
    """Tombstone ``producer`` for every topic on every lookupd, all at once."""
    done = await asyncio.gather(
        *(
            send_request(client, tombstone_request(lk, t, producer))
            for lk in lookupds
            for t in topics
        )
    )
    return [result for result, _ in done]


async def find_peer(client: httpx.AsyncClient, lookupds: Sequence[str], node: str) -> Peer | None:
    """The nsqd registered as ``node`` (its HTTP or TCP address) with any of ``lookupds``."""
    for lookupd in lookupds:
        for peer in await registered_peers(client, lookupd):
            if node in (peer.http_key, peer.key):
                return peer
    return None


async def registered_peers(client: httpx.AsyncClient, lookupd: str) -> list[Peer]:
    """The nsqds ``lookupd`` lists in ``/nodes`` ([] when it does not answer, or answers
    something that is not JSON). A JSON answer of the wrong shape raises
    :class:`~nsqctl.lookup.errors.LookupDecodeError` naming the field: guessing from it
    would list garbage, or none of the nodes that are there."""
    try:
        resp = await client.get(f"http://{lookupd}/nodes", headers=NSQ_V1)
    except httpx.HTTPError:
        return []
    return parse_nodes_body(resp.content, source=lookupd) or []


async def listed_topics(
    client: httpx.AsyncClient, lookupds: Sequence[str], topics: Sequence[str], producer: str
) -> list[tuple[str, str]]:
    """``(lookupd, topic)`` pairs whose ``/lookup`` still lists ``producer``; a lookupd that
    does not answer counts as listing it (it may, and a drain must not end on a guess)."""

    async def one(lookupd: str, topic: str) -> bool:
        try:
            resp = await client.get(
                f"http://{lookupd}/lookup", params={"topic": topic}, headers=NSQ_V1
            )
            answer = parse_lookup_response(
                resp.json() if resp.content else None, source=lookupd, http_status=resp.status_code
            )
        except (httpx.HTTPError, ValueError, LookupProtocolError):
            return True
        return any(p.http_key == producer for p in answer.producers)

    pairs = [(lk, t) for lk in lookupds for t in topics]
    found = await asyncio.gather(*(one(lk, t) for lk, t in pairs))
    return [pair for pair, listed in zip(pairs, found, strict=True) if listed]


async def _put_lookupds(client: httpx.AsyncClient, node: str, addresses: list[str]) -> None:
    try:
        resp = await client.put(
            f"http://{node}/config/{LOOKUPD_OPTION}", content=json.dumps(addresses).encode()
        )
    except httpx.HTTPError as err:
        raise AdminError(f"nsqd {node}: cannot reach it: {describe_http_error(err)}") from None
    if resp.status_code != 200:
        raise AdminError(
            f"nsqd {node} refused PUT /config/{LOOKUPD_OPTION} (HTTP {resp.status_code})"
        )


async def node_lookupds(client: httpx.AsyncClient, node: str) -> list[str]:
    """The nsqlookupd TCP addresses nsqd ``node`` registers with (``--lookupd-tcp-address``)."""
    try:
        resp = await client.get(f"http://{node}/config/{LOOKUPD_OPTION}", headers=NSQ_V1)
    except httpx.HTTPError as err:
        raise AdminError(f"nsqd {node} did not tell its {LOOKUPD_OPTION}: {err}") from None
    if resp.status_code != 200:
        raise AdminError(f"nsqd {node} did not tell its {LOOKUPD_OPTION} (HTTP {resp.status_code})")
    path = f"/config/{LOOKUPD_OPTION}"
    found = answers.decode_value(resp.content, list[str], role="nsqd", source=node, path=path)
    return list(found)


async def reregister(
    client: httpx.AsyncClient,
    node: str,
    producer: str,
    lookupds: Sequence[str],
    deadline: float,
) -> None:
    """Make ``node`` drop and re-open its lookupd connections, so that every lookupd
    forgets its tombstones and takes a fresh registration of all its topics (module doc).

    Waits until no lookupd lists the nsqd, then puts its list back. The list is read from
    the nsqd first and put back even when the wait fails, so the nsqd is never left
    without its lookupds by us."""
    addresses = await node_lookupds(client, node)
    if not addresses:
        return  # registers with no lookupd: nothing to clear
    await _put_lookupds(client, node, [])
    try:
        while True:
            listed = [
                lk
                for lk in lookupds
                if any(p.http_key == producer for p in await registered_peers(client, lk))
            ]
            if not listed:
                break
            if time.monotonic() > deadline:
                raise NsqctlTimeoutError(
                    f"nsqlookupd {', '.join(listed)} still lists {node} after it closed its "
                    "lookupd connections",
                    setting="wait",
                )
            await asyncio.sleep(POLL)
    finally:
        await _put_lookupds(client, node, addresses)
