"""``nsqctl exporter``: the cluster model and the check's verdicts as Prometheus metrics.

A background poll every ``--interval`` seconds (the rules see the last ``--samples``
polls, as ``nsqctl check`` does); ``GET /metrics`` serves the last one through
``prometheus_client`` (series: :mod:`nsqctl.health.metrics`). The default address
127.0.0.1:9117 keeps it off the network until asked; port 0 picks a free port. The
address served is printed on stderr once the first poll is in. SIGTERM and Ctrl-C stop
it: the poll in progress ends, the server closes, exit 0.
"""

from __future__ import annotations

import asyncio
import signal

import typer

from nsqctl.addresses import HostPort, parse_address
from nsqctl.cli.commands.check import (
    ChannelGlobOption,
    MaxDepthOption,
    MaxDrainOption,
    MaxRequeueOption,
    MaxTimeoutOption,
    NoDefaultsOption,
    OrphanOption,
    PoisonOption,
    RuleOption,
    TimeoutOption,
    TopicGlobOption,
    rules_from_flags,
)
from nsqctl.cli.flags import (
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.cli.numbers import poll_interval
from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.health.check import DEFAULT_SAMPLES, session_for
from nsqctl.health.monitor import HealthMonitor
from nsqctl.health.spec import RuleSet

DEFAULT_LISTEN = "127.0.0.1:9117"
DEFAULT_POLL_INTERVAL = 5.0


def listen_address(text: str) -> HostPort:
    """``HOST:PORT`` to listen on; port 0 lets the system pick a free one."""
    host, sep, port = text.strip().rpartition(":")
    if sep and port == "0":
        return HostPort(parse_address(f"{host}:1", example=DEFAULT_LISTEN).host, 0)
    return parse_address(text, example=DEFAULT_LISTEN)


async def serve(
    lookupd: list[str],
    nsqd_http: list[str],
    rules: RuleSet,
    listen: HostPort,
    *,
    interval: float,
    samples: int,
    timeout: float,
) -> None:
    """Poll and serve until SIGTERM or SIGINT."""
    from prometheus_client import CollectorRegistry, start_http_server

    from nsqctl.health.metrics import ClusterCollector

    session = session_for(lookupd, nsqd_http, rules, timeout=timeout, history=samples)
    monitor = HealthMonitor(session, rules, interval=interval, samples=samples)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(lambda: monitor.latest))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, monitor.stop)
    running = asyncio.create_task(monitor.run())
    first = asyncio.create_task(monitor.first_poll())
    server = None
    try:
        await asyncio.wait({running, first}, return_when=asyncio.FIRST_COMPLETED)
        first.cancel()
        if not running.done():
            try:
                server, _ = start_http_server(listen.port, listen.host, registry)
            except OSError as err:
                raise NsqctlError(f"cannot listen on {listen}: {err.strerror or err}") from None
            served = HostPort(listen.host, server.server_port)
            typer.echo(f"nsqctl exporter: serving http://{served}/metrics", err=True)
        await running
    finally:
        monitor.stop()
        if not running.done():
            await running
        if server is not None:
            server.shutdown()
            server.server_close()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def exporter(
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
    listen: str = typer.Option(
        DEFAULT_LISTEN, "--listen", metavar="HOST:PORT", help="Where to serve /metrics."
    ),
    interval: float = typer.Option(
        DEFAULT_POLL_INTERVAL,
        "--interval",
        "-i",
        parser=poll_interval(),
        help="Seconds between polls of the cluster.",
    ),
    samples: int = typer.Option(
        DEFAULT_SAMPLES, "--samples", "-n", help="Polls the rules see (rates need 2 or more)."
    ),
    rule: list[str] = RuleOption,
    topic: list[str] = TopicGlobOption,
    channel: list[str] = ChannelGlobOption,
    max_depth: str | None = MaxDepthOption,
    max_time_to_drain: str | None = MaxDrainOption,
    max_requeue_rate: str | None = MaxRequeueOption,
    max_timeout_rate: str | None = MaxTimeoutOption,
    orphan: str | None = OrphanOption,
    poison: str | None = PoisonOption,
    no_default_rules: bool = NoDefaultsOption,
    timeout: float = TimeoutOption,
) -> None:
    """Serve cluster stats and check verdicts as Prometheus metrics over HTTP."""
    if samples < 2:
        raise ConfigError(f"bad --samples {samples}: must be >= 2 (rates need two polls)")
    address = listen_address(listen)
    sel = resolve_cluster(lookupd, nsqd, profile, nsqd_http, require="http")
    rules = rules_from_flags(
        sel.profile,
        no_default_rules,
        rule,
        topic,
        channel,
        max_depth=max_depth,
        max_time_to_drain=max_time_to_drain,
        max_requeue_rate=max_requeue_rate,
        max_timeout_rate=max_timeout_rate,
        orphan=orphan,
        poison=poison,
    )
    asyncio.run(
        serve(
            sel.lookupd,
            sel.nsqd_http,
            rules,
            address,
            interval=interval,
            samples=samples,
            timeout=timeout,
        )
    )
