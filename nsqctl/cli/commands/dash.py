"""``nsqctl dash``: open the terminal dashboard on a cluster."""

from __future__ import annotations

import sys

import typer

from nsqctl.cli.commands.dash_serve import (
    MIN_TOKEN_LENGTH,
    TOKEN_ENV,
    check_token,
    parse_bind,
    require_extra,
    serve,
    token_typed,
    token_warning,
)
from nsqctl.cli.commands.dash_served import ServedDash
from nsqctl.cli.flags import (
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.cli.numbers import poll_interval, seconds
from nsqctl.cli.readonly import origin, to_act
from nsqctl.errors import ConfigError
from nsqctl.stats.poller import DEFAULT_TIMEOUT, StatsPoller
from nsqctl.stats.sources import StatsSession


def dash(
    ctx: typer.Context,
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
    interval: float = typer.Option(
        2.0, "--interval", "-i", parser=poll_interval(), help="Seconds between polls."
    ),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT,
        "--timeout",
        parser=seconds(),
        help="Seconds before an nsqd counts as down for a poll.",
    ),
    serve_at: str | None = typer.Option(
        None,
        "--serve",
        metavar="[HOST:]PORT",
        help="Serve the dashboard to browsers instead (the serve extra): PORT alone is "
        "127.0.0.1:PORT; any address beyond loopback needs a token. Each browser session "
        "runs its own dashboard, read-only unless --allow-actions.",
    ),
    token: str | None = typer.Option(
        None,
        "--token",
        envvar=TOKEN_ENV,
        show_envvar=True,
        show_default=False,
        help=f"With --serve: the token every request must carry (?token= in the URL or "
        f"Authorization: Bearer), at least {MIN_TOKEN_LENGTH} characters; given, it is "
        f"required on loopback too. Prefer {TOKEN_ENV}: a --token value is visible in "
        "the process list. Plain HTTP: beyond a trusted network put TLS in front.",
    ),
    allow_actions: bool = typer.Option(
        False,
        "--allow-actions",
        help="With --serve: let browser sessions act as the terminal dashboard does: pause, "
        "unpause and empty channels and topics, move partition leaders, drain and restore "
        "nsqds, borrow messages.",
    ),
) -> None:
    """Live dashboard: nodes, topics, partitions, channels and consumers (? for keys).

    With --serve, browsers get the same dashboard instead, e.g. on loopback
    `nsqctl dash --serve 8080`, or for others, with the token in the environment (not on the
    command line, where the process list shows it): `NSQCTL_DASH_TOKEN=... nsqctl dash
    --serve 0.0.0.0:8080`, then open the URL it prints with ?token= filled in.
    """
    if serve_at is None:
        if allow_actions:
            raise ConfigError("--allow-actions applies to --serve only: add --serve PORT")
        # from the environment it is ambient (set for a later --serve); on the command
        # line it is a token the operator expects to guard something, and nothing would
        if token_typed(ctx):
            raise ConfigError("--token applies only with --serve: add --serve PORT or drop it")
        require_terminal()
    else:
        bind = parse_bind(serve_at)
        check_token(bind, token)
    sel = resolve_cluster(lookupd, nsqd, profile, nsqd_http, require="http")
    # under read-only the dashboard still shows everything; its actions are refused
    read_only = origin(sel.read_only_setting()) if sel.read_only else None
    if read_only is not None and allow_actions:
        # the two contradict each other: serving read-only quietly would leave the operator
        # believing browsers can act
        raise ConfigError(
            f"--allow-actions contradicts read-only (from {read_only}), and read-only wins: "
            f"drop --allow-actions to serve read-only, or {to_act(sel.read_only_setting())}"
        )
    if serve_at is not None:
        require_extra()
        warning = token_warning(token_typed(ctx))
        if warning is not None:
            typer.echo(warning, err=True)
        if read_only is None and not allow_actions:
            read_only = "--serve without --allow-actions"
        spec = ServedDash.of(sel, interval, timeout, read_only)
        serve(bind, token, spec)
        return
    from nsqctl.admin.drain.records import drain_labels
    from nsqctl.tui.app import DashApp  # Textual loads only for this command

    poller = StatsPoller(sel.lookupd, sel.nsqd_http, timeout=timeout)
    # the node screen shows the drains `nsqctl node drain` records in the state dir
    DashApp(
        StatsSession(poller),
        interval=interval,
        drain_states=drain_labels,
        read_only=read_only,
        connection=sel.connection_config(),
        nsqd_tcp=sel.nsqd,
        output_buffer=sel.output_buffer,
    ).run()


def require_terminal() -> None:
    """Refuse to start without a terminal on stdin and stdout: the dashboard draws with
    escape codes and is left with keys, so redirected it fills a file with escape codes
    and, with no key to read, never ends."""
    for name, stream in (("stdout", sys.stdout), ("stdin", sys.stdin)):
        if stream is None or not stream.isatty():
            raise ConfigError(
                f"dash needs a terminal, and its {name} is not one: run it in a terminal; "
                "for output to a file or a pipe use `nsqctl stat --json` or "
                "`nsqctl top --json`"
            )
