"""Which server runs which version and family (``/info``), for ``nsqctl version`` and
for telling the families apart before a create."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from nsqctl.admin.base import NSQ_V1, unwrap_response
from nsqctl.admin.leader import lookupd_nsqds
from nsqctl.admin.requests import admin_client, error_text
from nsqctl.httpclient import describe_http_error
from nsqctl.protocol.message import Family


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


async def fetch_server_version(
    client: httpx.AsyncClient, role: Literal["nsqlookupd", "nsqd"], address: str
) -> ServerVersion:
    """One server's ``/info``; a failure is kept in the result (``error``), not raised."""
    try:
        resp = await client.get(f"http://{address}/info", headers=NSQ_V1)
    except httpx.HTTPError as err:
        return ServerVersion(role, address, error=f"unreachable ({describe_http_error(err)})")
    if resp.status_code != 200:
        return ServerVersion(role, address, error=error_text(resp))
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
    async with admin_client(transport) as client:
        nsqds = list(dict.fromkeys([*nsqd_http, *await lookupd_nsqds(client, lookupd_http)]))
        found = await asyncio.gather(
            *(fetch_server_version(client, "nsqlookupd", a) for a in lookupd_http),
            *(fetch_server_version(client, "nsqd", a) for a in nsqds),
        )
    return list(found)
