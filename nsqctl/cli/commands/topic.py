"""``nsqctl topic ...``: create, delete, list, pause, unpause and empty topics, thin over
:mod:`nsqctl.admin` (the partition operations, ``expand|move|update``, are
:mod:`.topic_partitions`).

Each command prints one line per request it sent (``--json`` for machine output) and exits
non-zero naming the nodes that failed; how it asks, dry-runs and reports is
:mod:`nsqctl.cli.admin_actions`.
"""

from __future__ import annotations

import asyncio

import typer

from nsqctl import admin
from nsqctl.cli import complete
from nsqctl.cli.admin_actions import (
    cluster_addresses,
    emit_report,
    list_names,
    plan_command,
)
from nsqctl.cli.flags import (
    JsonOption,
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
)
from nsqctl.cli.numbers import seconds
from nsqctl.protocol.names import validate_topic

topic_app = typer.Typer(
    help="Create, delete, list, pause and empty topics; expand, move, update partitions.",
    no_args_is_help=True,
)


@topic_app.command("create")
def topic_create(
    topic: str = typer.Argument(..., autocompletion=complete.topics, help="Topic to create."),
    partitions: int = typer.Option(1, "--partitions", min=1, help="Partitions (redesign; 1-255)."),
    replicas: int = typer.Option(
        1, "--replicas", min=1, help="Replicas per partition (redesign; 1-5)."
    ),
    ordered: bool = typer.Option(False, "--ordered", help="Ordered topic (redesign)."),
    ext: bool = typer.Option(False, "--ext", help="Ext-header topic (redesign)."),
    wait: float = typer.Option(
        60.0,
        "--wait",
        parser=seconds(zero=True),
        help="Redesign: seconds to wait for writable partitions (0: don't).",
    ),
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """Create a topic (original: every lookupd and nsqd; redesign: the lookupd leader)."""
    validate_topic(topic)
    lookupds, nsqds = cluster_addresses(lookupd, nsqd, nsqd_http, profile)
    if not lookupds:
        admin.check_create_options("original", partitions, replicas, ordered, ext)
    report = asyncio.run(
        admin.create_topic_async(
            lookupds,
            topic,
            nsqd_http=nsqds,
            partitions=partitions,
            replicas=replicas,
            ordered=ordered,
            ext=ext,
            wait=wait,
            progress=lambda line: typer.echo(line, err=True),
        )
    )
    emit_report(report, as_json)


topic_app.command("delete", help="Delete a topic everywhere (asks first; --yes to skip).")(
    plan_command(
        "topic",
        "delete",
        destructive=True,
        per_node=False,
        topic_help="Topic to delete, with all its messages.",
    )
)


@topic_app.command("list")
def topic_list(
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """List topics (every lookupd's /topics, or the nsqds' /stats)."""
    list_names("topics", cluster_addresses(lookupd, nsqd, nsqd_http, profile), as_json)


topic_app.command(
    "pause", help="Pause a topic on every nsqd that has it, or on --node (original NSQ)."
)(plan_command("topic", "pause", destructive=False, per_node=True))
topic_app.command(
    "unpause", help="Unpause a topic on every nsqd that has it, or on --node (original NSQ)."
)(plan_command("topic", "unpause", destructive=False, per_node=True))
topic_app.command(
    "empty",
    help="Drop every queued message of a topic, or only on --node (original NSQ; shows what "
    "would be lost and asks first).",
)(plan_command("topic", "empty", destructive=True, per_node=True))
