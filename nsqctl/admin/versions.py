"""Which server runs which version and family (``/info``), for ``nsqctl version`` and
for telling the families apart before a create."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from nsqctl.admin.base import NSQ_V1, TIMEOUT
from nsqctl.admin.leader import lookupd_nsqds
from nsqctl.admin.requests import admin_client, error_text
from nsqctl.errors import AnswerDecodeError
from nsqctl.httpclient import describe_http_error
from nsqctl.lookup.topology import not_nsq_answer
from nsqctl.protocol.raw_message import Family


@dataclass
class ServerVersion:
    """One server's ``/info`` answer, or why there is none."""

    role: Literal["nsqlookupd", "nsqd"]
    address: str
    version: str | None = None
    family: Family | None = None
    error: str | None = None
    #: it answered, but not as nsqd/nsqlookupd do: a wrong address, not a server that is down
    not_nsq: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "address": self.address,
            "version": self.version,
            "family": self.family,
            "reachable": self.error is None,
            "error": self.error,
            "not_nsq": self.not_nsq,
        }


def family_of(info: dict[str, Any]) -> Family:
    """Redesign servers report ``ha_support`` and versions like ``0.3.7-HA.1.13.0``."""
    version = str(info.get("version") or "")
    return "redesign" if "ha_support" in info or "-HA." in version else "original"


async def fetch_server_version(
    client: httpx.AsyncClient, role: Literal["nsqlookupd", "nsqd"], address: str
) -> ServerVersion:
    """One server's ``/info``; a failure is kept in the result (``error``), not raised."""
    try:
        async with asyncio.timeout(TIMEOUT):
            resp = await client.get(f"http://{address}/info", headers=NSQ_V1)
    except TimeoutError:
        return ServerVersion(role, address, error=f"unreachable (no answer within {TIMEOUT:g}s)")
    except httpx.HTTPError as err:
        return ServerVersion(role, address, error=f"unreachable ({describe_http_error(err)})")
    reason = not_nsq_answer(
        "/info", resp.status_code, resp.headers.get("content-type", ""), resp.content
    )
    if reason is not None:
        return ServerVersion(role, address, error=f"not an {role}: {reason}", not_nsq=True)
    if resp.status_code != 200:
        return ServerVersion(role, address, error=error_text(resp))
    from nsqctl import answers
    from nsqctl.lookup.wire import WireInfo

    try:
        info = answers.decode(resp.content, WireInfo, role=role, source=address, path="/info")
    except AnswerDecodeError as err:
        return ServerVersion(role, address, error=f"not an {role}: {err}", not_nsq=True)
    if info is None or info.version is None:
        return ServerVersion(
            role, address, error=f"not an {role}: /info has no version", not_nsq=True
        )
    seen: dict[str, Any] = {"version": info.version}
    if info.ha_support is not None:
        seen["ha_support"] = info.ha_support
    return ServerVersion(role, address, info.version or "?", family_of(seen))


async def server_versions(
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
) -> list[ServerVersion]:
    """``/info`` of every lookupd, and of every nsqd (given, or registered via ``/nodes``)."""
    async with admin_client() as client:
        # the lookupds' /info and /nodes at once: a lookupd that never answers costs one
        # timeout, not one per request
        lookupds, registered = await asyncio.gather(
            asyncio.gather(*(fetch_server_version(client, "nsqlookupd", a) for a in lookupd_http)),
            _registered_nsqds(client, lookupd_http),
        )
        nsqds = list(dict.fromkeys([*nsqd_http, *registered]))
        found = await asyncio.gather(*(fetch_server_version(client, "nsqd", a) for a in nsqds))
    return [*lookupds, *found]


async def _registered_nsqds(client: httpx.AsyncClient, lookupd_http: Sequence[str]) -> list[str]:
    try:
        async with asyncio.timeout(TIMEOUT):
            return await lookupd_nsqds(client, lookupd_http)
    except TimeoutError:
        return []
