"""Read-only operation: which commands write, and the guard that refuses them.

A command writes when it changes the cluster (publishes, creates, deletes, pauses, moves,
drains) or consumes from a durable channel (what it takes there is gone for that
channel's other readers). Under ``--read-only``, ``NSQCTL_READ_ONLY=1`` or a profile's
``read_only = true`` such a command refuses with one line and exit 2, before anything is
connected to; its ``--dry-run`` only reads, and runs.

Every command of the app is either in :data:`WRITES` or in :data:`READS` (a unit test walks
the whole app), so a command added later must be classified here. The guard is applied
from the table when a command is built (:func:`guard`, called by the app's loader): a write
command's own body does not call it, and cannot forget to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any, NamedTuple

from nsqctl.cli.flags import ReadOnlySetting, resolve_read_only
from nsqctl.errors import ConfigError

Params = Mapping[str, Any]


def _always(params: Params) -> bool:
    return True


def _durable_channel(params: Params) -> bool:
    # imported here: nsqctl.protocol's package loads every codec and reply type, which
    # ``nsqctl --help`` and ``version --client`` (this module loads for every command) skip
    from nsqctl.protocol.names import is_ephemeral

    channel = params.get("channel")
    return channel is not None and not is_ephemeral(channel)


def _borrowing(params: Params) -> bool:
    return params.get("borrow") is not None


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class Write(NamedTuple):
    """What a write command does to the cluster, as the refusal says it.

    ``when`` decides, from the parsed parameters, whether this run writes (``tail`` only
    with a durable ``--channel``); ``flag`` names that option in the refusal; ``instead``
    says how to get the reading part of the command."""

    does: str
    when: Callable[[Params], bool] = _always
    flag: str = ""
    instead: str = ""


CHANGES = Write("changes the cluster")
PUBLISHES = Write("publishes to the cluster")

#: every command that writes, by its path under ``nsqctl``
WRITES: dict[tuple[str, ...], Write] = {
    ("pub",): PUBLISHES,
    ("replay",): PUBLISHES,
    ("dead-letter", "replay"): PUBLISHES,
    ("archive",): Write("consumes (FINs) a durable channel"),
    ("tail",): Write(
        "consumes (FINs) a durable channel",
        when=_durable_channel,
        flag="--channel",
        instead="leave out --channel: tail reads on an ephemeral channel of its own",
    ),
    ("peek",): Write(
        "takes messages from the channel and requeues them",
        when=_borrowing,
        flag="--borrow",
        instead="leave out --borrow",
    ),
    **{("topic", action): CHANGES for action in ("create", "delete", "pause", "unpause")},
    **{("topic", action): CHANGES for action in ("empty", "expand", "move", "update")},
    **{("channel", action): CHANGES for action in ("create", "delete", "pause", "unpause")},
    **{("channel", action): CHANGES for action in ("empty", "skip", "unskip", "setoffset")},
    ("node", "drain"): CHANGES,
    ("node", "restore"): CHANGES,
}

#: every command that only reads the selected cluster. ``sandbox`` runs a local cluster
#: of its own and ``config`` edits the local config file: neither touches the selected
#: cluster, so a read-only profile does not stop them.
READS: frozenset[tuple[str, ...]] = frozenset(
    {
        ("lookup",),
        ("version",),
        ("stat",),
        ("top",),
        ("dash",),  # its actions are refused inside the dashboard (nsqctl.tui.app)
        ("trace",),
        ("check",),
        ("exporter",),
        ("completion",),
        ("topic", "list"),
        ("channel", "list"),
        ("node", "list"),
        ("dead-letter", "list"),
        ("config", "path"),
        ("config", "profiles"),
        ("config", "set-profile"),
        ("sandbox", "up"),
        ("sandbox", "status"),
        ("sandbox", "env"),
        ("sandbox", "down"),
        ("sandbox", "build"),
        ("sandbox", "topic", "create"),
    }
)


def origin(setting: ReadOnlySetting) -> str:
    """Where read-only was turned on, as the operator would name it."""
    if setting.source == "flag":
        return "--read-only"
    return setting.source.removeprefix("$")


def to_act(setting: ReadOnlySetting) -> str:
    """What the operator does to turn read-only off, wherever it was turned on."""
    if setting.source == "flag":
        return "drop --read-only to act"
    if setting.source.startswith("$"):
        return f"unset {origin(setting)} to act"
    return "pass --no-read-only to act"


def refusal(path: tuple[str, ...], write: Write, setting: ReadOnlySetting) -> str:
    """The one line a refused command prints (after ``nsqctl: error: ``)."""
    command = " ".join((*path, write.flag) if write.flag else path)
    instead = f" (or {write.instead})" if write.instead else ""
    return (
        f"read-only (from {origin(setting)}): '{command}' {write.does}; {to_act(setting)}{instead}"
    )


def refuse_if_read_only(path: tuple[str, ...], write: Write, params: Params) -> None:
    """Raise the refusal when this run of a write command writes and read-only is on.

    A ``--dry-run`` reads; ``params['profile']`` is the command's own ``--profile``
    (the global one and the environment are read by :func:`resolve_read_only`)."""
    if params.get("dry_run") or not write.when(params):
        return
    setting = resolve_read_only(params.get("profile"))
    if setting.on:
        raise ConfigError(refusal(path, write, setting))


def guard(command: Any, path: tuple[str, ...]) -> None:
    """Wrap the body of every write command at or below ``command`` (a click command or
    group at ``path``) in :func:`refuse_if_read_only`; parsing, --help and usage errors
    are untouched."""
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in subcommands.items():
            guard(sub, (*path, name))
        return
    write = WRITES.get(path)
    body = command.callback
    if write is None or body is None or getattr(body, "read_only_guarded", False):
        return

    @wraps(body)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        refuse_if_read_only(path, write, kwargs)
        return body(*args, **kwargs)

    guarded.read_only_guarded = True  # type: ignore[attr-defined]
    command.callback = guarded
