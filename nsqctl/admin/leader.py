"""What the lookupds say about the cluster itself: the redesign lookupd leader (creates
and deletes go there) and the nsqds registered with them (``/nodes``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from nsqctl.admin.base import NSQ_V1
from nsqctl.errors import AdminError
from nsqctl.httpclient import describe_http_error
from nsqctl.lookup.topology import parse_nodes_body


@dataclass(frozen=True)
class EtcdUnreadable:
    """A redesign nsqlookupd answered ``/listlookup`` with an error: it cannot read etcd,
    where the cluster keeps its topics, ISRs and leaders, so it cannot name its leader,
    which makes every change to topics, partitions and ISRs.

    It still answers, from memory: the nsqds registered with it (``/nodes``) and each
    partition's leader (``/lookup``). And each partition leader keeps its ISR in memory
    and passes a channel change on to it over RPC, without etcd: so a channel action can
    still be checked and sent, asking ``lookupd`` (the nsqlookupd that answered)."""

    lookupd: str
    answer: str
    """What it answered: ``nsqlookupd A /listlookup answered 500 (etcd's words)``."""

    def error(self) -> AdminError:
        """The refusal of what needs the leader."""
        return AdminError(
            f"{self.answer}: it keeps the cluster's topics and leaders in etcd and cannot "
            "read them now, so no change that goes through nsqlookupd's leader can be made: "
            "bring etcd back (`check()` names the nsqlookupds that cannot reach it), then retry"
        )


def _leader_from(lookupd_http: str, resp: httpx.Response) -> str | None:
    found = _listlookup(lookupd_http, resp)
    if isinstance(found, EtcdUnreadable):
        raise found.error()
    return found


def _listlookup(lookupd_http: str, resp: httpx.Response) -> str | EtcdUnreadable | None:
    if resp.status_code == 404:
        return None
    if resp.status_code != 200:
        # youzan's nsqlookupd answers /listlookup from etcd, and with an error (500, in
        # etcd's words) while it cannot reach it: a bare status would not say that
        from nsqctl.lookup.client import error_message

        reason = error_message(resp.content)
        said = f"nsqlookupd {lookupd_http} /listlookup answered {resp.status_code}" + (
            f" ({reason})" if reason else ""
        )
        return EtcdUnreadable(lookupd_http, said)
    from nsqctl.lookup.wire import WireListLookup, decode, is_json

    if not is_json(resp.content):
        raise AdminError(
            f"{lookupd_http} /listlookup answered non-JSON: is it nsqlookupd's HTTP port?"
        )
    found = decode(resp.content, WireListLookup, source=lookupd_http, path="/listlookup")
    leader = found.lookupdleader if found is not None else None
    host = (leader.NodeIP or leader.NodeIp) if leader is not None else None
    if leader is None or not host or not leader.HttpPort:
        raise AdminError(
            f"the lookupd cluster behind {lookupd_http} has no leader yet: retry in a few seconds"
        )
    return f"{host}:{leader.HttpPort}"


def lookupd_leader(client: httpx.Client, lookupd_http: str) -> str | None:
    """The redesign lookupd leader (HOST:HTTPPORT); None on an original lookupd (404)."""
    try:
        resp = client.get(f"http://{lookupd_http}/listlookup", headers=NSQ_V1)
    except httpx.HTTPError as err:
        raise AdminError(
            f"cannot reach nsqlookupd {lookupd_http}: {describe_http_error(err)}"
        ) from None
    return _leader_from(lookupd_http, resp)


async def find_leader(client: httpx.AsyncClient, lookupd_http: Sequence[str]) -> str | None:
    """Async :func:`lookupd_leader` over several lookupds: the first that answers decides."""
    found = await leader_or_etcd_down(client, lookupd_http)
    if isinstance(found, EtcdUnreadable):
        raise found.error()
    return found


async def leader_or_etcd_down(
    client: httpx.AsyncClient, lookupd_http: Sequence[str]
) -> str | EtcdUnreadable | None:
    """:func:`find_leader`, but what the first nsqlookupd to answer said when it cannot
    read etcd, for a caller that can do without the leader."""
    errors: list[str] = []
    for address in lookupd_http:
        try:
            resp = await client.get(f"http://{address}/listlookup", headers=NSQ_V1)
        except httpx.HTTPError as err:
            errors.append(f"{address} ({describe_http_error(err)})")
            continue
        return _listlookup(address, resp)
    raise AdminError(
        f"no nsqlookupd answered (tried {', '.join(errors)}): check that nsqlookupd is running "
        "and that the address is its HTTP port (default 4161)"
    )


async def lookupd_nsqds(client: httpx.AsyncClient, lookupd_http: Sequence[str]) -> list[str]:
    """Every nsqd HTTP address registered with any lookupd (``/nodes``)."""
    found: dict[str, None] = {}
    for address in lookupd_http:
        try:
            resp = await client.get(f"http://{address}/nodes", headers=NSQ_V1)
        except httpx.HTTPError:
            continue
        if resp.status_code != 200:
            continue
        peers = parse_nodes_body(resp.content, source=address)
        if peers is None:
            continue  # not an nsqlookupd: its own /info check says so
        for peer in peers:
            if peer.http_port:
                found.setdefault(peer.http_key, None)
    return list(found)
