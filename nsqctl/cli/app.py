"""The ``nsqctl`` command: a typer app whose subcommands are thin over the library.

Start-up: ``nsqctl --help`` and ``nsqctl version --client`` must answer in well under
150 ms, so no command module is imported until that command runs (or its help, its
completion or the docs are asked for). :data:`COMMANDS` names each command's module and
short help; :class:`LazyGroup` loads the one that runs. A new command is added there.

Read-only: every command is classified in :mod:`nsqctl.cli.readonly`, whose guard wraps
each write command as it is built here (a new command is added there too).

Errors: anything nsqctl raises on purpose (``NsqctlError``) becomes one line on stderr
and exit code 1 (``ConfigError``: 2, a usage error); parser errors (unknown option,
missing argument, bad value) are one line and exit 2; ``--debug`` shows the traceback.
typer carries its own copy of click (0.26+), so click's exception classes are taken from
typer itself, never from an ``import click``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from functools import cache, wraps
from types import ModuleType
from typing import Any, NamedTuple, get_args

import typer
import typer.core
import typer.main

from nsqctl.cli import flags, readonly
from nsqctl.cli.collector import imports_done
from nsqctl.cli.numbers import Number
from nsqctl.cli.repeated import check_repeats
from nsqctl.cli.wording import cli_message
from nsqctl.debug_env import debug_from_env
from nsqctl.errors import ConfigError, NsqctlError


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class Entry(NamedTuple):
    """One top-level command: where it lives, and what ``nsqctl --help`` says about it.

    ``target`` is ``module:attr``, a command function or a ``typer.Typer`` (a group).
    ``help`` must equal the command's own short help (a unit test compares them), so the
    top-level help can be shown without importing any command. ``extra`` names the
    optional dependency group the command needs (see :data:`EXTRAS`). ``extensions``
    (``module:attr``, each a ``typer.Typer``) add their commands to a group target, so a
    group may be spread over modules that do not import each other.
    """

    name: str
    target: str
    help: str
    extra: str | None = None
    extensions: tuple[str, ...] = ()


COMMANDS: tuple[Entry, ...] = (
    Entry(
        "pub",
        "nsqctl.cli.commands.pub:pub",
        "Publish messages; exit 0 only when every message got OK.",
    ),
    Entry(
        "tail",
        "nsqctl.cli.commands.tail:tail",
        "Print messages as they arrive (raw: the body and a newline, like nsq_tail).",
    ),
    Entry(
        "peek",
        "nsqctl.cli.commands.peek:peek",
        "Show a channel's next messages without consuming them (redesign; --borrow: original).",
    ),
    Entry(
        "lookup",
        "nsqctl.cli.commands.lookup:lookup",
        "Show a topic's partitions, leaders, nsqds, meta and channels (via nsqlookupd).",
    ),
    Entry(
        "version",
        "nsqctl.cli.commands.version:version",
        "Show the nsqctl version and the versions of the servers it can reach.",
    ),
    Entry(
        "stat",
        "nsqctl.cli.commands.stat:stat",
        "Rolling per-interval stats (depth, in-flight, deferred, requeued, timeouts, rates).",
    ),
    Entry(
        "top",
        "nsqctl.cli.commands.top:top",
        "Rank channels (or clients) by requeues, timeouts, time to drain or RDY saturation.",
    ),
    Entry(
        "dash",
        "nsqctl.cli.commands.dash:dash",
        "Live dashboard: nodes, topics, partitions, channels and consumers (? for keys).",
    ),
    Entry(
        "archive",
        "nsqctl.cli.commands.archive:archive",
        "Consume TOPIC into Parquet files under OUT; a message is FINed only once on disk.",
        extra="archive",
    ),
    Entry(
        "replay",
        "nsqctl.cli.commands.replay:replay",
        "Re-publish messages to --to-topic, in per-partition (or per --shard-field) order.",
        extra="archive",
    ),
    Entry(
        "trace",
        "nsqctl.cli.commands.trace:trace",
        "Show a message's timeline: published, delivered (FIN/REQ/timeout), archived.",
        extra="archive",
    ),
    Entry(
        "sandbox",
        "nsqctl.cli.commands.sandbox:app",
        "Run a local NSQ cluster of real servers on 127.0.0.1.",
    ),
    Entry(
        "config",
        "nsqctl.cli.commands.config:app",
        "Show resolved settings and manage cluster profiles.",
    ),
    Entry(
        "topic",
        "nsqctl.cli.commands.topic:topic_app",
        "Create, delete, list, pause and empty topics; expand, move, update partitions.",
        extensions=("nsqctl.cli.commands.topic_partitions:commands",),
    ),
    Entry(
        "channel",
        "nsqctl.cli.commands.channel:channel_app",
        "Create, delete, list, pause, empty (and on the redesign skip/setoffset) channels.",
    ),
    Entry(
        "completion",
        "nsqctl.cli.commands.completion:completion",
        "Print the completion script for SHELL.",
    ),
    Entry(
        "node",
        "nsqctl.cli.commands.node:app",
        "Drain an nsqd before stopping it, restore it, list nsqds and their drain state.",
    ),
    Entry(
        "check",
        "nsqctl.cli.commands.check:check",
        "Alert on cluster health: exit 0 ok, 1 warning, 2 critical, 3 unknown.",
    ),
    Entry(
        "exporter",
        "nsqctl.cli.commands.exporter:exporter",
        "Serve cluster stats and check verdicts as Prometheus metrics over HTTP.",
    ),
    Entry(
        "dead-letter",
        "nsqctl.cli.commands.dead_letter:app",
        "List and replay the messages consumers gave up on (max attempts).",
    ),
)

#: Optional dependency groups (pyproject ``[project.optional-dependencies]``): the modules
#: a command of that extra needs, checked before it runs.
EXTRAS: dict[str, tuple[str, ...]] = {"archive": ("pyarrow",), "spark": ("pyspark", "pyarrow")}

GLOBAL_EPILOG = (
    "Global options (--debug, --profile, --tls*, --auth-secret-file, --compression, "
    "--read-only) work before or after the command: see nsqctl --help."
)


def click_module() -> ModuleType:
    """The click typer runs on: its own copy (``typer._click``, typer 0.26+) or click."""
    return sys.modules[typer.BadParameter.__module__.rpartition(".")[0]]


def missing_extra(extra: str) -> str | None:
    """The first module of ``extra`` that cannot be found, else None (nothing is imported:
    a finder that refuses the module counts as missing too)."""
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:
            found = False
        if not found:
            return module
    return None


def require_extra(extra: str, command: str) -> None:
    """Fail with one line naming the install command when ``extra`` is not installed."""
    module = missing_extra(extra)
    if module is not None:
        raise NsqctlError(
            f"{command} needs the {extra} extra ({module} is not installed): "
            f"pip install 'nsqctl[{extra}]'"
        )


# --------------------------------------------------------------------------- help polish

#: One vocabulary of placeholders for the whole CLI: an option name means the same thing
#: in every command, so its placeholder is set here once (a declaration's own metavar wins).
PLACEHOLDERS: dict[str, str] = {
    "--archive": "DIR",
    "--checkpoint": "DIR",
    "--compression": "CODEC",
    "--delimiter": "SEP",
    "--flavor": "FLAVOR",
    "--format": "FORMAT",
    "--grep": "REGEX",
    "--jq-field": "FIELD=VALUE",
    "--out": "DIR",
    "--shard": "KEY",
    "--since": "TIME",
    "--spark-master": "URL",
    "--tls-ca": "FILE",
    "--tls-cert": "FILE",
    "--tls-key": "FILE",
    "--trace": "ID",
    "--trace-id": "ID",
    "--trace-log": "FILE",
    "--until": "TIME",
    "--where": "SQL",
}
_SECONDS_WORDS = ("timeout", "interval", "seconds", "wait", "idle")


def _is_number(param: Any) -> bool:
    desc = getattr(param, "type_descriptor", None)  # typer 0.29 (no click types)
    if desc is not None:
        annotation = desc.annotation
        inner = get_args(annotation)
        base = inner[0] if inner and not isinstance(annotation, type) else annotation
        return base in (int, float)
    name = getattr(getattr(param, "type", None), "name", "")  # click's ParamType
    return name.split(" ")[0] in ("int", "integer", "float")


def default_metavar(param: Any) -> str:
    """A placeholder naming what a value option or argument takes (instead of typer's
    ``<str>``/``<int range>``): :data:`PLACEHOLDERS`, else ``N`` or ``SECONDS`` for
    numbers (a :class:`~nsqctl.cli.numbers.Number` parser names its own), else the last
    word of its name in capitals (``--to-topic`` → ``TOPIC``,
    argument ``topic`` → ``TOPIC``)."""
    longs = [o for o in param.opts if o.startswith("--")]
    if longs and longs[0] in PLACEHOLDERS:
        return PLACEHOLDERS[longs[0]]
    name = (longs[0].lstrip("-") if longs else param.name or "value").replace("_", "-")
    parser = getattr(getattr(param, "type", None), "func", None)
    if isinstance(parser, Number):
        return parser.metavar
    if _is_number(param):
        return "SECONDS" if any(w in name for w in _SECONDS_WORDS) else "N"
    return name.rsplit("-", 1)[-1].upper()


def _no_type(ctx: Any) -> None:
    return None


def _usage_pieces(param: Any) -> Callable[[Any], list[str]]:
    """An argument in the usage line as man pages write it: ``TOPIC``, ``[MESSAGES]...``
    (typer 0.27+ writes a required one as ``{TOPIC}``, earlier ones as ``TOPIC``)."""
    piece = param.metavar if param.required else f"[{param.metavar}]"
    if param.nargs != 1:
        piece += "..."
    return lambda ctx: [piece]


def _set_metavars(command: Any) -> None:
    for param in command.params:
        if param.param_type_name == "option" and (param.is_flag or param.count):
            if param.metavar is None:
                param.metavar = ""  # typer 0.29 would show `<bool>`
            continue
        if param.metavar is None:
            param.metavar = default_metavar(param)
        if param.param_type_name == "argument":
            # typer 0.29 prints an argument's `<type>` beside its name, metavar or not
            param.display_type_rich = _no_type
            param.get_usage_pieces = _usage_pieces(param)


def _store_global(ctx: Any, param: Any, value: Any) -> Any:
    flags.store_global_flag(param.name, value)
    return value


@cache
def _global_params() -> tuple[Any, ...]:
    """The global options as parameters to append to a command: built by typer from
    :func:`flags.global_flags` (so they match the root's), hidden, not passed to the
    command's function, stored by their callback."""
    holder = typer.Typer(add_completion=False, rich_markup_mode=None)
    holder.command("global")(flags.global_flags)
    params = typer.main.get_command(holder).params
    for param in params:
        assert isinstance(param, typer.core.TyperOption)  # global_flags declares options only
        param.expose_value = False
        param.hidden = True
        param.callback = _store_global
        param.is_eager = False
    return tuple(params)


def _add_global_options(command: Any) -> None:
    taken = {o for p in command.params for o in (*p.opts, *getattr(p, "secondary_opts", ()))}
    added = False
    for param in _global_params():
        if not taken.intersection(param.opts):
            command.params.append(param)
            added = True
    if added and not command.epilog:
        command.epilog = GLOBAL_EPILOG


def polish(command: Any) -> None:
    """Plain help (no rich import: start-up), meaningful metavars, global options
    accepted after the command; for a group, every command below it too."""
    if hasattr(command, "rich_markup_mode"):
        command.rich_markup_mode = None
    _set_metavars(command)
    _add_global_options(command)
    for sub in getattr(command, "commands", {}).values():
        polish(sub)


def _with_extra(command: Any, entry: Entry) -> None:
    """Check the command's extra after parsing (so --help and usage errors still work
    without it) and before its body runs."""
    body: Callable[..., Any] = command.callback
    extra = entry.extra
    assert extra is not None

    @wraps(body)
    def checked(*args: Any, **kwargs: Any) -> Any:
        require_extra(extra, f"nsqctl {entry.name}")
        return body(*args, **kwargs)

    command.callback = checked


def _import(target: str) -> Any:
    """The object ``module:attr`` names."""
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def load(entry: Entry) -> Any:
    """Import a command's module and build its click command (or group), with the
    commands of its :attr:`Entry.extensions`."""
    target = _import(entry.target)
    command: Any
    if isinstance(target, typer.Typer):
        group = typer.main.get_group(target)
        for extension in entry.extensions:
            for name, sub in typer.main.get_group(_import(extension)).commands.items():
                group.add_command(sub, name)
        command = group
    else:
        holder = typer.Typer(add_completion=False, rich_markup_mode=None)
        holder.command(entry.name)(target)
        command = typer.main.get_command(holder)
    command.name = entry.name
    polish(command)
    if entry.extra:
        _with_extra(command, entry)
    readonly.guard(command, (entry.name,))  # outermost: refused before the extra is checked
    imports_done()  # the command is built: from here on its own objects are collected
    return command


class LazyCommands(Mapping[str, Any]):
    """``group.commands`` whose values are built on first access (see :func:`load`)."""

    def __init__(self, entries: tuple[Entry, ...]) -> None:
        self.entries = {e.name: e for e in entries}
        self.loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self.loaded:
            self.loaded[name] = load(self.entries[name])
        return self.loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


class LazyGroup(typer.core.TyperGroup):
    """The root group: commands load on use; the help lists them from :data:`COMMANDS`;
    a command line giving an option two different values in one place is refused (the
    root is where every level's arguments are seen: a global option given twice before
    the command, or after a group's name and again after its command)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands(COMMANDS)  # type: ignore[assignment]
        check_repeats(self, click_module().exceptions.UsageError)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(e.name, e.help) for e in COMMANDS])


app = typer.Typer(
    name="nsqctl",
    cls=LazyGroup,
    help="Operate NSQ clusters (original and partitioned redesign) from the terminal.",
    epilog="The options above, but for the completion ones, work after the command too "
    "(nsqctl tail T --profile prod).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.callback()(flags.global_flags)


def root_command() -> Any:
    """The root click group, its options' metavars set like every command's."""
    command = typer.main.get_command(app)
    _set_metavars(command)
    return command


def _usage_line(err: Any) -> str:
    """One line for a parser error: the message and where to read the command's help."""
    ctx = getattr(err, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"nsqctl: error: {err.format_message()}{where}"


_LOG_LEVELS = ("debug", "info", "warning", "error")


def _log_to_stderr(level: str | None) -> None:
    """``NSQCTL_LOG=debug|info|...``: the library's log records on stderr, for an operator
    who needs to see retries, reconnects and failover decisions as they happen."""
    if not level:
        return
    if level.lower() not in _LOG_LEVELS:
        raise ConfigError(
            f"NSQCTL_LOG={level!r} is not a log level: use one of {', '.join(_LOG_LEVELS)}"
        )
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("nsqctl")
    root.addHandler(handler)
    root.setLevel(level.upper())


def skip_httpx_cli() -> None:
    """Keep ``import httpx`` from loading httpx's own command-line tool.

    httpx 0.28's ``__init__`` imports ``httpx._main`` (its ``httpx`` console script), which
    imports click, pygments and much of rich whenever click is installed: a large part of
    the start-up of every nsqctl command that talks HTTP, in environments that have click
    for another tool (bench/README.md, Start-up). A
    placeholder module stands in for it in this process only; its ``main`` loads the real
    one if anything ever calls it. (httpx2 made the import lazy upstream.)
    """
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    placeholder = ModuleType("httpx._main")

    def main(*args: Any, **kwargs: Any) -> Any:
        sys.modules.pop("httpx._main", None)
        return importlib.import_module("httpx._main").main(*args, **kwargs)

    placeholder.main = main  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = placeholder


def failed_command_options(err: BaseException) -> set[str] | None:
    """The option names of the command ``err`` came out of, so that its message names
    no flag that command lacks; None when no command ran. Its click context is gone by
    the time the error reaches :func:`main`, but not from the frames the error passed
    through: the innermost one holding a context (``Command.invoke(ctx)``) is the
    command's own."""
    context = click_module().Context
    found = None
    for frame, _ in traceback.walk_tb(err.__traceback__):
        ctx = frame.f_locals.get("ctx")
        if isinstance(ctx, context):
            found = ctx
    if found is None:
        return None
    return {name for param in found.command.params for name in param.opts}


def _usage_exit_code(err: Any) -> int:
    """click's code for a usage error, except under ``check``: a Nagios plugin given bad
    arguments answers UNKNOWN (3), since 2 would page someone for a CRITICAL that is not."""
    ctx = getattr(err, "ctx", None)
    if ctx is not None and ctx.info_name == "check" and err.exit_code == 2:
        from nsqctl.health.findings import EXIT_CODES

        return EXIT_CODES["unknown"]
    return int(err.exit_code)


def main() -> None:
    """Console entry point: run the app and turn errors into one-line messages."""
    skip_httpx_cli()
    exc = click_module().exceptions
    aborts = tuple({typer.Abort, getattr(exc, "Abort", typer.Abort)})
    no_args = getattr(exc, "NoArgsIsHelpError", ())
    try:
        _log_to_stderr(os.environ.get("NSQCTL_LOG"))
        code = root_command().main(prog_name="nsqctl", standalone_mode=False)
    except NsqctlError as err:
        if flags.GLOBAL_FLAGS.debug or debug_from_env():
            raise
        typer.secho(
            f"nsqctl: error: {cli_message(err, failed_command_options(err))}", err=True, fg="red"
        )
        sys.exit(2 if isinstance(err, ConfigError) else 1)
    except aborts:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except exc.ClickException as err:
        if no_args and isinstance(err, no_args):
            err.show()  # the command's help: it was given nothing to do
        else:
            typer.echo(_usage_line(err), err=True)
        sys.exit(_usage_exit_code(err))
    except KeyboardInterrupt:
        sys.exit(130)
    except SystemExit as exit_:
        # click answers a write to a closed pipe (`nsqctl ... | head`) with a quiet exit 1;
        # a Unix tool stopped by SIGPIPE reports 128 + 13, and so does nsqctl (README).
        if exit_.code == 1 and isinstance(exit_.__context__, BrokenPipeError):
            sys.exit(flags.SIGPIPE_STATUS)
        raise
    if isinstance(code, int) and code:  # typer.Exit(code) in non-standalone mode
        sys.exit(code)
