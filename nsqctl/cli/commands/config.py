"""``nsqctl config``: show the resolved settings (secrets masked) and manage profiles."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from nsqctl.addresses import parse_addresses
from nsqctl.cli.flags import (
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
    check_client_identity,
    resolve_cluster,
    split_addresses,
)
from nsqctl.errors import ConfigError
from nsqctl.profiles import Profile, config_path, load_config, save_profile
from nsqctl.protocol.compression import validate_compression
from nsqctl.protocol.output_buffer import AUTO, parse_output_buffer

app = typer.Typer(
    help="Show resolved settings and manage cluster profiles.",
    invoke_without_command=True,
)


@app.callback()
def show(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """Show the settings commands would use (flags > env > profile); secrets masked.

    read_only shows whether commands that write are refused, and what set it;
    output_buffer how long nsqd may hold a consumer's messages (auto: unbuffered on a
    durable channel of the original family)."""
    if ctx.invoked_subcommand is not None:
        return
    sel = resolve_cluster(lookupd, nsqd, profile, nsqd_http, require=None)
    data = sel.describe()
    data["config_file"] = str(config_path())
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    table = Table(title="nsqctl settings", show_header=True)
    table.add_column("setting")
    table.add_column("value")
    table.add_column("from")
    sources = data.pop("sources")
    for key, value in data.items():
        if isinstance(value, list):
            shown = ", ".join(value) or "-"
        else:
            shown = "-" if value is None else value
        table.add_row(key, str(shown), sources.get(key, ""))
    Console().print(table)


@app.command("path")
def path_cmd() -> None:
    """Print where the config file is (NSQCTL_CONFIG overrides)."""
    typer.echo(str(config_path()))


@app.command("profiles")
def profiles_cmd(as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """List the profiles in the config file."""
    cfg = load_config()
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "default_profile": cfg.default_profile,
                    "profiles": {n: p.to_toml_table() for n, p in cfg.profiles.items()},
                },
                indent=2,
            )
        )
        return
    if not cfg.profiles:
        typer.echo(f"no profiles in {cfg.path}; add one with `nsqctl config set-profile NAME ...`")
        return
    for name, prof in sorted(cfg.profiles.items()):
        mark = "*" if name == cfg.default_profile else " "
        where = ", ".join(prof.lookupd or prof.nsqd) or "-"
        typer.echo(f"{mark} {name}\t{where}")


@app.command("set-profile")
def set_profile(
    name: str = typer.Argument(..., help="Profile name."),
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    tls: bool = typer.Option(False, "--tls", help="Use TLS."),
    tls_ca: str | None = typer.Option(None, "--tls-ca"),
    tls_cert: str | None = typer.Option(None, "--tls-cert"),
    tls_key: str | None = typer.Option(None, "--tls-key"),
    tls_key_password_file: str | None = typer.Option(
        None,
        "--tls-key-password-file",
        help="Path of a file holding the passphrase of an encrypted --tls-key.",
    ),
    tls_insecure: bool = typer.Option(False, "--tls-insecure"),
    auth_secret_file: str | None = typer.Option(
        None, "--auth-secret-file", help="Path of a file holding the AUTH secret."
    ),
    compression: str = typer.Option("none", "--compression", help="none | snappy | deflate"),
    output_buffer: str = typer.Option(
        AUTO,
        "--output-buffer",
        metavar="auto|none|DURATION",
        help="How long nsqd may hold messages for this cluster's consumers (auto: unbuffered "
        "on a durable channel of the original family; none: unbuffered; 100ms, 1s: "
        "buffered).",
    ),
    read_only: bool = typer.Option(
        False,
        "--read-only",
        help="Refuse every command that changes this cluster or consumes a durable channel.",
    ),
    default: bool = typer.Option(False, "--default", help="Make it the default profile."),
) -> None:
    """Add or replace a profile in the config file."""
    validate_compression(compression)
    output_buffer = parse_output_buffer(output_buffer, setting="--output-buffer")
    lk, nd, nh = split_addresses(lookupd), split_addresses(nsqd), split_addresses(nsqd_http)
    # refused now, not saved to fail every later command that uses the profile
    for given, example in ((lk, "127.0.0.1:4161"), (nd, "127.0.0.1:4150"), (nh, "127.0.0.1:4151")):
        parse_addresses(given, example=example)
    if not (lk or nd):
        raise ConfigError("a profile needs --lookupd HOST:PORT or --nsqd HOST:PORT")
    check_client_identity(tls_key, tls_cert, tls_key_password_file)
    prof = Profile(
        name=name,
        lookupd=tuple(lk),
        nsqd=tuple(nd),
        nsqd_http=tuple(nh),
        tls=tls,
        tls_ca=tls_ca,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_key_password_file=tls_key_password_file,
        tls_insecure=tls_insecure,
        auth_secret_file=auth_secret_file,
        compression=compression,
        output_buffer=output_buffer,
        read_only=read_only,
    )
    path = save_profile(prof, make_default=default)
    paths = (
        ("--tls-ca", tls_ca),
        ("--tls-cert", tls_cert),
        ("--tls-key", tls_key),
        ("--tls-key-password-file", tls_key_password_file),
        ("--auth-secret-file", auth_secret_file),
    )
    for line in missing_file_warnings(name, paths):
        typer.echo(line, err=True)
    typer.echo(f"saved profile {name} in {path}", err=True)


def missing_file_warnings(profile: str, paths: Iterable[tuple[str, str | None]]) -> list[str]:
    """One line for each given path (``(flag, path)``) that is not a file here. A warning,
    not a refusal: a profile may be written for another machine, where the file is; but
    on this one every command using the profile would fail on it, long after it was set."""
    lines = []
    for flag, given in paths:
        if given is None:
            continue
        found = Path(given).expanduser()
        if not found.is_file():
            state = "is not a file" if found.exists() else "does not exist"
            lines.append(
                f"warning: profile {profile}: {flag} {given} {state} here: saved anyway "
                "(it may be for another machine), but commands using it here will fail"
            )
    return lines
