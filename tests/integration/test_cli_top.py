"""``nsqctl top`` as a user runs it (the installed entry point) against real clusters of both
families: a consumer that gives the same three messages back over and over is ranked first
by requeue rate and flagged poison; bad input is one line."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from rich.console import Console

from nsqctl.cli.commands.top import render_table, top_record
from nsqctl.servers.cluster import Cluster
from nsqctl.stats.recording import play_back
from nsqctl.stats.view import build_view
from tests.helpers.cli import assert_one_line_error, cli, invoke
from tests.helpers.poison import POISON, poison_consumer, poll_interval_for_poison

DATA = Path(__file__).resolve().parent.parent / "data" / "stats"


async def test_top_once_json_ranks_a_poison_channel_first(any_cluster: Cluster) -> None:
    c = any_cluster
    redesign = c.flavor == "redesign"
    topic = f"top_{uuid.uuid4().hex[:10]}"
    consumer, seen = await poison_consumer(c, topic, redesign)
    try:
        # long enough for more than twice the held messages to be requeued between the polls;
        # the pace is measured first, but a loaded machine can slow nsqd's redeliveries
        # after that: a run that saw too few is repeated over twice the interval (the rule
        # itself is what is tested, not the pace)
        pace = await poll_interval_for_poison(seen, floor=1)
        for attempt in range(3):
            interval = f"{pace * 2**attempt:g}"
            args = ["top", "--lookupd", c.lookupd_http[0], "--once", "--json", "-i", interval]
            proc = await asyncio.to_thread(cli, *args, "-n", "500")
            assert proc.returncode == 0, proc.stderr
            doc = json.loads(proc.stdout)  # one document
            mine = [e for e in doc["entries"] if e["topic"] == topic]
            assert [e["channel"] for e in mine] == ["retries"]
            entry = mine[0]
            if entry["requeue_rate"] * float(interval) > 2 * POISON:
                break
    finally:
        await consumer.stop(timeout=5)
    assert doc["sort"] == "requeue" and doc["by"] == "channel"
    assert "poison" in entry["reasons"], json.dumps(entry)
    assert entry["held"] == POISON and entry["requeue_rate"] * float(interval) > 2 * POISON
    assert doc["entries"][0]["requeue_rate"] >= entry["requeue_rate"]  # ranked by it
    [note] = doc["notes"]  # two polls cannot show growth over three steps: it says so
    assert note.startswith("orphan not judged: it needs 4 polls of growing depth"), note


def test_top_once_table_says_in_one_line_that_orphans_are_not_judged(
    original_cluster: Cluster,
) -> None:
    """In-process: an interpreter start-up less."""
    run = invoke("top", "--nsqd-http", original_cluster.nsqd_http[0], "--once", "-i", "0.1")
    assert run.exit_code == 0, run.output
    out = run.stdout.splitlines()
    assert out[-1].startswith("orphan not judged: it needs 4 polls"), out
    assert "hot channels by requeue" in out[0]
    assert "too few to flag an orphan" in " ".join(invoke("top", "--help").stdout.split())


def test_top_bad_sort_is_one_line() -> None:
    proc = cli("top", "--nsqd-http", "127.0.0.1:1", "--sort", "depth")
    line = assert_one_line_error(proc, 2)
    assert "--sort" in line and "requeue" in line


async def test_top_table_on_recorded_redesign_polls() -> None:
    """The human table: the same order as --json, channels or client connections."""
    snaps = await play_back(DATA / "redesign_manifest.json", ["t0", "t1"], focus=None)
    view = build_view(snaps[1], snaps[0])
    for clients in (False, True):
        console = Console(width=240, record=True)
        console.print(render_table(view, "requeue", clients, 5))
        lines = console.export_text().splitlines()
        entries = top_record(view, "requeue", clients, 5)["entries"]
        assert len(entries) == 5 if clients else len(entries) >= 2
        first = next(i for i, line in enumerate(lines) if f"{entries[0]['topic']}/" in line)
        second = next(i for i, line in enumerate(lines) if f"{entries[1]['topic']}/" in line)
        assert first <= second
        assert ("hot clients" if clients else "hot channels") in lines[0]
