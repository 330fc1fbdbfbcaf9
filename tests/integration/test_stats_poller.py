"""The stats poller against a real cluster with one nsqlookupd frozen (SIGSTOP): it
accepts connections and never answers, the worst kind of dead node for a poller."""

from __future__ import annotations

import os
import signal

from nsqctl.servers import cluster
from nsqctl.stats.poller import StatsPoller


async def test_a_frozen_lookupd_is_shown_down_while_the_rest_is_polled(start_cluster) -> None:
    c: cluster.Cluster = start_cluster("original", nsqd=1, lookupd=2)
    live, frozen = c.lookupds
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        async with StatsPoller(c.lookupd_http, timeout=1.0) as poller:
            snap = await poller.snapshot()
            again = await poller.snapshot()
    finally:
        os.kill(frozen.pid, signal.SIGCONT)  # so that stopping it by PID works
    for shot in (snap, again):
        status = {s.address: s.ok for s in shot.lookupds}
        assert status == {
            f"127.0.0.1:{live.http_port}": True,
            f"127.0.0.1:{frozen.http_port}": False,
        }
        assert [n.address for n in shot.nodes] == c.nsqd_http
        assert [n.state for n in shot.nodes] == ["up"]
