"""``nsqctl sandbox``: a local cluster of real NSQ servers in one command."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from nsqctl import admin
from nsqctl.errors import ConfigError
from nsqctl.paths import state_dir
from nsqctl.pids import pid_stopped
from nsqctl.servers import build, cluster, process
from nsqctl.servers.catalog import FLAVORS

app = typer.Typer(
    help="Run a local NSQ cluster of real servers on 127.0.0.1.", no_args_is_help=True
)
topic_app = typer.Typer(help="Topics on the sandbox cluster.", no_args_is_help=True)
app.add_typer(topic_app, name="topic")

err_console = Console(stderr=True)


def default_dir() -> Path:
    """Where the sandbox lives unless --dir says otherwise (NSQCTL_SANDBOX_DIR overrides)."""
    env = os.environ.get("NSQCTL_SANDBOX_DIR")
    if env:
        return Path(env)
    return state_dir() / "sandbox"


DirOption = typer.Option(None, "--dir", help="Sandbox directory (data, logs, state).")
ModuleSourcesOption = typer.Option(
    None,
    "--module-sources",
    metavar="DIR",
    envvar="NSQCTL_GO_MODULE_SOURCES",
    help="Folder of Go module source tarballs/directories to build from instead of the "
    "module proxy (for modules the proxy cannot serve, e.g. offline).",
)


def _flavor(value: str) -> str:
    if value not in FLAVORS:
        raise typer.BadParameter(f"must be one of {', '.join(FLAVORS)}")
    return value


def _env_lines(c: cluster.Cluster) -> list[str]:
    return [
        f"export NSQCTL_LOOKUPD={shlex.quote(','.join(c.lookupd_http))}",
        f"export NSQCTL_NSQD={shlex.quote(','.join(c.nsqd_tcp))}",
        f"export NSQCTL_NSQD_HTTP={shlex.quote(','.join(c.nsqd_http))}",
        f"export NSQCTL_SANDBOX_DIR={shlex.quote(str(c.directory))}",
    ]


def _print_cluster(c: cluster.Cluster, as_json: bool) -> None:
    running = c.running()
    # a SIGSTOPped node is alive but hung: "up" would hide why nothing answers there
    stopped = {n.name: running[n.name] and pid_stopped(n.pid) for n in c.nodes}
    if as_json:
        data = c.to_json()
        data["running"] = running
        data["stopped"] = stopped
        typer.echo(json.dumps(data, indent=2))
        return
    # 80 columns: full addresses, never wrapped; the long paths go on lines of their own
    table = Table(title=f"nsqctl sandbox ({c.flavor})")
    for col in ("node", "pid", "tcp", "http", "state"):
        table.add_column(col, no_wrap=True)
    for n in c.nodes:
        if stopped[n.name]:
            state = "[yellow]stopped[/]"
        else:
            state = "[green]up[/]" if running[n.name] else "[red]down[/]"
        tcp = n.tcp_address if n.tcp_port else "-"
        table.add_row(n.name, str(n.pid), tcp, n.http_address, state)
    Console().print(table)
    typer.echo(f"directory  {c.directory}")
    # which etcd runs matters (system package or the sandbox extra's copy): say it
    for n in c.nodes:
        if n.role == "etcd":
            typer.echo(f"etcd       {n.exe}")
    logs = {Path(n.log).parent for n in c.nodes}
    if all(Path(n.log).name == f"{n.name}.log" for n in c.nodes) and len(logs) == 1:
        typer.echo(f"logs       {logs.pop() / '<node>.log'}")
    else:
        for n in c.nodes:
            typer.echo(f"log {n.name:<7} {n.log}")
    typer.echo("\n".join(_env_lines(c)))


def refuse_stale_redesign(
    directory: Path, flavor: str, planned_nsqds: list[tuple[str, int, int]] | None
) -> None:
    """Refuse a redesign start in a directory whose stopped redesign sandbox's etcd places
    topics on nsqds the new start would not have.

    Those partitions stay leaderless for good: nsqlookupd calls the cluster unstable and
    refuses every topic expand, move and update, on new topics too. ``planned_nsqds`` are
    the (host, tcp port, http port) the new nsqds will have, None when the ports are not
    chosen yet (free ones: not the old ones). A restart on the same ports keeps every node
    the placements name; the original family has no etcd; a sandbox that never came up
    healthy created no topic: none of those is refused."""
    if flavor != "redesign" or not (directory / cluster.STATE_FILE).exists():
        return
    old = cluster.Cluster.load(directory)
    if any(old.running().values()):
        return  # a running one is refused by the start itself
    etcd_data = directory / "etcd" / "data"
    if old.flavor != "redesign" and etcd_data.is_dir() and any(etcd_data.iterdir()):
        # an original sandbox ran here after a redesign one: the etcd data is still that
        # one's, and the nsqds it places topics on are no longer recorded to compare
        raise ConfigError(
            f"{directory} holds the etcd data of an earlier redesign sandbox, whose nsqds "
            "an original sandbox's state has since replaced, so a new redesign sandbox "
            "could start on placements naming nsqds it lacks: remove it with "
            "`nsqctl sandbox down --purge` (which deletes its data and logs), or use "
            "another --dir"
        )
    if old.flavor != "redesign" or not old.became_healthy:
        return
    kept = {(n.host, n.tcp_port, n.http_port) for n in old.nsqds}
    if planned_nsqds is not None and kept <= set(planned_nsqds):
        return
    ports = ", ".join(n.tcp_address for n in old.nsqds)
    raise ConfigError(
        f"{directory} holds the data of a stopped redesign sandbox whose etcd places topics "
        f"on nsqds at {ports}, which this start would not have, so nsqlookupd would call "
        "the cluster unstable and refuse expand, move and update: start it as before "
        "(the same --port-base and --lookupd, at least as many --nsqd), remove it with "
        "`nsqctl sandbox down --purge` (its data and logs), or use another --dir"
    )


@app.command()
def up(
    flavor: str = typer.Option("original", "--flavor", callback=_flavor, help="original|redesign"),
    nsqd: int = typer.Option(1, "--nsqd", min=1, max=16, help="How many nsqd."),
    lookupd: int = typer.Option(1, "--lookupd", min=1, max=5, help="How many nsqlookupd."),
    directory: Path | None = DirOption,
    port_base: int | None = typer.Option(
        None,
        "--port-base",
        min=1,
        max=65535,
        help="Use consecutive ports from here instead of free ones.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the cluster as JSON."),
    module_sources: Path | None = ModuleSourcesOption,
    spread_addresses: bool = typer.Option(
        False,
        "--spread-addresses",
        help="Each nsqd on its own loopback address (127.0.0.2, .3, ...), like separate hosts.",
    ),
) -> None:
    """Build (if needed) and start a cluster; wait until every process is healthy."""
    target = directory or default_dir()
    planned = (
        None
        if port_base is None
        else cluster.planned_nsqd_addresses(flavor, nsqd, lookupd, port_base, spread_addresses)
    )
    refuse_stale_redesign(target.resolve(), flavor, planned)
    c = cluster.start(
        flavor,  # type: ignore[arg-type]
        target,
        nsqd=nsqd,
        lookupd=lookupd,
        port_base=port_base,
        progress=lambda msg: err_console.print(f"[dim]{msg}[/]", soft_wrap=True),
        module_sources=module_sources,
        spread_addresses=spread_addresses,
    )
    _print_cluster(c, as_json)


@app.command()
def status(
    directory: Path | None = DirOption,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Show the sandbox's processes and whether they still run."""
    c = cluster.Cluster.load(directory or default_dir())
    _print_cluster(c, as_json)
    if not all(c.running().values()):
        raise typer.Exit(1)


@app.command()
def env(directory: Path | None = DirOption) -> None:
    """Print shell exports for later commands: eval "$(nsqctl sandbox env)"."""
    c = cluster.Cluster.load(directory or default_dir())
    typer.echo("\n".join(_env_lines(c)))


@app.command()
def down(
    directory: Path | None = DirOption,
    purge: bool = typer.Option(False, "--purge", help="Also delete data and logs."),
) -> None:
    """Stop exactly the processes the sandbox started (by PID)."""
    c = cluster.Cluster.load(directory or default_dir())
    stopped = c.stop()
    err_console.print(f"stopped {len(stopped)} process(es): {', '.join(stopped) or 'none'}")
    if purge:
        c.purge()
        err_console.print(f"removed {c.directory}")
    else:
        c.save()


@app.command("build")
def build_cmd(
    flavor: str = typer.Option("original", "--flavor", callback=_flavor),
    force: bool = typer.Option(False, "--force", help="Rebuild even when cached."),
    module_sources: Path | None = ModuleSourcesOption,
) -> None:
    """Build the real NSQ servers (and their Go tools) of a flavour, cached."""
    path = build.build(
        flavor,  # type: ignore[arg-type]
        force=force,
        module_sources=module_sources,
        progress=lambda msg: err_console.print(f"[dim]{msg}[/]", soft_wrap=True),
    )
    typer.echo(str(path))


@topic_app.command("create")
def topic_create(
    topic: str,
    partitions: int = typer.Option(1, "--partitions", min=1, help="Partitions (redesign)."),
    replicas: int = typer.Option(1, "--replicas", min=1, help="Replicas (redesign)."),
    ordered: bool = typer.Option(False, "--ordered", help="Ordered topic (redesign)."),
    ext: bool = typer.Option(False, "--ext", help="Ext-header topic (redesign)."),
    directory: Path | None = DirOption,
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Create a topic on the sandbox (redesign: on the lookupd leader, with partitions)."""
    c = cluster.Cluster.load(directory or default_dir())
    if not any(process.pid_runs(n.pid, n.exe) for n in c.lookupds):
        raise admin.AdminError("the sandbox is not running: `nsqctl sandbox up` first")
    made = admin.create_topic(
        c.lookupd_http,
        topic,
        partitions=partitions,
        replicas=replicas,
        ordered=ordered,
        ext=ext,
        progress=lambda line: err_console.print(f"[dim]{line}[/]"),
    )
    if as_json:
        # {"topic": T, "flavor": "original" | "redesign", "partitions": N, "via": ADDRESSES}
        typer.echo(json.dumps(dataclasses.asdict(made), indent=2))
        return
    typer.echo(f"created topic {made.topic} ({made.flavor}, {made.partitions} partition(s))")
