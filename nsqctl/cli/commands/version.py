"""``nsqctl version``: the client's version and those of every server it can reach.

Works with no cluster configured; unreachable servers are listed, never fatal. An
address where something else answers (a web server's 404 page) is listed and then
fails the command in one line: that is a wrong address, not a server that is down.
``--client`` prints the client's version alone, without reading any configuration: it is
what scripts call, so it imports nothing beyond the CLI itself.
"""

from __future__ import annotations

import json
from typing import Any

import typer

from nsqctl import __version__
from nsqctl.cli.flags import (
    JsonOption,
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
)
from nsqctl.errors import ConnectError, LookupUnavailableError

HINT = (
    "pass --lookupd HOST:PORT or --nsqd-http HOST:PORT (or --profile NAME) "
    "to see the servers' versions"
)


def version(
    as_json: bool = JsonOption,
    client: bool = typer.Option(
        False, "--client", help="Only the client's version: no cluster is asked."
    ),
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """Show the nsqctl version and the versions of the servers it can reach."""
    servers = [] if client else _server_versions(lookupd, nsqd, nsqd_http, profile)
    if as_json:
        payload: dict[str, object] = {
            "client": {"name": "nsqctl", "version": __version__},
            "servers": [s.to_json() for s in servers],
            # as every --json view that may be partial: false when a server asked could
            # not be read (its nsqds, for an nsqlookupd, then unlisted too)
            "complete": all(s.error is None for s in servers),
        }
        if not servers and not client:
            payload["hint"] = HINT
        typer.echo(json.dumps(payload, indent=2))
        _fail_on_wrong_address(servers)
        return
    typer.echo(f"nsqctl {__version__}")
    for s in servers:
        state = f"{s.version} ({s.family})" if s.error is None else s.error
        typer.echo(f"{s.role:<10}  {s.address:<21}  {state}")
    if not servers and not client:
        typer.echo(f"hint: {HINT}", err=True)
    _fail_on_wrong_address(servers)


def _fail_on_wrong_address(servers: list[Any]) -> None:
    """A server that is down is listed and is no failure (the command reports what it can
    reach), but an address where something else answers is a mistake in the command."""
    wrong = [s for s in servers if s.not_nsq]
    if wrong:
        what = "; ".join(f"{s.address} is {s.error}" for s in wrong)
        if wrong[0].role == "nsqlookupd":
            raise LookupUnavailableError(f"{what}: check the address", setting="lookupd_http")
        raise ConnectError(f"{what}: check the address", setting="nsqd_http")


def _server_versions(
    lookupd: list[str], nsqd: list[str], nsqd_http: list[str], profile: str | None
) -> list[Any]:
    """Every reachable server's version (the HTTP client loads only here)."""
    import asyncio

    from nsqctl import admin
    from nsqctl.cli.admin_actions import cluster_addresses

    lookupds, nsqds = cluster_addresses(lookupd, nsqd, nsqd_http, profile, require=None)
    if not lookupds and not nsqds:
        return []
    return asyncio.run(admin.server_versions(lookupds, nsqds))
