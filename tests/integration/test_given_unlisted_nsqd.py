"""An nsqd the operator names (``--nsqd-http``) that answers but that nsqlookupd does not
list is acted on, not silently left out, on real original servers.

A private cluster (2 nsqd): the topic is on both, then one nsqd is told to register with
no nsqlookupd (``PUT /config/nsqlookupd_tcp_addresses``, as a drain does), so nsqlookupd
lists only the other while it keeps answering and holding the topic. An nsqd nsqlookupd
lists but the operator names otherwise (``localhost`` for ``127.0.0.1``) is the same nsqd,
acted on once, as is one given under both names with no nsqlookupd: that needs no private
cluster.
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


def test_a_given_nsqd_named_otherwise_than_listed_is_acted_on_once(
    original_cluster: Cluster,
) -> None:
    """The nsqds given as ``localhost:PORT`` while nsqlookupd lists them as
    ``127.0.0.1:PORT`` are the nsqds listed: each is paused once, none is warned about."""
    c = original_cluster
    [lookupd] = c.lookupd_http
    topic = unique("named")
    for address in c.nsqd_http:
        for path in (f"/topic/create?topic={topic}", f"/channel/create?topic={topic}&channel=c"):
            httpx.post(f"http://{address}{path}", timeout=10).raise_for_status()
    eventually(lambda: listed(lookupd, topic) == sorted(c.nsqd_http), 30, "both listed")
    assert all(a.startswith("127.0.0.1:") for a in c.nsqd_http)
    given = [a.replace("127.0.0.1:", "localhost:") for a in c.nsqd_http]

    where = ("--lookupd", lookupd, *(f for a in given for f in ("--nsqd-http", a)))
    done = run_main("channel", "pause", topic, "c", "--yes", "--json", *where)
    assert done.returncode == 0, done
    report = json.loads(done.stdout)
    assert sorted(r["node"] for r in report["results"]) == sorted(c.nsqd_http)
    assert report["warnings"] == [] and "warning" not in done.stderr, done
    assert all(paused(a, topic) for a in c.nsqd_http)
    # with no nsqlookupd, an nsqd given under both names is one nsqd too
    both = [
        f
        for a, b in zip(given, c.nsqd_http, strict=True)
        for f in ("--nsqd-http", a, "--nsqd-http", b)
    ]
    done = run_main("channel", "unpause", topic, "c", "--yes", "--json", *both)
    assert done.returncode == 0, done
    assert sorted(r["node"] for r in json.loads(done.stdout)["results"]) == sorted(given)
    assert not any(paused(a, topic) for a in c.nsqd_http)
