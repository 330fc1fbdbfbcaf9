"""``nsqctl stat`` as a user runs it (the installed entry point) against real clusters of
both families, and its rows on payloads recorded from a redesign cluster."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

from nsqctl import admin
from nsqctl.cli.commands.stat import interval_record, stat_rows
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message
from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from nsqctl.stats.recording import play_back
from nsqctl.stats.view import build_view

DATA = Path(__file__).resolve().parent.parent / "data" / "stats"


async def nsqctl(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from nsqctl.cli.app import main; main()",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


def _clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSQCTL_")}
    env["NSQCTL_CONFIG"] = str(tmp_path / "none.toml")
    return env


async def test_stat_json_channel_with_known_consumer(
    original_cluster: Cluster, tmp_path: Path
) -> None:
    c = original_cluster
    topic = f"st_{uuid.uuid4().hex[:10]}"
    async with Producer(nsqd_tcp=[c.nsqd_tcp[0]]) as producer:
        await producer.publish_many(topic, [b"m"] * 12)
    release = asyncio.Event()

    async def hold(msg: Message) -> None:
        await release.wait()

    consumer = Consumer(
        topic, "st", hold, nsqd_tcp=[c.nsqd_tcp[0]], options=ConsumerOptions(max_in_flight=3)
    )
    await consumer.start()
    try:
        for _ in range(100):  # the consumer fills its RDY
            code, out, err = await nsqctl(
                "stat",
                topic,
                "st",
                "--lookupd",
                c.lookupd_http[0],
                "--json",
                "--count",
                "2",
                "--interval",
                "0.3",
                env=_clean_env(tmp_path),
            )
            assert code == 0, err
            lines = [json.loads(line) for line in out.splitlines()]
            if lines[-1]["rows"] and lines[-1]["rows"][0]["in_flight"] == 3:
                break
        assert len(lines) == 2
        row = lines[-1]["rows"][0]
        assert (row["scope"], row["topic"], row["channel"]) == ("channel", topic, "st")
        assert (row["depth"], row["in_flight"], row["clients"]) == (9, 3, 1)
        assert row["starved"] is True and row["stalled"] is False
        assert lines[0]["rows"][0]["msg_rate"] is None  # no previous sample yet
        assert lines[1]["rows"][0]["msg_rate"] == 0.0
        assert {n["state"] for n in lines[1]["nodes"]} == {"up"}
    finally:
        release.set()
        await consumer.stop(timeout=5)


async def test_stat_text_table_for_a_topic(original_cluster: Cluster, tmp_path: Path) -> None:
    c = original_cluster
    topic = f"st_{uuid.uuid4().hex[:10]}"
    async with Producer(nsqd_tcp=[c.nsqd_tcp[1]]) as producer:
        await producer.publish_many(topic, [b"m"] * 4)
    code, out, err = await nsqctl(
        "stat", topic, "--nsqd-http", c.nsqd_http[1], "--count", "1", env=_clean_env(tmp_path)
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["time", "what", "depth", "inflt"]
    fields = lines[1].split()
    assert fields[1] == topic and fields[2] == "4"  # 4 messages held at topic level


async def test_stat_dead_node_reported_and_no_cluster_is_a_usage_error(
    original_cluster: Cluster, tmp_path: Path
) -> None:
    c = original_cluster
    code, out, err = await nsqctl(
        "stat",
        "--nsqd-http",
        c.nsqd_http[0],
        "--nsqd-http",
        "127.0.0.1:1",
        "--json",
        "--count",
        "1",
        "--timeout",
        "1",
        env=_clean_env(tmp_path),
    )
    assert code == 0, err
    nodes = {n["address"]: n for n in json.loads(out)["nodes"]}
    assert nodes["127.0.0.1:1"]["state"] == "down" and nodes[c.nsqd_http[0]]["state"] == "up"
    code, out, err = await nsqctl("stat", "--count", "1", env=_clean_env(tmp_path))
    assert code == 2
    assert err.startswith("nsqctl: error:") and "--lookupd" in err and "Traceback" not in err


async def test_stat_rows_on_recorded_redesign_payloads() -> None:
    """`stat orders billing --json` as recorded: partition rows carry leader, replicas, ISR
    and stored bytes; channel rows the depth in messages and, apart, its bytes."""
    snaps = await play_back(DATA / "redesign_manifest.json", ["t1_orders_billing"])
    record = interval_record(build_view(snaps[0]), "orders", "billing")
    rows = record["rows"]
    assert [r["scope"] for r in rows] == ["channel", "channel_partition", "channel_partition"]
    assert rows[0]["depth"] == sum(r["depth"] for r in rows[1:]) > 0
    assert rows[0]["depth_bytes"] == sum(r["depth_bytes"] for r in rows[1:]) > rows[0]["depth"]
    view = build_view(snaps[0])
    parts = [r for r in stat_rows(view, "orders", None) if r["scope"] == "partition"]
    assert [p["partition"] for p in parts] == [0, 1]
    for p in parts:
        assert p["isr"] == [p["leader"], *p["replicas"]] and len(p["replicas"]) == 1
        assert p["catchup"] == [] and p["write_enabled"] and p["stored_bytes"] > 0
    # no TOPIC: no ISR (t0 first: a poller's first poll also asks each topic's meta)
    _, all_topics = await play_back(DATA / "redesign_manifest.json", ["t0", "t1"])
    unfocused = [r for r in stat_rows(build_view(all_topics), None, None) if "isr" in r]
    assert unfocused and all(r["isr"] is None and r["leader"] for r in unfocused)


async def test_stat_json_on_a_replicated_redesign_topic(
    redesign_cluster: Cluster, tmp_path: Path
) -> None:
    c = redesign_cluster
    topic = f"st_{uuid.uuid4().hex[:10]}"
    await asyncio.to_thread(admin.create_topic, c.lookupd_http, topic, partitions=1, replicas=2)
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        await producer.publish_many(topic, [b"m" * 100] * 5)
    code, out, err = await nsqctl(
        "stat",
        topic,
        "--lookupd",
        c.lookupd_http[0],
        "--json",
        "--count",
        "1",
        env=_clean_env(tmp_path),
    )
    assert code == 0, err
    [part] = [r for r in json.loads(out)["rows"] if r["scope"] == "partition"]
    assert part["leader"] in c.nsqd_http and part["replicas"] == [
        a for a in c.nsqd_http if a != part["leader"]
    ]
    assert sorted(part["isr"]) == sorted(c.nsqd_http)  # replicas 2 on 2 nsqd: both in sync
    assert part["messages"] == 5 and part["stored_bytes"] > 5 * 100  # bytes, not messages


async def test_stat_without_arguments_shows_channels_under_topics_and_marks_state(
    any_cluster: Cluster, tmp_path: Path
) -> None:
    """Every topic's channels are listed under it, and a paused channel (and on the redesign
    a skipped one) says so in the text table, not only in --json."""
    c = any_cluster
    redesign = c.flavor == "redesign"
    topic = f"st_{uuid.uuid4().hex[:10]}"
    env = _clean_env(tmp_path)
    where = ("--lookupd", c.lookupd_http[0])
    # located through lookupd on the redesign, through the nsqds' /stats on the original
    # (whose nsqds register a new topic with lookupd a moment later)
    lookupds, nsqds = (c.lookupd_http, ()) if redesign else ((), c.nsqd_http)
    (
        await admin.create_topic_async(c.lookupd_http, topic, nsqd_http=c.nsqd_http)
    ).raise_for_failures()
    steps = [("create", "a"), ("create", "b"), ("pause", "b")]
    steps += [("skip", "a")] if redesign else []
    for action, channel in steps:
        placement, stages = await admin.prepare(
            "channel", topic, lookupds, nsqds, action=action, channel=channel
        )
        report = await admin.run_plan(f"channel {action}", placement, stages, channel=channel)
        report.raise_for_failures()
    code, out, err = await nsqctl("stat", *where, "--count", "1", env=env)
    assert code == 0, err
    lines = out.splitlines()
    mine = [line.split()[1:] for line in lines[1:] if line.split()[1].startswith(topic)]
    named = {fields[0]: fields for fields in mine}
    order = [name for name in named if "#" not in name]
    assert order == [topic, f"{topic}/a", f"{topic}/b"]  # channels under their topic
    assert lines[0].split()[-1] == "state"
    assert named[f"{topic}/b"][-1] == "PAUSED"
    assert named[f"{topic}/a"][-1] == ("SKIPPED" if redesign else "-")  # msg/s, no marker
    assert named[topic][-1] != "PAUSED"
