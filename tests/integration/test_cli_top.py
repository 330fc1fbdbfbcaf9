"""``nsqctl top`` as a user runs it (the installed entry point) against real clusters of both
families: a consumer that gives the same three messages back over and over is ranked first
by requeue rate and flagged poison; bad input is one line."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from rich.console import Console

from nsqctl.cli.top import render_table, top_record
from nsqctl.consumer import Consumer
from nsqctl.message import Message
from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from nsqctl.stats.recording import play_back
from nsqctl.stats.view import build_view
from tests.helpers.cli import assert_one_line_error, cli
from tests.helpers.redesign import TopicSpec, create_topics
from tests.helpers.wait import wait_for

DATA = Path(__file__).resolve().parent.parent / "data" / "stats"
POISON = 3


async def poison_consumer(c: Cluster, topic: str, redesign: bool) -> tuple[Consumer, list[int]]:
    """Publish three messages and start a consumer that requeues each one as it arrives;
    nsqd's REQ delay (not the test) paces the round trip. On the redesign the channel is
    made first: one made later starts at the end of the queue."""
    seen = [0]

    async def give_back(msg: Message) -> None:
        seen[0] += 1
        msg.requeue(delay=0.05, backoff=False)

    if redesign:
        await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1)}, ["retries"])
        producer = Producer(lookupd_http=c.lookupd_http)
        consumer = Consumer(
            topic, "retries", give_back, lookupd_http=c.lookupd_http, max_in_flight=POISON
        )
    else:
        producer = Producer(nsqd_tcp=[c.nsqd_tcp[0]])
        consumer = Consumer(
            topic, "retries", give_back, nsqd_tcp=[c.nsqd_tcp[0]], max_in_flight=POISON
        )
    async with producer:
        await producer.publish_many(topic, [f"bad{i}".encode() for i in range(POISON)])
    await consumer.start()
    return consumer, seen


async def test_top_once_json_ranks_a_poison_channel_first(any_cluster: Cluster) -> None:
    c = any_cluster
    redesign = c.flavor == "redesign"
    topic = f"top_{uuid.uuid4().hex[:10]}"
    consumer, seen = await poison_consumer(c, topic, redesign)
    try:
        await wait_for(lambda: seen[0] > 3 * POISON, 30, "the messages requeued a few times")
        # youzan's nsqd redelivers a requeued message a few times a second at most: a longer
        # interval lets it requeue them more than twice each between the two polls
        interval = "3" if redesign else "1"
        args = [
            "top",
            "--lookupd",
            c.lookupd_http[0],
            "--once",
            "--json",
            "-i",
            interval,
            "-n",
            "500",
        ]
        proc = await asyncio.to_thread(cli, *args)
    finally:
        await consumer.stop(timeout=5)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # one document
    assert doc["sort"] == "requeue" and doc["by"] == "channel"
    mine = [e for e in doc["entries"] if e["topic"] == topic]
    assert [e["channel"] for e in mine] == ["retries"]
    entry = mine[0]
    assert "poison" in entry["reasons"], json.dumps(entry)
    assert entry["held"] == POISON and entry["requeue_rate"] * float(interval) > 2 * POISON
    assert doc["entries"][0]["requeue_rate"] >= entry["requeue_rate"]  # ranked by it


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
