"""``nsqctl lookup TOPIC``: where a topic lives (partitions, leaders, nsqds, meta, channels)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import typer

from nsqctl import admin
from nsqctl.admin.describe import isr_members
from nsqctl.cli import complete
from nsqctl.cli.admin_actions import cluster_addresses
from nsqctl.cli.flags import JsonOption, LookupdOption, NsqdHttpOption, NsqdOption, ProfileOption
from nsqctl.cli.wording import cli_words
from nsqctl.errors import ConfigError, LookupUnavailableError
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
        lines.extend(_partition_line(p) for p in info["partitions"])
    lines.append(f"nsqds     {len(info['nsqds'])}")
    for n in info["nsqds"]:
        version = f"  v{n['version']}" if n["version"] else ""
        hung = "" if n.get("answering", True) else "  NOT ANSWERING"
        lines.append(f"  tcp {n['tcp']}  http {n['http']}{version}{hung}")
    if not info["nsqds"]:
        lines.append("  (none yet: publish to the topic, or check that its nsqds are up)")
    complete = info.get("complete", True)
    none = "(none)" if complete else "(none seen: see the warnings)"
    listed = ", ".join(info["channels"])
    if listed and not complete:
        listed += "  (may be incomplete: see the warnings)"
    lines.append(f"channels  {listed or none}")
    lines.extend(f"warning   {w}" for w in info.get("warnings", ()))
    for source in info["lookupds"]:
        if not source["ok"]:
            lines.append(
                f"warning   nsqlookupd {source['address']} did not answer: {source['error']}"
            )
    if info["stale"]:
        lines.append("warning   no lookupd answered: this is the last known answer")
    return lines


def _nodes(nodes: list[str] | None) -> str:
    return "?" if nodes is None else ",".join(nodes) or "-"


def _partition_line(p: dict[str, Any]) -> str:
    """One partition, as ``kcat -L`` shows it: leader, replicas (copies seen), ISR."""
    head = f"  {p['partition']:>4}  "
    if p["leader_tcp"] is None:
        why = "" if p["live_copy"] else " (no live copy: its nsqds are down or not answering)"
        line = f"{head}NO LEADER{why}"
    else:
        line = f"{head}leader tcp {p['leader_tcp']}  http {p['leader_http']}"
        if p["leader_answering"] is False:
            line += " NOT ANSWERING"
        elif p.get("leader_writable") is False:
            line += " NOT WRITABLE"
    if p["live_copy"]:
        isr = None if p["isr"] is None else isr_members(p)
        line += f"  replicas {_nodes(p['replicas'])}  isr {_nodes(isr)}"
        if p.get("isr_short"):
            line += "  ISR SHORT"
        if p.get("old_copies"):
            from nsqctl.stats.view import stale_words  # the stats model only when one shows

            line += f"  ({stale_words(p['old_copies'])})"
    return line


def lookup(
    topic: str = typer.Argument(..., autocompletion=complete.topics, help="Topic to look up."),
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """Show a topic's partitions, leaders, nsqds, meta and channels (via nsqlookupd).

    With every nsqlookupd down, the nsqds given (--nsqd-http, or the profile's) show the
    partitions they hold and their channels, without leaders or ISR."""
    validate_topic(topic)
    lookupds, nsqds = cluster_addresses(lookupd, nsqd, nsqd_http, profile)
    if not lookupds:
        raise ConfigError(
            "lookup asks nsqlookupd: pass --lookupd HOST:PORT (its HTTP port, usually 4161)"
        )
    try:
        info = asyncio.run(admin.lookup_topic(topic, lookupds, nsqds))
    except LookupUnavailableError as err:
        # every nsqlookupd down: the nsqds given say what they hold, and that it is not all
        if not nsqds:
            raise LookupUnavailableError(
                f"{err}; --nsqd-http shows what the nsqds hold without it"
            ) from err
        info = asyncio.run(admin.lookup_from_nsqds(topic, lookupds, nsqds))
        render_info = render_from_nsqds
    else:
        render_info = render
    # a Python caller's words made a CLI user's (cli_words), once, for the text and --json
    info["warnings"] = [cli_words(w) for w in info.get("warnings", ())]
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    lines = render_info(info)
    for line in lines:
        typer.echo(line)


def render_from_nsqds(info: dict[str, Any]) -> list[str]:
    """Human-readable lines for :func:`nsqctl.admin.lookup_from_nsqds`: copies, never a leader."""
    lines = [f"topic     {info['topic']} ({info['family']}; from the nsqds alone)"]
    if info["partitions"]:
        lines.append("partitions (copies found; leader and ISR unknown)")
        lines.extend(
            f"  {p['partition']:>4}  on {', '.join(p['copies'])}" for p in info["partitions"]
        )
    lines.append(f"nsqds     {len(info['nsqds'])} holding it")
    for n in info["nsqds"]:
        version = f"  v{n['version']}" if n["version"] else ""
        lines.append(f"  http {n['http']}{version}")
    listed = ", ".join(info["channels"])
    lines.append(f"channels  {listed + '  (may be incomplete)' if listed else '(none seen)'}")
    lines.extend(f"warning   {w}" for w in info["warnings"])
    return lines
