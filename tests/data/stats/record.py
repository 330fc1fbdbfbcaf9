"""Record the redesign ``redesign_*.json`` fixtures from a live youzan cluster.

    python -m tests.data.stats.record [--out tests/data/stats] [--port-base 24700]

Starts its own redesign cluster (etcd, 1 nsqlookupd, 4 nsqd on 127.0.0.1, built like
``nsqctl sandbox``), sets up the scenario described in ``README.md`` here, then records
three polls of a real :class:`StatsPoller` through a recording transport, so the files
hold exactly the requests the poller makes and the answers it got: ``t0`` and ``t1`` two
seconds apart with every topic in focus, and ``t1_orders_billing`` as ``nsqctl stat
orders billing`` asks. Everything it started is stopped by PID at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from nsqctl.connection import ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message
from nsqctl.producer import Producer
from nsqctl.servers import build, cluster
from nsqctl.stats.poller import StatsPoller
from nsqctl.stats.recording import RecordingTransport, write_recording
from tests.helpers.wait import eventually

HERE = Path(__file__).resolve().parent
NSQD = 4
TOPICS = {
    "orders": ("--partitions", "2", "--replicas", "2"),
    "events": ("--partitions", "2", "--replicas", "2", "--ordered"),
}
CHANNELS = {"orders": ("audit", "billing", "slow"), "events": ("tail",)}


def nsqctl(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed CLI, as an operator would set the scenario up."""
    return subprocess.run(
        [sys.executable, "-c", "from nsqctl.cli.app import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def wait_writable(lookupd: str, topic: str, partitions: int, limit: float = 240.0) -> None:
    """nsqlookupd enables writes on its topic check, which can lag up to two minutes."""

    def writable() -> bool:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            resp = httpx.get(f"http://{lookupd}/lookup", params={"topic": topic, "access": "w"})
            data = resp.json()
            data = data.get("data", data)
            if len(data.get("partitions") or {}) == partitions:
                return True
        print(f"  waiting for {topic}'s partitions to become writable", file=sys.stderr)
        return False

    try:
        eventually(writable, limit, f"{topic}'s partitions to become writable", step=5)
    except AssertionError:
        raise SystemExit(f"{topic}: partitions not writable after {limit:.0f}s") from None


def set_up(c: cluster.Cluster) -> None:
    lookupd = c.lookupd_http[0]
    for topic, opts in TOPICS.items():
        done = nsqctl("topic", "create", topic, *opts, "--lookupd", lookupd)
        if done.returncode != 0:
            raise SystemExit(f"topic create {topic} failed: {done.stderr.strip()}")
        wait_writable(lookupd, topic, 2)
        for channel in CHANNELS[topic]:
            done = nsqctl("channel", "create", topic, channel, "--lookupd", lookupd)
            if done.returncode != 0:
                raise SystemExit(f"channel create {topic}/{channel}: {done.stderr.strip()}")
    done = nsqctl("channel", "pause", "orders", "audit", "--lookupd", lookupd, "--yes")
    if done.returncode != 0:
        raise SystemExit(f"channel pause orders/audit: {done.stderr.strip()}")


async def publish_forever(lookupd: str, topic: str, per_second: int) -> None:
    """Steady traffic on both partitions so t0 → t1 rates are not zero."""
    async with Producer(lookupd_http=[lookupd]) as producer:
        n = 0
        while True:
            for partition in (0, 1):
                body = f'{{"topic": "{topic}", "n": {n}, "pad": "{"x" * 60}"}}'.encode()
                await producer.publish(topic, body, partition=partition)
                n += 1
            await asyncio.sleep(2 / per_second)


async def poll(
    transport: RecordingTransport, name: str, poller: StatsPoller, settings: dict[str, Any]
) -> dict[str, Any]:
    transport.exchanges = []
    snap = await poller.snapshot()
    return {
        "name": name,
        "taken_at": round(snap.taken_at, 3),
        **settings,
        "elapsed": {n.address: round(n.elapsed, 4) for n in snap.nodes},
        "exchanges": list(transport.exchanges),
    }


async def record(c: cluster.Cluster, bins: Path, out: Path) -> list[Path]:
    lookupd = c.lookupd_http[0]

    release = asyncio.Event()

    async def slow(msg: Message) -> None:
        await asyncio.sleep(0.5)  # holds what it is given: in flight, starved

    async def hold(msg: Message) -> None:
        await release.wait()  # past its 1 s msg_timeout: nsqd times it out

    billing = Consumer(
        "orders", "billing", slow, lookupd_http=[lookupd], options=ConsumerOptions(max_in_flight=4)
    )
    # one RDY over two partitions: one connection gets it, the other sits at RDY 0
    stuck = Consumer(
        "orders",
        "slow",
        hold,
        lookupd_http=[lookupd],
        options=ConsumerOptions(max_in_flight=1),
        config=ConnectionConfig(msg_timeout_ms=1000, compression="snappy"),
    )
    tail = subprocess.Popen(
        [
            str(bins / "nsq_tail"),
            "-lookupd-http-address",
            lookupd,
            "-topic",
            "events",
            "-channel",
            "tail",
            "-ordered",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    publishers = [
        asyncio.create_task(publish_forever(lookupd, "orders", 20)),
        asyncio.create_task(publish_forever(lookupd, "events", 10)),
    ]
    await billing.start()
    await stuck.start()
    try:
        await asyncio.sleep(6)  # consumers connected on every partition, counters moving
        polls = []
        transport = RecordingTransport()
        settings: dict[str, Any] = {
            "lookupd_http": [lookupd],
            "nsqd_http": [],
            "topic": None,
            "channel": None,
        }
        async with StatsPoller(
            [lookupd],
            focus=None,
            transport=transport,
        ) as poller:
            polls.append(await poll(transport, "t0", poller, settings))
            await asyncio.sleep(2)
            polls.append(await poll(transport, "t1", poller, settings))
        narrow = RecordingTransport()
        settings = {**settings, "topic": "orders", "channel": "billing"}
        async with StatsPoller(
            [lookupd],
            topic="orders",
            channel="billing",
            transport=narrow,
        ) as poller:
            polls.append(await poll(narrow, "t1_orders_billing", poller, settings))
    finally:
        for task in publishers:
            task.cancel()
        await asyncio.gather(*publishers, return_exceptions=True)
        release.set()
        await billing.stop(timeout=5)
        await stuck.stop(timeout=5)
        tail.terminate()
        tail.wait(10)
    names = {lookupd: "lookupd"}
    names.update({addr: f"nsqd_{'abcd'[i]}" for i, addr in enumerate(c.nsqd_http)})
    version = polls[0]["exchanges"]
    meta = {
        "recorded_with": "tests/data/stats/record.py",
        "server": _server_version(version),
        "cluster": f"etcd + 1 nsqlookupd + {NSQD} nsqd on 127.0.0.1",
        "names": names,
    }
    return write_recording(out / "redesign_manifest.json", polls, names, meta)


def _server_version(exchanges: list[Any]) -> str:
    for ex in exchanges:
        if "/stats" in ex.url and ex.status == 200:
            return str(httpx.Response(200, content=ex.body).json().get("version", ""))
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--port-base", type=int, default=None)
    args = parser.parse_args()
    bins = build.build("redesign")
    with tempfile.TemporaryDirectory(prefix="nsqctl-record-") as tmp:
        c = cluster.start(
            "redesign", Path(tmp), nsqd=NSQD, lookupd=1, bin_dir=bins, port_base=args.port_base
        )
        try:
            set_up(c)
            written = asyncio.run(record(c, bins, args.out))
        finally:
            c.stop()
    for path in written:
        print(os.path.relpath(path))


if __name__ == "__main__":
    main()
