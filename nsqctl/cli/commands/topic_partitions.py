"""``nsqctl topic expand|move|update``: the redesign's partition operations, thin over
:mod:`nsqctl.admin.partitions`. :data:`commands` holds them; the CLI app adds them to the
``topic`` group of :mod:`nsqctl.cli.commands.topic` (see ``Entry.extensions`` in
:mod:`nsqctl.cli.app`), so that module does not import this one back.

Same rules as the other admin commands: each shows what it will send and asks first;
without a terminal it refuses unless ``--yes`` is given. Each waits until the change is
visible, printing progress on stderr, and prints one line per request sent; a move that
was accepted but did not take effect exits 1.
"""

from __future__ import annotations

import asyncio

import typer

from nsqctl import admin
from nsqctl.cli import complete
from nsqctl.cli.admin_actions import (
    DryRunOption,
    YesOption,
    cluster_addresses,
    confirm_plan,
    emit_report,
    refuse_without_tty,
    show_dry_run,
)
from nsqctl.cli.flags import JsonOption, LookupdOption, ProfileOption
from nsqctl.cli.numbers import seconds
from nsqctl.protocol.names import validate_topic

#: The partition commands, added to ``nsqctl topic`` by the CLI app.
commands = typer.Typer()

WaitOption = typer.Option(
    120.0, "--wait", parser=seconds(zero=True), help="Seconds to wait until the change is visible."
)


def _lookupds(lookupd: list[str] | None, profile: str | None) -> list[str]:
    lookupds, _ = cluster_addresses(lookupd, None, None, profile, require=None)
    return lookupds


def _say(line: str) -> None:
    typer.echo(line, err=True)


def _run(
    plan: admin.PartitionPlan, what: str, yes: bool, wait: float, as_json: bool, dry_run: bool
) -> None:
    if dry_run:
        show_dry_run(what, plan.preview, as_json)
        return
    confirm_plan(what, plan.preview, yes)
    report = asyncio.run(admin.apply_plan(plan, wait=wait, progress=_say))
    emit_report(report, as_json)


@commands.command("expand")
def topic_expand(
    topic: str = typer.Argument(
        ..., autocompletion=complete.topics, help="Redesign topic to grow."
    ),
    partitions: int = typer.Option(
        ..., "--partitions", min=1, help="The new partition count (more than now; cannot shrink)."
    ),
    wait: float = WaitOption,
    yes: bool = YesOption,
    dry_run: bool = DryRunOption,
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    profile: str | None = ProfileOption,
) -> None:
    """Redesign: add partitions to a topic, waiting until they are writable (asks first).

    Every channel of the topic is created on each new partition before the command
    reports success, so no channel misses what is published there; a channel that cannot
    be created there makes it exit 1."""
    validate_topic(topic)
    what = f"expand topic {topic} to {partitions} partitions (cannot be undone)"
    if not dry_run:
        refuse_without_tty(what, yes)
    plan = asyncio.run(admin.plan_expand(_lookupds(lookupd, profile), topic, partitions))
    _run(plan, what, yes, wait, as_json, dry_run)


@commands.command("move")
def topic_move(
    topic: str = typer.Argument(..., autocompletion=complete.topics, help="Redesign topic."),
    partition: int = typer.Option(
        ..., "--partition", min=0, help="The partition to move.", autocompletion=complete.partitions
    ),
    to: str = typer.Option(
        ...,
        "--to",
        help="The nsqd to move to: its HTTP or TCP address, as `nsqctl dash`/`lookup` show.",
        autocompletion=complete.nodes,
    ),
    source: str | None = typer.Option(
        None,
        "--from",
        help="The nsqd whose copy moves (default: the leader, so leadership moves too).",
    ),
    wait: float = WaitOption,
    yes: bool = YesOption,
    dry_run: bool = DryRunOption,
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    profile: str | None = ProfileOption,
) -> None:
    """Redesign: move a partition's leader (or with --from a replica) to another nsqd.

    Exits 0 once the target leads (or holds the copy) and 1 when the move did not happen:
    refused, not settled within --wait, or youzan elected other copies. youzan picks a new
    leader itself, the in-sync copy with the least leader load factor; when it elects
    another than --to, leadership is moved on from there, and the command gives up once
    the elections come back to a copy that already led.
    """
    validate_topic(topic)
    copy = f"the copy on {source}" if source else "the leader"
    what = f"move {copy} of {topic} partition {partition} to {to}"
    if not dry_run:
        refuse_without_tty(what, yes)
    plan = asyncio.run(
        admin.plan_move(_lookupds(lookupd, profile), topic, partition, to, source=source)
    )
    _run(plan, what, yes, wait, as_json, dry_run)


@commands.command("update")
def topic_update(
    topic: str = typer.Argument(..., autocompletion=complete.topics, help="Redesign topic."),
    replicas: int | None = typer.Option(None, "--replicas", help="Replicas per partition (1-5)."),
    sync_every: int | None = typer.Option(
        None, "--sync-every", help="fsync every N messages (0-4000)."
    ),
    retention_days: int | None = typer.Option(
        None, "--retention-days", help="Days the data is kept (0-60; 0: the nsqd default)."
    ),
    channel_auto_create: bool | None = typer.Option(
        None,
        "--channel-auto-create/--no-channel-auto-create",
        help="Whether a SUB creates a missing channel.",
    ),
    ext: bool = typer.Option(
        False, "--ext", help="Upgrade to an ext-header topic (one way; writes pause meanwhile)."
    ),
    wait: float = WaitOption,
    yes: bool = YesOption,
    dry_run: bool = DryRunOption,
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    profile: str | None = ProfileOption,
) -> None:
    """Redesign: change a topic's replicas, sync, retention or channel auto-create (asks first)."""
    validate_topic(topic)
    change = admin.MetaChange(replicas, sync_every, retention_days, channel_auto_create, ext)
    change.params()  # bad values fail here, before the cluster is asked anything
    what = f"update topic {topic}"
    if not dry_run:
        refuse_without_tty(what, yes)
    plan = asyncio.run(admin.plan_update(_lookupds(lookupd, profile), topic, change))
    _run(plan, what, yes, wait, as_json, dry_run)
