"""``nsqctl channel ...``: create, delete, list, pause, unpause and empty channels, and on
the redesign skip, unskip and setoffset, thin over :mod:`nsqctl.admin`.

Each command prints one line per request it sent (``--json`` for machine output) and exits
non-zero naming the nodes that failed; how it asks, dry-runs and reports is
:mod:`nsqctl.cli.admin_actions`.
"""

from __future__ import annotations

import typer

from nsqctl import admin
from nsqctl.cli import complete
from nsqctl.cli.admin_actions import (
    DryRunOption,
    PartitionOption,
    YesOption,
    act,
    cluster_addresses,
    list_names,
    one_partition,
    plan_command,
)
from nsqctl.cli.flags import (
    JsonOption,
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
)
from nsqctl.protocol.names import validate_topic
from nsqctl.timeparse import parse_time_s

channel_app = typer.Typer(
    help="Create, delete, list, pause, empty (and on the redesign skip/setoffset) channels.",
    no_args_is_help=True,
)


@channel_app.command("list")
def channel_list(
    topic: str = typer.Argument(
        ..., autocompletion=complete.topics, help="Topic whose channels to list."
    ),
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """List a topic's channels (every lookupd's /channels, or the nsqds' /stats)."""
    validate_topic(topic)
    list_names("channels", cluster_addresses(lookupd, nsqd, nsqd_http, profile), as_json, topic)


_CHANNEL_HELP = {
    "create": "Create a channel on every nsqd / partition leader of the topic.",
    "delete": "Delete a channel with its queued messages (shows what would be lost, asks).",
    "pause": "Pause a channel everywhere or on --node/--partition (nothing is delivered).",
    "unpause": "Unpause a channel everywhere or on --node/--partition.",
    "empty": "Drop every queued message of a channel, or on --node/--partition (shows what "
    "would be lost, asks first).",
    "skip": "Redesign: skip to the end of the queue and keep skipping new messages (asks first).",
    "unskip": "Redesign: stop skipping; new messages are delivered again.",
}
_DESTRUCTIVE = ("delete", "empty", "skip", "setoffset")


_PER_NODE = ("pause", "unpause", "empty", "skip", "unskip")


def _channel_act(
    action: str,
    topic: str,
    channel: str,
    cluster: tuple[list[str], list[str]],
    *,
    partition: int | None,
    yes: bool,
    as_json: bool,
    offset: str | None = None,
    node: str | None = None,
    confirm_above: int = admin.DEFAULT_CONFIRM_ABOVE,
    dry_run: bool = False,
) -> None:
    act(
        "channel",
        action,
        topic,
        cluster,
        channel=channel,
        destructive=action in _DESTRUCTIVE,
        yes=yes,
        as_json=as_json,
        partition=partition,
        offset=offset,
        node=node,
        confirm_above=confirm_above,
        dry_run=dry_run,
    )


for _action, _help in _CHANNEL_HELP.items():
    channel_app.command(_action, help=_help)(
        plan_command(
            "channel",
            _action,
            destructive=_action in _DESTRUCTIVE,
            per_node=_action in _PER_NODE,
        )
    )


@channel_app.command("setoffset")
def channel_setoffset(
    topic: str = typer.Argument(..., autocompletion=complete.topics, help="Topic."),
    channel: str = typer.Argument(..., autocompletion=complete.channels, help="Channel."),
    timestamp: str | None = typer.Option(
        None,
        "--timestamp",
        metavar="TIME",
        help="Resume from messages published at/after this time: Unix seconds or ISO 8601 "
        "(UTC unless it names an offset), as `tail --from-time` takes.",
    ),
    virtual_offset: int | None = typer.Option(
        None, "--virtual-offset", min=0, help="Resume at this byte offset of the partition queue."
    ),
    msgcount: int | None = typer.Option(
        None,
        "--msgcount",
        min=0,
        help="Resume at the N-th message of the partition queue, counting from 1.",
    ),
    end: bool = typer.Option(False, "--end", help="Jump to the end (like empty)."),
    partition: list[int] | None = PartitionOption,
    yes: bool = YesOption,
    dry_run: bool = DryRunOption,
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """Redesign: move a channel's consume position on every partition (asks first).

    Every partition is checked first and the command is refused, changing nothing, when
    one cannot take the offset (a time on a partition holding no messages); a partition
    that still fails while sending is reported with exit 1, the others named as moved."""
    offset = admin.parse_offset(
        timestamp=None if timestamp is None else parse_time_s(timestamp),
        virtual_offset=virtual_offset,
        msgcount=msgcount,
        end=end,
    )
    cluster = cluster_addresses(lookupd, nsqd, nsqd_http, profile)
    _channel_act(
        "setoffset",
        topic,
        channel,
        cluster,
        partition=one_partition(partition),
        yes=yes,
        as_json=as_json,
        offset=offset,
        dry_run=dry_run,
    )
