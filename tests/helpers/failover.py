"""Leader faults on real redesign clusters, for failover tests and ``bench/bench_faults.py``.

What nsqlookupd does after a kill -9 of a partition leader, measured on this machine kind
(youzan v0.3.7-HA.1.12.7): with 3 nsqd and replicas 3, a new writable leader in about 22 s;
with replicas 2 on 3 nsqd, about 108 s (an emergency migration waits for nsqlookupd's next
topic check); with 2 nsqd and replicas 2, never, until the killed nsqd is back (then about
110 s). Writes need more than replicas/2 nodes in the ISR.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import httpx

from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.servers.process import NodeRecord
from tests.helpers.wait import eventually


def lookup_partitions(lookupd_http: str, topic: str, access: str = "w") -> dict[int, int]:
    """partition → leader's TCP port in ``/lookup?access=``; {} when none or unreachable."""
    try:
        resp = httpx.get(
            f"http://{lookupd_http}/lookup", params={"topic": topic, "access": access}, timeout=2.0
        )
        data = resp.json()
    except (httpx.HTTPError, ValueError):
        return {}
    data = data.get("data", data) if isinstance(data, dict) else {}
    parts = data.get("partitions") or {}
    return {int(p): int(peer["tcp_port"]) for p, peer in parts.items()}


def leader_of(c: Cluster, topic: str, partition: int = 0, access: str = "w") -> NodeRecord:
    """The nsqd leading ``topic``'s ``partition`` now."""
    port = lookup_partitions(c.lookupd_http[0], topic, access).get(partition)
    if port is None:
        raise AssertionError(f"{topic}/{partition} has no leader in /lookup?access={access}")
    return next(n for n in c.nsqds if n.tcp_port == port)


def kill_leader(c: Cluster, topic: str, partition: int = 0) -> NodeRecord:
    """kill -9 the partition's leader; returns it (still recorded, for a restart)."""
    node = leader_of(c, topic, partition)
    process.kill_hard(node)
    return node


def wait_new_leader(
    c: Cluster,
    topic: str,
    old: NodeRecord,
    partitions: Sequence[int] = (0,),
    timeout: float = 240.0,
) -> float:
    """Seconds until every partition in ``partitions`` is writable on a leader other than
    ``old`` (or on ``old`` again once it was restarted); fails after ``timeout``."""
    start = time.monotonic()

    def led() -> bool:
        writable = lookup_partitions(c.lookupd_http[0], topic)
        return all(p in writable for p in partitions) and (
            process.pid_runs(old.pid, old.exe) or old.tcp_port not in writable.values()
        )

    eventually(led, timeout, f"a writable leader for {topic} {list(partitions)}", step=0.2)
    return time.monotonic() - start
