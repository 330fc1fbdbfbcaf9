"""A local NSQ cluster of real servers on 127.0.0.1: start, inspect, stop.

Spread (``spread_addresses``), each nsqd listens on and broadcasts its own loopback
address (127.0.0.2, 127.0.0.3, ...) while lookupds and etcd stay on 127.0.0.1: one
machine shaped like several hosts, so code that assumes one host, or takes a listen
address for a broadcast address, fails.

One implementation serves ``nsqctl sandbox`` and the pytest fixtures. A cluster's state
(PIDs, ports, logs) is saved as ``state.json`` in its directory so a later command can
find and stop exactly what was started.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from nsqctl import admin
from nsqctl.errors import ServerSetupError
from nsqctl.lookup.topology import parse_nodes_body
from nsqctl.servers import build, process
from nsqctl.servers.catalog import TESTMODE_ENV, Flavor
from nsqctl.servers.process import LOOPBACK, NodeRecord, loopback_host
from nsqctl.servers.tools import find_etcd

STATE_FILE = "state.json"
CLUSTER_ID = "nsqctl-sandbox"


@dataclass
class Cluster:
    """A started cluster: its flavour, directory and the processes in it."""

    flavor: Flavor
    directory: Path
    nodes: list[NodeRecord] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    # Whether a sandbox in this directory ever came up healthy: one that never did registered
    # no topic, so its etcd holds nothing a later start on other ports could trip over.
    became_healthy: bool = False

    def by_role(self, role: str) -> list[NodeRecord]:
        return [n for n in self.nodes if n.role == role]

    @property
    def nsqds(self) -> list[NodeRecord]:
        return self.by_role("nsqd")

    @property
    def lookupds(self) -> list[NodeRecord]:
        return self.by_role("nsqlookupd")

    @property
    def lookupd_http(self) -> list[str]:
        return [n.http_address for n in self.lookupds]

    @property
    def nsqd_tcp(self) -> list[str]:
        return [n.tcp_address for n in self.nsqds]

    @property
    def nsqd_http(self) -> list[str]:
        return [n.http_address for n in self.nsqds]

    def to_json(self) -> dict[str, object]:
        return {
            "flavor": self.flavor,
            "directory": str(self.directory),
            "started_at": self.started_at,
            "became_healthy": self.became_healthy,
            "lookupd_http": self.lookupd_http,
            "nsqd_tcp": self.nsqd_tcp,
            "nsqd_http": self.nsqd_http,
            "nodes": [n.to_json() for n in self.nodes],
        }

    def save(self) -> None:
        path = self.directory / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2))
        tmp.replace(path)

    @classmethod
    def load(cls, directory: Path) -> Cluster:
        path = directory / STATE_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ServerSetupError(
                f"no sandbox in {directory}: start one with `nsqctl sandbox up`"
            ) from None
        except (OSError, ValueError) as err:
            raise ServerSetupError(f"unreadable sandbox state {path}: {err}") from None
        return cls(
            flavor=data["flavor"],
            directory=Path(data["directory"]),
            nodes=[NodeRecord.from_json(n) for n in data["nodes"]],
            started_at=data.get("started_at", 0.0),
            # a state file from before this was recorded: assume the worst, that it did
            became_healthy=bool(data.get("became_healthy", True)),
        )

    def running(self) -> dict[str, bool]:
        """Node name -> whether its recorded PID still runs its executable."""
        return {n.name: process.pid_runs(n.pid, n.exe) for n in self.nodes}

    def stop(self) -> list[str]:
        """Stop every process we started (nsqd first, etcd last); names of those stopped.

        The nodes of one role stop together: a youzan nsqd or nsqlookupd takes about a
        second to leave the cluster after SIGTERM, and one after another that second adds
        up with every node. Roles still stop in order, so an nsqd leaves while the
        nsqlookupd and etcd it reports its leaving to are up."""
        stopped: list[str] = []
        roles = ["nsqd", "nsqlookupd", "etcd"]
        roles += sorted({n.role for n in self.nodes} - set(roles))
        for role in roles:
            nodes = self.by_role(role)
            if len(nodes) > 1:
                with ThreadPoolExecutor(len(nodes)) as pool:
                    results = list(pool.map(process.stop, nodes))
            else:
                results = [process.stop(n) for n in nodes]
            stopped.extend(n.name for n, was in zip(nodes, results, strict=True) if was)
        return stopped

    def kill(self) -> list[str]:
        """SIGKILL every process we started; names of those that ran. For a throwaway
        cluster whose data nobody reads again (test fixtures): no node spends its second
        leaving the cluster, as :meth:`stop` lets each do."""
        killed = [n.name for n in self.nodes if process.pid_runs(n.pid, n.exe)]
        for node in self.nodes:
            process.kill_hard(node)
            process.stop(node)  # reaps one that had already died (at once: nothing runs)
        return killed

    def purge(self) -> None:
        """Remove the data and logs of a stopped cluster."""
        shutil.rmtree(self.directory, ignore_errors=True)

    def restart(self, node: NodeRecord, timeout: float = 60.0) -> None:
        """Start a stopped node again on the same ports and data (fault tests)."""
        process.start(node)
        _wait_healthy(node, timeout)
        self.save()


def _wait_healthy(node: NodeRecord, timeout: float) -> None:
    if node.role == "etcd":
        url = f"http://{LOOPBACK}:{node.http_port}/health"
        process.wait_until(node, lambda: process.http_ok(url), "healthy", timeout)
    else:
        url = f"http://{node.http_address}/ping"
        process.wait_until(node, lambda: process.http_ok(url), "healthy (HTTP /ping)", timeout)


def _toml(values: dict[str, object]) -> str:
    """A flat TOML config as the servers' config loaders read it."""
    lines = []
    for key, value in values.items():
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, int):
            lines.append(f"{key} = {value}")
        else:
            lines.append(f"{key} = {json.dumps(str(value))}")
    return "\n".join(lines) + "\n"


class _Ports:
    """Hands out the ports reserved for a cluster, in order."""

    def __init__(self, count: int, base: int | None) -> None:
        self._ports = process.free_ports(count, base)

    def take(self) -> int:
        return self._ports.pop(0)


def _node(cluster: Cluster, role: str, index: int, exe: Path) -> NodeRecord:
    name = f"{role}{index}" if role != "etcd" else "etcd"
    data_dir = cluster.directory / name
    data_dir.mkdir(parents=True, exist_ok=True)
    return NodeRecord(
        role=role,
        name=name,
        exe=str(exe),
        log=str(cluster.directory / "logs" / f"{name}.log"),
        data_dir=str(data_dir),
    )


def _original(
    cluster: Cluster,
    bins: Path,
    nsqd: int,
    lookupd: int,
    ports: _Ports,
    nsqd_args: list[str],
    nsqd_host: Callable[[int], str],
) -> None:
    lookupds = []
    for i in range(lookupd):
        node = _node(cluster, "nsqlookupd", i, bins / "nsqlookupd")
        node.tcp_port, node.http_port = ports.take(), ports.take()
        node.argv = [
            node.exe,
            f"--tcp-address={LOOPBACK}:{node.tcp_port}",
            f"--http-address={LOOPBACK}:{node.http_port}",
            f"--broadcast-address={LOOPBACK}",
        ]
        lookupds.append(node)
    for i in range(nsqd):
        node = _node(cluster, "nsqd", i, bins / "nsqd")
        node.tcp_port, node.http_port = ports.take(), ports.take()
        node.host = nsqd_host(i)
        node.argv = [
            node.exe,
            f"--tcp-address={node.tcp_address}",
            f"--http-address={node.http_address}",
            f"--broadcast-address={node.host}",
            f"--data-path={node.data_dir}",
            *[f"--lookupd-tcp-address={lk.tcp_address}" for lk in lookupds],
            *nsqd_args,
        ]
        cluster.nodes.append(node)
    cluster.nodes[0:0] = lookupds


def _redesign(
    cluster: Cluster,
    bins: Path,
    nsqd: int,
    lookupd: int,
    ports: _Ports,
    nsqd_args: list[str],
    nsqd_host: Callable[[int], str],
) -> None:
    etcd_tool = find_etcd()
    etcd = _node(cluster, "etcd", 0, Path(etcd_tool.path))
    etcd.http_port, etcd.rpc_port = ports.take(), ports.take()
    client_url = f"http://{LOOPBACK}:{etcd.http_port}"
    peer_url = f"http://{LOOPBACK}:{etcd.rpc_port}"
    etcd.argv = [
        etcd.exe,
        "--name=nsqctl",
        f"--data-dir={etcd.data_dir}/data",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=nsqctl={peer_url}",
        "--enable-v2=true",
    ]
    # The v2 API is turned on by the flag alone: etcd 3.4 refuses to start when an ETCD_*
    # variable shadows a flag it was also given ("conflicting environment variable").
    etcd.env = {}
    cluster.nodes.append(etcd)
    common = {
        "cluster_id": CLUSTER_ID,
        "cluster_leadership_addresses": client_url,
        "broadcast_interface": "",
        "broadcast_address": LOOPBACK,
        "log_level": 2,
    }
    for i in range(lookupd):
        node = _node(cluster, "nsqlookupd", i, bins / "nsqlookupd")
        node.tcp_port, node.http_port, node.rpc_port = ports.take(), ports.take(), ports.take()
        config = Path(node.data_dir) / "nsqlookupd.cfg"
        config.write_text(
            _toml(
                {
                    **common,
                    "tcp_address": f"{LOOPBACK}:{node.tcp_port}",
                    "http_address": f"{LOOPBACK}:{node.http_port}",
                    "rpc_port": str(node.rpc_port),
                    "log_dir": node.data_dir,
                    "allow_write_with_nochannels": True,
                    "nsqd_ping_timeout": "15s",
                    "inactive_producer_timeout": "60s",
                }
            )
        )
        node.argv = [node.exe, f"--config={config}"]
        cluster.nodes.append(node)
    for i in range(nsqd):
        node = _node(cluster, "nsqd", i, bins / "nsqd")
        node.tcp_port, node.http_port, node.rpc_port = ports.take(), ports.take(), ports.take()
        node.host = nsqd_host(i)
        metric_port = ports.take()
        config = Path(node.data_dir) / "nsqd.cfg"
        config.write_text(
            _toml(
                {
                    **common,
                    "id": i + 1,
                    "broadcast_address": node.host,
                    "tcp_address": node.tcp_address,
                    "http_address": node.http_address,
                    "rpc_port": str(node.rpc_port),
                    "metric_address": f"{node.host}:{metric_port}",
                    "data_path": node.data_dir,
                    "log_dir": node.data_dir,
                    "lookup_ping_interval": "1s",
                    "sync_every": 1,
                }
            )
        )
        node.argv = [node.exe, f"--config={config}", *nsqd_args]
        node.env = {TESTMODE_ENV: "1"}
        cluster.nodes.append(node)


def nsqd_host_for(spread_addresses: bool) -> Callable[[int], str]:
    """nsqd number -> the address it listens on and broadcasts."""
    return loopback_host if spread_addresses else (lambda _i: LOOPBACK)


def _port_count(flavor: Flavor, nsqd: int, lookupd: int) -> int:
    if flavor == "original":
        return 2 * (nsqd + lookupd)
    return 2 + 3 * lookupd + 4 * nsqd


def planned_nsqd_addresses(
    flavor: str, nsqd: int, lookupd: int, port_base: int, spread_addresses: bool
) -> list[tuple[str, int, int]]:
    """(host, tcp port, http port) of each nsqd a start from ``port_base`` will lay out:
    the ports are taken in order, lookupds (and etcd) first, as :func:`start` takes them."""
    host = nsqd_host_for(spread_addresses)
    if flavor == "original":
        first, per_nsqd = port_base + 2 * lookupd, 2
    else:
        first, per_nsqd = port_base + 2 + 3 * lookupd, 4
    return [(host(i), first + per_nsqd * i, first + per_nsqd * i + 1) for i in range(nsqd)]


def _leader_or_none(lookupd_http: str) -> str | None:
    try:
        with httpx.Client(timeout=2.0) as client:
            return admin.lookupd_leader(client, lookupd_http)
    except admin.AdminError:
        return None


def _redesign_nodes_registered(leader_http: str, count: int) -> bool:
    try:
        resp = httpx.get(f"http://{leader_http}/nodes", headers=admin.NSQ_V1, timeout=2.0)
    except httpx.HTTPError:
        return False
    if resp.status_code != 200:
        return False
    return len(parse_nodes_body(resp.content, source=leader_http) or []) >= count


def start(
    flavor: Flavor,
    directory: Path,
    nsqd: int = 1,
    lookupd: int = 1,
    bin_dir: Path | None = None,
    port_base: int | None = None,
    timeout: float = 60.0,
    progress: Callable[[str], None] | None = None,
    nsqd_args: list[str] | None = None,
    module_sources: Path | None = None,
    spread_addresses: bool = False,
) -> Cluster:
    """Build if needed, start and wait for a healthy cluster; on failure stop everything.

    ``nsqd_args`` are extra command-line flags for every nsqd (TLS, auth, limits);
    ``module_sources`` is passed to the build (local Go module sources);
    ``spread_addresses`` gives each nsqd its own loopback address (see the module doc).
    """
    if nsqd < 1 or lookupd < 1:
        raise ServerSetupError("a cluster needs at least one nsqd and one nsqlookupd")
    say = progress or (lambda _msg: None)
    directory = directory.resolve()
    existing = directory / STATE_FILE
    was_healthy = False
    if existing.exists():
        old = Cluster.load(directory)
        was_healthy = old.became_healthy
        if any(old.running().values()):
            raise ServerSetupError(
                f"a sandbox is already running in {directory}: `nsqctl sandbox down` first, "
                "or use another --dir"
            )
    if bin_dir is None:
        bin_dir = build.build(flavor, module_sources=module_sources, progress=say)
    directory.mkdir(parents=True, exist_ok=True)
    # a failed start over data a healthy sandbox left keeps saying so
    cluster = Cluster(flavor=flavor, directory=directory, became_healthy=was_healthy)
    ports = _Ports(_port_count(flavor, nsqd, lookupd), port_base)
    nsqd_host = nsqd_host_for(spread_addresses)
    if flavor == "original":
        _original(cluster, bin_dir, nsqd, lookupd, ports, list(nsqd_args or ()), nsqd_host)
    else:
        _redesign(cluster, bin_dir, nsqd, lookupd, ports, list(nsqd_args or ()), nsqd_host)
    try:
        for node in cluster.nodes:
            if node.role != "nsqd":
                say(f"starting {node.name}")
                process.start(node)
                cluster.save()
                _wait_healthy(node, timeout)
        # The nsqds start together once etcd and the nsqlookupds they need at start answer:
        # a youzan nsqd sleeps a second at start before it looks for the nsqlookupd leader,
        # so waiting for each in turn would cost that second once per nsqd.
        for node in cluster.nsqds:
            say(f"starting {node.name}")
            process.start(node)
        cluster.save()
        for node in cluster.nsqds:
            _wait_healthy(node, timeout)
        if flavor == "redesign":
            first = cluster.lookupds[0]
            say("waiting for the lookupd leader election")
            process.wait_until(
                first,
                lambda: _leader_or_none(first.http_address) is not None,
                "leader-elected",
                timeout,
            )
            leader = _leader_or_none(first.http_address) or first.http_address
            say("waiting for every nsqd to register")
            process.wait_until(
                first,
                lambda: _redesign_nodes_registered(leader, nsqd),
                f"aware of all {nsqd} nsqd nodes",
                timeout,
            )
    except BaseException:
        cluster.stop()
        cluster.save()
        raise
    cluster.became_healthy = True
    cluster.save()
    return cluster
