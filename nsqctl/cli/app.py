"""The ``nsqctl`` command: a typer app whose subcommands are thin over the library.

Errors: anything nsqctl raises on purpose (``NsqctlError``) becomes one line on stderr
and exit code 1 (``ConfigError``: 2, a usage error); ``--debug`` shows the traceback.
"""

from __future__ import annotations

import os
import sys

import click
import typer

from nsqctl import __version__
from nsqctl.cli import pub, sandbox, tail
from nsqctl.errors import ConfigError, NsqctlError

app = typer.Typer(
    name="nsqctl",
    help="Operate NSQ clusters (original and partitioned redesign) from the terminal.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(sandbox.app, name="sandbox")
app.command("pub")(pub.pub)
app.command("tail")(tail.tail)

_DEBUG = {"on": False}


@app.callback()
def _root(
    debug: bool = typer.Option(
        False, "--debug", envvar="NSQCTL_DEBUG", help="Show tracebacks on errors."
    ),
) -> None:
    _DEBUG["on"] = debug


@app.command()
def version() -> None:
    """Show the nsqctl version."""
    typer.echo(f"nsqctl {__version__}")


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
