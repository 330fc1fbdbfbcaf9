"""``nsqctl version``: the client's version and those of every server it can reach.

Works with no cluster configured; unreachable servers are listed, never fatal.
"""

from __future__ import annotations

import asyncio
import json

import typer

from nsqctl import __version__, admin
from nsqctl.cli.admin_cmd import JsonOption, cluster_addresses
from nsqctl.cli.common import LookupdOption, NsqdHttpOption, NsqdOption, ProfileOption

HINT = (
    "pass --lookupd HOST:PORT or --nsqd-http HOST:PORT (or --profile NAME) "
    "to see the servers' versions"
)


def version(
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """Show the nsqctl version and the versions of the servers it can reach."""
    lookupds, nsqds = cluster_addresses(lookupd, nsqd, nsqd_http, profile, require=None)
    servers = asyncio.run(admin.server_versions(lookupds, nsqds)) if lookupds or nsqds else []
    if as_json:
        payload = {
            "client": {"name": "nsqctl", "version": __version__},
            "servers": [s.to_json() for s in servers],
        }
        if not servers:
            payload["hint"] = HINT
        typer.echo(json.dumps(payload, indent=2))
        return
    typer.echo(f"nsqctl {__version__}")
    for s in servers:
        state = f"{s.version} ({s.family})" if s.error is None else s.error
        typer.echo(f"{s.role:<10}  {s.address:<21}  {state}")
    if not servers:
        typer.echo(f"hint: {HINT}", err=True)
