"""``nsqctl lookup TOPIC``: where a topic lives (partitions, leaders, nsqds, meta, channels)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import typer

from nsqctl import admin
from nsqctl.cli import complete
from nsqctl.cli.admin_cmd import cluster_addresses
from nsqctl.cli.common import JsonOption, LookupdOption, NsqdHttpOption, NsqdOption, ProfileOption
from nsqctl.errors import ConfigError
from nsqctl.protocol.names import validate_topic


def render(info: dict[str, Any]) -> list[str]:
    """Human-readable lines for :func:`nsqctl.admin.describe_topic` output."""
    lines = [f"topic     {info['topic']} ({info['family']})"]
    meta = info["meta"]
    if meta is not None:
        lines.append(
            f"meta      partitions={meta['partition_num']} replicas={meta['replicas']} "
            f"ordered={str(meta['ordered']).lower()} ext={str(meta['ext']).lower()}"
        )
    if info["partitions"]:
        lines.append("partitions")
        for p in info["partitions"]:
            lines.append(
                f"  {p['partition']:>4}  leader tcp {p['leader_tcp']}  http {p['leader_http']}"
            )
    lines.append(f"nsqds     {len(info['nsqds'])}")
    for n in info["nsqds"]:
        version = f"  v{n['version']}" if n["version"] else ""
        lines.append(f"  tcp {n['tcp']}  http {n['http']}{version}")
    if not info["nsqds"]:
        lines.append("  (none yet: publish to the topic, or check that its nsqds are up)")
    lines.append(f"channels  {', '.join(info['channels']) or '(none)'}")
    for source in info["lookupds"]:
        if not source["ok"]:
            lines.append(
                f"warning   nsqlookupd {source['address']} did not answer: {source['error']}"
            )
    if info["stale"]:
        lines.append("warning   no lookupd answered: this is the last known answer")
    return lines


def lookup(
    topic: str = typer.Argument(..., autocompletion=complete.topics, help="Topic to look up."),
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """Show a topic's partitions, leaders, nsqds, meta and channels (via nsqlookupd)."""
    validate_topic(topic)
    lookupds, _ = cluster_addresses(lookupd, nsqd, nsqd_http, profile)
    if not lookupds:
        raise ConfigError(
            "lookup asks nsqlookupd: pass --lookupd HOST:PORT (its HTTP port, usually 4161)"
        )
    info = asyncio.run(admin.lookup_topic(topic, lookupds))
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    for line in render(info):
        typer.echo(line)
