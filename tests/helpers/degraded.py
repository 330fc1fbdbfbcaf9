"""The cells of the degraded-cluster matrix that read alike on both families: what each
read-only surface shows of a cluster with part of it down.

Each surface is asked as an operator asks it (the CLI, in process), except the dashboard
and the exporter, whose models are read directly (the rows the dashboard draws, the
samples the exporter serves) so no terminal or HTTP server is started per cell.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from nsqctl.health.check import judge
from nsqctl.health.metrics import ClusterCollector
from nsqctl.health.monitor import Latest
from nsqctl.health.spec import RuleSet
from nsqctl.stats.poller import StatsPoller
from nsqctl.stats.sources import StatsSession
from nsqctl.stats.view import ClusterView
from tests.helpers.cli import assert_one_line_error, invoke, run_main
from tests.helpers.metrics import Series, metric_samples


def ok(*args: str) -> Any:
    """``nsqctl ARGS`` in process; it must exit 0."""
    result = invoke(*args)
    assert result.exit_code == 0, (args, result.output)
    return result


#: What a view that meets a hung nsqd may take (it times the nsqd out, then answers).
BOUND = 30.0


def check(code: int, *where: str, off: Sequence[str] = ()) -> Any:
    """``nsqctl check --json -n 1`` of ``where`` with the rule kinds ``off`` turned off
    (to see one rule's finding alone); it must exit ``code``."""
    rules = [a for kind in off for a in ("--rule", f"{kind}=off")]
    result = invoke("check", "--json", "-n", "1", *rules, *where)
    assert result.exit_code == code, (where, result.output)
    return result


def one_record(*args: str) -> dict[str, Any]:
    """The one JSON line of ``nsqctl ARGS --json -n 1`` (stat) or the document (top)."""
    [record] = [json.loads(line) for line in ok(*args).stdout.splitlines() if line.strip()]
    return record  # type: ignore[no-any-return]


async def view_of(lookupd_http: Sequence[str], nsqd_http: Sequence[str] = ()) -> ClusterView:
    """One poll, as the dashboard and the exporter take it."""
    session = StatsSession(StatsPoller(lookupd_http, nsqd_http, focus=None))
    try:
        return await session.refresh()
    finally:
        await session.aclose()


def scrape(view: ClusterView, rules: Sequence[str] = ()) -> Series:
    """What the exporter serves for ``view`` (its collector, without the HTTP server)."""
    registry = CollectorRegistry()
    result = judge([view], RuleSet.parse(list(rules)))
    registry.register(ClusterCollector(lambda: Latest(view, result)))
    return metric_samples(generate_latest(registry).decode())


def findings(check: Any, rule: str) -> list[dict[str, Any]]:
    """The findings of ``rule`` in ``nsqctl check --json``'s document."""
    return [f for f in json.loads(check.stdout)["findings"] if f["rule"] == rule]


def unjudged_findings(check: Any) -> dict[str, str]:
    """The message of each rule ``nsqctl check --json`` could not judge on the whole
    cluster (an unknown finding with no topic or node), by rule."""
    return {
        f["rule"]: f["message"]
        for f in json.loads(check.stdout)["findings"]
        if f["status"] == "unknown" and f["topic"] is None and f["node"] is None
    }


def assert_lookupd_down(
    lookupd: str, nsqd_http: Sequence[str], topic: str, channel: str
) -> ClusterView:
    """Every read-only surface with the only nsqlookupd killed: each says so; those given
    the nsqds' addresses answer from the nsqds and say the answer is theirs alone. Returns
    the dashboard's view (for family-specific cells)."""
    where = ["--lookupd", lookupd]
    nsqds = [a for n in nsqd_http for a in ("--nsqd-http", n)]
    said = f"nsqlookupd {lookupd} not answering: only the nsqds were asked"

    # lookup without the nsqds: a runtime failure naming the lookupd and the way round it
    line = assert_one_line_error(run_main("lookup", topic, *where), 1)
    assert "no nsqlookupd answered" in line and lookupd in line
    assert "--nsqd-http shows what the nsqds hold" in line, line
    # ... with them: what they hold (copies, channels), no leader or ISR claimed, and why
    found = json.loads(ok("lookup", topic, "--json", *where, *nsqds).stdout)
    assert found["source"] == "nsqds" and found["complete"] is False, found
    assert any("no partition leader, replica set, ISR" in w for w in found["warnings"])
    assert any(said in w and w.endswith("this answer may be incomplete") for w in found["warnings"])
    assert channel in found["channels"] and found["meta"] is None
    assert found["nsqds"] and {n["http"] for n in found["nsqds"]} <= set(nsqd_http)
    assert [s["ok"] for s in found["lookupds"]] == [False]
    assert (found["family"] == "redesign") == bool(found["partitions"])
    for part in found["partitions"]:
        assert part["leader_tcp"] is None and part["replicas"] is None and part["isr"] is None
        assert part["copies"] and set(part["copies"]) <= set(nsqd_http)
    shown = ok("lookup", topic, *where, *nsqds).stdout
    assert "from the nsqds alone" in shown and said in shown and "NO LEADER" not in shown
    # lists without the nsqds: fail, naming the lookupd and what would list them instead
    for args in (("topic", "list"), ("channel", "list", topic), ("node", "list")):
        line = assert_one_line_error(run_main(*args, *where), 1)
        assert lookupd in line and "--nsqd-http" in line, line
    # ... and with them, the nsqds' list, said to be theirs alone
    topics = ok("topic", "list", "--json", *where, *nsqds)
    listing = json.loads(topics.stdout)
    assert topic in listing["topics"] and listing["complete"] is False
    assert any(said in w and w.endswith("this list may be incomplete") for w in listing["warnings"])
    assert said in topics.stderr
    channels = ok("channel", "list", topic, *where, *nsqds)
    assert channels.stdout.splitlines() == [channel] and said in channels.stderr
    nodes = json.loads(ok("node", "list", "--json", *where, *nsqds).stdout)
    assert nodes["complete"] is False and any(said in w for w in nodes["warnings"])
    assert {n["http"] for n in nodes["nodes"]} == set(nsqd_http)
    assert not any(n["registered"] for n in nodes["nodes"])
    # stat and top without the nsqds: fail, naming the lookupd and the way round it
    commands: tuple[tuple[str, ...], ...] = (
        ("stat", topic, "-n", "1"),
        ("top", "--once", "-i", "0.1"),
    )
    for command in commands:
        line = assert_one_line_error(run_main(*command, *where), 1)
        assert lookupd in line and "--nsqd-http reads the nsqds" in line, line
    # stat: the rows, and the warning (stderr; --json: complete/warnings)
    record = one_record("stat", topic, "--json", "-n", "1", *where, *nsqds)
    assert [r["topic"] for r in record["rows"] if r["scope"] == "topic"] == [topic]
    assert record["complete"] is False and any(said in w for w in record["warnings"])
    text = ok("stat", topic, "-n", "1", *where, *nsqds)
    assert said in text.stderr and topic in text.stdout
    # top: the same words
    ranking = one_record("top", "--json", "-i", "0.1", *where, *nsqds)
    assert ranking["complete"] is False and any(said in w for w in ranking["warnings"])
    # check: nothing to judge without the nsqds (unknown); with them, the lookupd is down
    blind = invoke("check", "-n", "1", *where)
    assert blind.exit_code == 3 and f"no nsqlookupd answered ({lookupd})" in blind.stdout
    judged = check(2, *where, *nsqds)
    [down] = [f for f in findings(judged, "node-down") if f["node"] == lookupd]
    assert down["status"] == "crit" and "nsqlookupd does not answer" in down["message"]
    # ... and the rules that stand on its answers say they were not judged, and why (the
    # partitions and topics only it counts), instead of passing on what the nsqds show
    stands_on = {"no-leader", "isr"} if found["family"] == "redesign" else {"not-seen"}
    unjudged = unjudged_findings(judged)
    assert set(unjudged) == stands_on, unjudged
    for message in unjudged.values():
        assert message.startswith(f"not judged: no nsqlookupd answered ({lookupd}: "), message
        assert message.endswith("fix: bring an nsqlookupd back, or check against one that answers")
    # the dashboard's model and the exporter
    from nsqctl.tui import rows

    view = asyncio.run(view_of([lookupd], nsqd_http))
    assert f"{lookupd} DOWN" in rows.lookupd_line(view).plain
    scraped = scrape(view)
    assert scraped[("nsq_lookupd_up", frozenset({("node", lookupd)}))] == 0.0
    status = {
        dict(labels)["node"]: value
        for (name, labels), value in scraped.items()
        if name == "nsqctl_check_status" and ("rule", "node-down") in labels
    }
    assert status[lookupd] == 2.0
    unjudged_status = {
        dict(labels)["rule"]: value
        for (name, labels), value in scraped.items()
        if name == "nsqctl_check_status" and dict(labels)["topic"] == dict(labels)["node"] == ""
    }
    assert unjudged_status == dict.fromkeys(stands_on, 3.0)
    # the exporter without the nsqds: nothing reached, and the lookupd it could not reach
    blind_scrape = scrape(asyncio.run(view_of([lookupd])))
    assert blind_scrape[("nsqctl_up", frozenset())] == 0.0
    assert blind_scrape[("nsq_lookupd_up", frozenset({("node", lookupd)}))] == 0.0
    return view
