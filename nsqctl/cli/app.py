"""The ``nsqctl`` command: a typer app whose subcommands are thin over the library.

Errors: anything nsqctl raises on purpose (``NsqctlError``) becomes one line on stderr
and exit code 1 (``ConfigError``: 2, a usage error); ``--debug`` shows the traceback.
"""

from __future__ import annotations

import os
import sys

import click
import typer

from nsqctl.cli import (
    admin_cmd,
    archive,
    common,
    config_cmd,
    dash,
    deadletter_cmd,
    lookup_cmd,
    pub,
    replay,
    sandbox,
    stat,
    tail,
    trace,
    version_cmd,
)
from nsqctl.errors import ConfigError, NsqctlError

app = typer.Typer(
    name="nsqctl",
    help="Operate NSQ clusters (original and partitioned redesign) from the terminal.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(sandbox.app, name="sandbox")
app.add_typer(config_cmd.app, name="config")
app.command("pub")(pub.pub)
app.command("tail")(tail.tail)
app.command("lookup")(lookup_cmd.lookup)
app.add_typer(admin_cmd.topic_app, name="topic")
app.add_typer(admin_cmd.channel_app, name="channel")
app.command("version")(version_cmd.version)
app.command("stat")(stat.stat)
app.command("dash")(dash.dash)
app.command("archive")(archive.archive)
app.command("replay")(replay.replay)
app.command("trace")(trace.trace)
app.add_typer(deadletter_cmd.app, name="dead-letter")

_DEBUG = {"on": False}


@app.callback()
def _root(
    debug: bool = typer.Option(
        False, "--debug", envvar="NSQCTL_DEBUG", help="Show tracebacks on errors."
    ),
    profile: str | None = typer.Option(
        None, "--profile", help="Cluster profile from the config file (env NSQCTL_PROFILE)."
    ),
    tls: bool | None = typer.Option(None, "--tls/--no-tls", help="TLS to nsqd (verified)."),
    tls_ca: str | None = typer.Option(None, "--tls-ca", help="CA file (env NSQCTL_TLS_CA)."),
    tls_cert: str | None = typer.Option(None, "--tls-cert", help="Client certificate file."),
    tls_key: str | None = typer.Option(None, "--tls-key", help="Client key file."),
    tls_insecure: bool | None = typer.Option(
        None, "--tls-insecure", help="TLS without certificate verification (testing only)."
    ),
    auth_secret_file: str | None = typer.Option(
        None,
        "--auth-secret-file",
        help="File holding the AUTH secret (env NSQCTL_AUTH_SECRET_FILE or NSQCTL_AUTH_SECRET).",
    ),
    compression: str | None = typer.Option(
        None, "--compression", help="none | snappy | deflate (env NSQCTL_COMPRESSION)."
    ),
) -> None:
    _DEBUG["on"] = debug
    flags = common.GLOBAL_FLAGS
    flags.profile, flags.tls, flags.tls_ca, flags.tls_cert, flags.tls_key = (
        profile,
        tls,
        tls_ca,
        tls_cert,
        tls_key,
    )
    flags.tls_insecure, flags.auth_secret_file, flags.compression = (
        tls_insecure,
        auth_secret_file,
        compression,
    )


def main() -> None:
    """Console entry point: run the app and turn errors into one-line messages."""
    try:
        app(standalone_mode=False)
    except NsqctlError as err:
        if _DEBUG["on"] or os.environ.get("NSQCTL_DEBUG"):
            raise
        typer.secho(f"nsqctl: error: {err}", err=True, fg="red")
        sys.exit(2 if isinstance(err, ConfigError) else 1)
    except click.exceptions.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
