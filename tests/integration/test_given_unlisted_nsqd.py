"""An nsqd the operator names (``--nsqd-http``) that answers but that nsqlookupd does not
list is acted on, not silently left out, on real original servers.

A private cluster (2 nsqd): the topic is on both, then one nsqd is told to register with
no nsqlookupd (``PUT /config/nsqlookupd_tcp_addresses``, as a drain does), so nsqlookupd
lists only the other while it keeps answering and holding the topic.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx

from nsqctl.admin.base import NSQ_V1
from nsqctl.servers.cluster import Cluster
from nsqctl.stats import read_nsqd_stats
from tests.helpers.cli import invoke, run_main
from tests.helpers.redesign import eventually, unique


def listed(lookupd: str, topic: str) -> list[str]:
    """The nsqds (HTTP addresses) nsqlookupd lists for ``topic``."""
    info = json.loads(invoke("lookup", topic, "--json", "--lookupd", lookupd).stdout)
    return sorted(n["http"] for n in info["nsqds"])


def paused(address: str, topic: str) -> bool:
    found = read_nsqd_stats(address, topic=topic, channel="c").channel(topic, "c")
    assert found is not None, f"{address} has no {topic}/c"
    return found.paused


def test_a_given_nsqd_nsqlookupd_does_not_list_is_acted_on(
    start_cluster: Callable[..., Cluster],
) -> None:
    c = start_cluster("original", nsqd=2)
    [lookupd] = c.lookupd_http
    listed_one, unlisted = c.nsqd_http
    topic = unique("unlisted")
    for address in c.nsqd_http:
        for path in (f"/topic/create?topic={topic}", f"/channel/create?topic={topic}&channel=c"):
            httpx.post(f"http://{address}{path}", timeout=10).raise_for_status()
    eventually(lambda: listed(lookupd, topic) == sorted(c.nsqd_http), 30, "both listed")
    httpx.put(
        f"http://{unlisted}/config/nsqlookupd_tcp_addresses", content=b"[]", headers=NSQ_V1
    ).raise_for_status()
    eventually(lambda: listed(lookupd, topic) == [listed_one], 30, "one nsqd unlisted")

    where = ("--lookupd", lookupd, "--nsqd-http", listed_one, "--nsqd-http", unlisted)
    dry = run_main("channel", "pause", topic, "c", "--dry-run", *where)
    assert dry.returncode == 0, dry
    assert unlisted in dry.stdout and listed_one in dry.stdout  # the plan names both
    done = run_main("channel", "pause", topic, "c", "--yes", *where)
    assert done.returncode == 0, done
    assert paused(listed_one, topic) and paused(unlisted, topic)
    [warning] = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert f"nsqd {unlisted} holds {topic} but no nsqlookupd lists it" in warning
    assert "acted on too" in warning
