"""An nsqd the operator names (``--nsqd-http``) that answers but that nsqlookupd does not
list is acted on, not silently left out, on real original servers.

A private cluster (2 nsqd), shared by this module's tests: one nsqd is told to register
with no nsqlookupd (``PUT /config/nsqlookupd_tcp_addresses``, as a drain does), so
nsqlookupd lists only the other for each topic while both answer and hold it. An nsqd nsqlookupd
lists but the operator names otherwise (``localhost`` for ``127.0.0.1``) is the same nsqd,
acted on once, as is one given under both names with no nsqlookupd: that needs no private
cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from nsqctl.admin.base import NSQ_V1
from nsqctl.servers.cluster import Cluster
from nsqctl.stats import read_nsqd_stats
from tests.helpers.cli import cli, invoke, run_main
from tests.helpers.clusters import running_cluster
from tests.helpers.redesign import eventually, unique


def listed(lookupd: str, topic: str) -> list[str]:
    """The nsqds (HTTP addresses) nsqlookupd lists for ``topic``."""
    info = json.loads(invoke("lookup", topic, "--json", "--lookupd", lookupd).stdout)
    return sorted(n["http"] for n in info["nsqds"])


def paused(address: str, topic: str) -> bool:
    found = read_nsqd_stats(address, topic=topic, channel="c").channel(topic, "c")
    assert found is not None, f"{address} has no {topic}/c"
    return found.paused


@pytest.fixture(scope="module")
def unlisting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster whose second nsqd registers with no nsqlookupd."""
    directory: Path = tmp_path_factory.mktemp("unlisted")
    for c in running_cluster("original", directory, nsqd=2, lookupd=1):
        httpx.put(
            f"http://{c.nsqd_http[1]}/config/nsqlookupd_tcp_addresses",
            content=b"[]",
            headers=NSQ_V1,
        ).raise_for_status()
        yield c


def on_both(c: Cluster, topic: str) -> None:
    """``topic`` and its channel c on both nsqds, once nsqlookupd lists only the first."""
    for address in c.nsqd_http:
        for path in (f"/topic/create?topic={topic}", f"/channel/create?topic={topic}&channel=c"):
            httpx.post(f"http://{address}{path}", timeout=10).raise_for_status()
    [lookupd] = c.lookupd_http
    eventually(lambda: listed(lookupd, topic) == [c.nsqd_http[0]], 30, "one nsqd listed")


def test_a_given_nsqd_nsqlookupd_does_not_list_is_acted_on(unlisting: Cluster) -> None:
    c = unlisting
    [lookupd] = c.lookupd_http
    listed_one, unlisted = c.nsqd_http
    topic = unique("unlisted")
    on_both(c, topic)

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
    # --node in the spelling given still names that nsqd, the one listed
    dry = run_main("channel", "unpause", topic, "c", "--dry-run", "--node", given[0], *where)
    assert dry.returncode == 0, dry
    assert c.nsqd_http[0] in dry.stdout and c.nsqd_http[1] not in dry.stdout, dry
    # with no nsqlookupd, an nsqd given under both names is one nsqd too
    both = [
        f
        for a, b in zip(given, c.nsqd_http, strict=True)
        for f in ("--nsqd-http", a, "--nsqd-http", b)
    ]
    dry = run_main("channel", "unpause", topic, "c", "--dry-run", "--node", c.nsqd_http[0], *both)
    assert dry.returncode == 0, dry
    assert given[0] in dry.stdout and given[1] not in dry.stdout, dry
    done = run_main("channel", "unpause", topic, "c", "--yes", "--json", *both)
    assert done.returncode == 0, done
    assert sorted(r["node"] for r in json.loads(done.stdout)["results"]) == sorted(given)
    assert not any(paused(a, topic) for a in c.nsqd_http)


def depth(address: str, topic: str) -> int:
    found = read_nsqd_stats(address, topic=topic, channel="c").channel(topic, "c")
    return -1 if found is None or found.in_flight_count else found.depth


def test_borrow_consumes_from_the_given_unlisted_nsqd_it_counts(unlisting: Cluster) -> None:
    """``peek --borrow`` counts the messages of the nsqd given but not listed: it must
    consume from it too, or it waits for messages that never come and says another
    consumer took them."""
    c = unlisting
    [lookupd] = c.lookupd_http
    topic = unique("unlisted_borrow")
    on_both(c, topic)
    for tcp, body in zip(c.nsqd_tcp, ("listed", "unlisted"), strict=True):
        pub = invoke("pub", topic, body, "--nsqd", tcp)
        assert pub.exit_code == 0, pub.output
    eventually(lambda: [depth(a, topic) for a in c.nsqd_http] == [1, 1], 30, "1 on each")

    where = [f for a in c.nsqd_tcp for f in ("--nsqd", a)]
    where += [f for a in c.nsqd_http for f in ("--nsqd-http", a)]
    proc = cli(
        "peek", topic, "c", "--borrow", "2", "--format", "json", "--lookupd", lookupd, *where
    )
    assert proc.returncode == 0, proc.stderr
    bodies = sorted(json.loads(line)["body"] for line in proc.stdout.splitlines())
    assert bodies == ["listed", "unlisted"], proc
    assert "borrowed" not in proc.stderr, proc.stderr
    eventually(lambda: [depth(a, topic) for a in c.nsqd_http] == [1, 1], 30, "both back")
