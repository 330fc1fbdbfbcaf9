"""How a command runs an admin action on the cluster: the addresses it acts on, the options
every action shares, the refusal without a terminal, the confirmation, the dry run and the
report (``topic``, ``channel``, ``node``, ``lookup`` and ``version`` use them).

Destructive commands show what they will do and ask first; without a terminal they refuse
unless ``--yes`` is given, so a script never hangs on a prompt nobody sees. Those that drop
messages (empty, delete, skip) first measure what would be lost per nsqd/partition and
print it; above ``--confirm-above`` messages the topic name must be typed back, since a
reflexive "y" is too cheap for a real backlog.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from collections.abc import Callable
from typing import Any

import typer

from nsqctl import admin
from nsqctl.addresses import parse_address
from nsqctl.cli import complete
from nsqctl.cli.flags import (
    JsonOption,
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.cli.repeated import repeated_error
from nsqctl.cli.wording import cli_words
from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.protocol.names import validate_channel, validate_topic

YesOption = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")
DryRunOption = typer.Option(
    False,
    "--dry-run",
    help="Check the action and print what it would do (and lose), on which nodes; send nothing.",
)
# Taken as a list so that a second --partition is refused (see one_partition) instead of
# silently replacing the first, which would act on one partition of the two named.
PartitionOption = typer.Option(
    None,
    "--partition",
    min=0,
    help="Only this partition (redesign; once: run the command once per partition).",
    autocompletion=complete.partitions,
)


def one_partition(given: list[int] | None) -> int | None:
    """The one ``--partition`` a channel action takes; more than one is bad input."""
    if not given:
        return None
    if len(set(given)) > 1:
        why = "a channel action takes one partition; run the command once per partition"
        raise repeated_error("--partition", given, why)
    return given[0]


NodeOption = typer.Option(
    None,
    "--node",
    metavar="NSQD",
    help="Only this nsqd: its HTTP address (as `nsqctl dash` shows it), TCP address or hostname.",
    autocompletion=complete.nodes,
)
ConfirmAboveOption = typer.Option(
    admin.DEFAULT_CONFIRM_ABOVE,
    "--confirm-above",
    metavar="MESSAGES",
    min=0,
    help="Ask for the topic name to be typed back when more messages than this would be "
    "lost (or an nsqd cannot say how many).",
)


def stdin_is_tty() -> bool:
    """A seam for tests: CliRunner's stdin is never a terminal."""
    return sys.stdin.isatty()


def cluster_addresses(
    lookupd: list[str] | None,
    nsqd: list[str] | None,
    nsqd_http: list[str] | None,
    profile: str | None,
    *,
    require: str | None = "http",
) -> tuple[list[str], list[str]]:
    """Validated lookupd and nsqd HTTP addresses (flags, env or profile); bad → exit 2.

    ``require="http"`` (the default) insists on at least one; None accepts none at all."""
    sel = resolve_cluster(lookupd, nsqd, profile, nsqd_http, require=require)
    lookupds = [str(parse_address(a, example="127.0.0.1:4161")) for a in sel.lookupd]
    nsqds = [str(parse_address(a, example="127.0.0.1:4151")) for a in sel.nsqd_http]
    return lookupds, nsqds


def refuse_without_tty(what: str, yes: bool) -> None:
    """Fail before anything is asked or sent when nobody could answer the prompt."""
    if not yes and not stdin_is_tty():
        raise ConfigError(
            f"refusing to {what} without confirmation (stdin is not a terminal): pass --yes"
        )


def confirm_plan(
    what: str,
    preview: list[str],
    yes: bool,
    *,
    blast: admin.BlastRadius | None = None,
    confirm_above: int = admin.DEFAULT_CONFIRM_ABOVE,
) -> None:
    """Say what the plan does (``preview``, in words) and ask as :func:`admin.confirmation`
    rules: a no changes nothing and exits 1."""
    if yes:
        return
    typer.echo(f"about to {what}:", err=True)
    for line in preview:
        typer.echo(f"  {line}", err=True)
    ask = admin.confirmation(blast, confirm_above)
    if ask.answer == "name":
        typed = typer.prompt(ask.prompt, default="", show_default=False, err=True)
        if not ask.accepts(typed):
            raise NsqctlError("aborted: the topic name was not typed back; nothing was changed")
        return
    if not typer.confirm(ask.prompt, default=False, err=True):
        raise NsqctlError("aborted: nothing was changed")


def show_dry_run(
    what: str, preview: list[str], as_json: bool, blast: admin.BlastRadius | None = None
) -> None:
    """``--dry-run``: what the command would do, on stdout; nothing is sent."""
    if as_json:
        payload: dict[str, Any] = {"dry_run": True, "would": what, "plan": preview}
        if blast is not None:
            payload["blast_radius"] = blast.to_json()
        typer.echo(json.dumps(payload, indent=2))
        return
    typer.echo(f"dry run: would {what}:")
    for line in preview:
        typer.echo(f"  {line}")
    for line in blast.lines() if blast is not None else ():
        typer.echo(line)
    typer.echo("nothing was changed")


def show_blast(blast: admin.BlastRadius) -> None:
    """What would be lost, on stderr, before anything is asked or sent."""
    for line in blast.lines():
        typer.echo(line, err=True)


def emit_report(
    report: admin.AdminReport, as_json: bool, blast: admin.BlastRadius | None = None
) -> None:
    """Print per-request results, then fail (exit 1) naming every failed node."""
    for warning in report.warnings:
        typer.echo(f"warning: {cli_words(warning)}", err=True)
    if as_json:
        payload = report.to_json()
        # the CLI's words in its JSON too: a script reads the same advice a person does
        for key in ("warnings", "notes"):
            payload[key] = [cli_words(text) for text in payload[key]]
        for result in payload["results"]:
            result["error"] = result["error"] and cli_words(result["error"])
        if blast is not None:
            payload["blast_radius"] = blast.to_json()
        typer.echo(json.dumps(payload, indent=2))
    else:
        subject = report.topic if report.channel is None else f"{report.topic}/{report.channel}"
        typer.echo(f"{report.action} {subject} ({report.family or '?'})")
        for r in report.results:
            tail = f": {cli_words(r.error)}" if r.error else ""
            typer.echo(f"  {r.outcome:<7}  {r.request.node}  {r.request.describe()}{tail}")
        if not report.results:
            typer.echo("  (nothing to do)")
        for note in report.notes:
            typer.echo(f"note: {cli_words(note)}")
    report.raise_for_failures()


def act(
    kind: str,
    action: str,
    topic: str,
    cluster: tuple[list[str], list[str]],
    *,
    channel: str | None = None,
    destructive: bool = False,
    yes: bool = False,
    as_json: bool = False,
    partition: int | None = None,
    offset: str | None = None,
    node: str | None = None,
    confirm_above: int = admin.DEFAULT_CONFIRM_ABOVE,
    dry_run: bool = False,
) -> None:
    validate_topic(topic)
    if channel is not None:
        validate_channel(channel)
    subject = f"{kind} {topic}" if channel is None else f"channel {topic}/{channel}"
    if node is not None:
        subject += f" on {node}"
    what = f"{action} {subject}"
    if destructive and not dry_run:
        refuse_without_tty(what, yes)
    lookupds, nsqds = cluster
    placement, stages = asyncio.run(
        admin.prepare(
            kind,
            topic,
            lookupds,
            nsqds,
            action=action,
            channel=channel,
            partition=partition,
            offset=offset,
            node=node,
        )
    )
    blast = None
    preview = admin.describe_plan(stages)
    if destructive and action in admin.MEASURED:
        blast = asyncio.run(admin.measure_plan(action, placement, stages, channel=channel))
        if dry_run:
            show_dry_run(what, preview, as_json, blast)
            return
        if not (yes and as_json):
            show_blast(blast)
    if dry_run:
        show_dry_run(what, preview, as_json)
        return
    if destructive:
        confirm_plan(what, preview, yes, blast=blast, confirm_above=confirm_above)
    report = asyncio.run(
        admin.run_plan(
            f"{kind} {action}",
            placement,
            stages,
            channel=channel,
            progress=lambda line: typer.echo(cli_words(line), err=True),
        )
    )
    emit_report(report, as_json, blast)


def list_names(
    key: str, cluster: tuple[list[str], list[str]], as_json: bool, topic: str | None = None
) -> None:
    """List topics (``topic`` None) or a topic's channels, from ``cluster``."""
    lookupds, nsqds = cluster
    if topic is None:
        listing = asyncio.run(admin.list_topics(lookupds, nsqds))
    else:
        listing = asyncio.run(admin.list_channels(topic, lookupds, nsqds))
    _emit_listing(listing, key, as_json, {} if topic is None else {"topic": topic})


def _emit_listing(listing: admin.Listing, key: str, as_json: bool, extra: dict[str, Any]) -> None:
    for address, error in listing.errors.items():
        typer.echo(f"warning: {address} did not answer: {error}", err=True)
    for warning in listing.warnings:
        typer.echo(f"warning: {cli_words(warning)}", err=True)
    if as_json:
        payload = {
            **extra,
            key: listing.names,
            "errors": listing.errors,
            "warnings": listing.warnings,
            "complete": not listing.errors and not listing.warnings,
        }
        typer.echo(json.dumps(payload, indent=2))
        return
    for name in listing.names:
        typer.echo(name)
    if not listing.names:
        seen = " seen (some of the cluster did not answer)" if listing.warnings else ""
        typer.echo(f"(no {key}{seen})", err=True)


def plan_command(
    kind: str,
    action: str,
    *,
    destructive: bool,
    per_node: bool,
    topic_help: str = "Topic.",
) -> Callable[..., None]:
    """The one body of every topic/channel action that sends a plan of requests.

    Typer reads a command's arguments and options from its signature, so the template below
    lists each one once and every command's signature keeps only those it takes: channel and
    --partition for channel actions, --node for the actions an nsqd can do alone."""

    def template(
        topic: str = typer.Argument(..., autocompletion=complete.topics, help=topic_help),
        channel: str | None = typer.Argument(
            ..., autocompletion=complete.channels, help="Channel."
        ),
        partition: list[int] | None = PartitionOption,
        node: str | None = NodeOption,
        yes: bool = YesOption,
        dry_run: bool = DryRunOption,
        confirm_above: int = ConfirmAboveOption,
        as_json: bool = JsonOption,
        lookupd: list[str] = LookupdOption,
        nsqd: list[str] = NsqdOption,
        nsqd_http: list[str] = NsqdHttpOption,
        profile: str | None = ProfileOption,
    ) -> None:
        cluster = cluster_addresses(lookupd, nsqd, nsqd_http, profile)
        act(
            kind,
            action,
            topic,
            cluster,
            channel=channel,
            destructive=destructive,
            yes=yes,
            as_json=as_json,
            partition=one_partition(partition),
            node=node,
            confirm_above=confirm_above,
            dry_run=dry_run,
        )

    dropped = set() if kind == "channel" else {"channel", "partition"}
    if not per_node:
        dropped.add("node")
    signature = inspect.signature(template, eval_str=True)

    absent: dict[str, Any] = dict.fromkeys(dropped)

    def command(**given: Any) -> None:
        template(**given, **absent)

    command.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in signature.parameters.values() if p.name not in dropped]
    )
    return command
