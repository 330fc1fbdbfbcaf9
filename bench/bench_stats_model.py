"""CPU cost of the stats model per refresh, and dashboard key latency while polling.

    python -m bench.bench_stats_model [--partitions N] [--channels N] [--clients N] [--cpu-only]

1. A synthetic redesign ``/stats`` body with 1,000 partitions (10 topics × 100, or
   ``--partitions``) × 4 channels × 5 clients, run through the live refresh path: the
   poller's decode + parse (:func:`parse_nsqd_body`), the session's :func:`build_view`
   (rates against the previous poll, history), what the screen reads of the view and the
   per-node summary (the node screen) — ``time.process_time`` per refresh, target
   < 200 ms at 1,000 partitions and < 500 ms at 10,000. Every client listed, with the
   collector as it is (``nsqctl stat``), and then as the dashboard runs it (each refresh's
   survivors frozen, :func:`freeze_after_bursts`) on each kind of screen: the hot-spots
   screen polls every client and ranks every channel; every other screen polls the node
   without clients plus, on the topic screen, the open topic with its clients (its
   channels' RDY), on the channel screen the open channel with its clients (their client
   views built). Those bodies are derived from the same synthetic data as nsqd answers
   them (``"clients": null`` with the count kept in ``client_num``; the topic, or its
   channel, alone with the clients listed). The hot-spots refresh is also given by stage
   (decode, the rest of the parse, the view, the ranking). The hot-client ranking (every
   connection parsed; built only while that screen shows it) is timed apart.
2. The Textual app polling that payload through the real :class:`StatsSession` (each refresh
   decodes/parses and builds the view in worker threads, then the screen updates): how long
   a key press takes to be handled (the key event reaches the app until the table cursor has
   moved), on the topics list and on a channel screen listing 500 client connections; target
   < 100 ms. The stand-in poller answers what the app asks for (no clients but the open
   topic's, every client on the hot-spots screen). Every fourth press is sent just as a
   refresh starts (with a varying offset) so the worst case is hit rather than left to
   chance; ``pilot.press`` is not used to time, since it also waits for the whole process
   to go idle (up to a second per call).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from textual import events

from nsqctl.stats import wire
from nsqctl.stats.gcpause import freeze_after_bursts, gc_paused
from nsqctl.stats.history import History
from nsqctl.stats.hotspots import rank_channels, rank_clients
from nsqctl.stats.model import ClusterSnapshot
from nsqctl.stats.node_totals import node_summaries
from nsqctl.stats.parse import parse_nsqd_body
from nsqctl.stats.read import ClientScope
from nsqctl.stats.sources import StatsSession
from nsqctl.stats.view import build_view
from nsqctl.tui.app import DashApp
from nsqctl.tui.rowtable import RowTable
from tests.helpers.nsqd_answers import narrowed, without_clients

TOPICS, PARTS, CHANNELS, CLIENTS = 10, 100, 4, 5
"""Overridden by the command line (``--partitions`` is spread over the 10 topics)."""
NODE = "127.0.0.1:4151"
OPEN_TOPIC, OPEN_CHANNEL = "topic0", "ch0"
"""What the dashboard has open: the first topic of the list and its first channel."""


def synthetic_stats(step: int) -> dict[str, Any]:
    """One nsqd answering for every partition (as leader), every client listed, as
    ``/stats?needClients=true``; counters advance with ``step``."""
    topics: list[dict[str, Any]] = []
    for t in range(TOPICS):
        for p in range(PARTS):
            channels = []
            for c in range(CHANNELS):
                clients = [
                    {
                        "client_id": f"c{t}-{p}-{c}-{k}",
                        "hostname": "worker",
                        "remote_address": f"10.0.{c}.{k}:{40000 + p}",
                        "version": "V2",
                        "state": 3,
                        "ready_count": 10,
                        "in_flight_count": (k * 3 + step) % 11,
                        "message_count": 1000 + step * 7,
                        "finish_count": 990 + step * 7,
                        "requeue_count": k,
                        "timeout_count": step // 3,
                        "deferred_count": 0,
                        "connect_ts": 1700000000,
                        "sample_rate": 0,
                        "deflate": False,
                        "snappy": k == 0,
                        "user_agent": "go-nsq/1.0.8",
                        "tls": False,
                    }
                    for k in range(CLIENTS)
                ]
                channels.append(
                    {
                        "channel_name": f"ch{c}",
                        "depth": 100 + step * c,
                        "backend_depth": 0,
                        "in_flight_count": 20,
                        "deferred_count": 1,
                        "message_count": 5000 + 35 * step,
                        "requeue_count": 10,
                        "timeout_count": step,
                        "clients": clients,
                        "client_num": len(clients),
                        "paused": False,
                        "skipped": False,
                    }
                )
            topics.append(
                {
                    "topic_name": f"topic{t}",
                    "topic_partition": str(p),
                    "channels": channels,
                    "depth": 1 << 20,
                    "backend_depth": 1 << 20,
                    "message_count": 5000 + 35 * step,
                    "is_leader": True,
                    "is_multi_ordered": False,
                    "is_ext": t == 0,
                }
            )
    return {
        "version": "0.3.7-HA.1.13.0",
        "health": "OK",
        "start_time": 1700000000,
        "topics": topics,
    }


@dataclass(frozen=True)
class Poll:
    """One poll's bodies: every client listed, none, and the open topic's and open
    channel's alone (what the topic and the channel screen ask for besides)."""

    full: bytes
    lean: bytes
    open_topic: bytes
    open_channel: bytes


def synthetic_poll(step: int) -> Poll:
    body = synthetic_stats(step)
    return Poll(
        full=json.dumps(body).encode(),
        lean=json.dumps(without_clients(body)).encode(),
        open_topic=json.dumps(narrowed(body, OPEN_TOPIC)).encode(),
        open_channel=json.dumps(narrowed(body, OPEN_TOPIC, OPEN_CHANNEL)).encode(),
    )


Screen = Literal["hot spots", "topic", "channel"]
"""Which screen the dashboard shows, so what it polls: every client (the hot-spots screen),
or none but the open topic's or the open channel's."""


def snapshot(poll: Poll, fetched_at: float, screen: Screen = "hot spots") -> ClusterSnapshot:
    """What the poller makes of one poll for ``screen``."""
    if screen == "hot spots":
        node = parse_nsqd_body(poll.full, NODE, fetched_at=fetched_at)
    else:
        detail = poll.open_topic if screen == "topic" else poll.open_channel
        node = parse_nsqd_body(poll.lean, NODE, fetched_at=fetched_at, details=[detail])
    return ClusterSnapshot(taken_at=1700000100.0 + fetched_at, nodes=(node,))


def bench_cpu(
    polls: list[Poll],
    rounds: int = 15,
    hot_share: list[float] | None = None,
    screen: Screen = "hot spots",
) -> list[float]:
    """Model CPU per refresh of ``screen``: parse, view, then what the screen reads of it
    (and the node totals); ``hot_share`` collects the part spent on hot spots + nodes.

    The hot-spots screen ranks every channel; the channel screen reads the open channel's
    client views; the topic screen its channels (in the view already)."""
    history = History()
    previous = snapshot(polls[0], 0.0, screen)
    build_view(previous, None, history)
    samples = []
    for i in range(rounds):
        poll = polls[(i + 1) % len(polls)]
        start = time.process_time()
        snap = snapshot(poll, 2.0 * (i + 1), screen)
        view = build_view(snap, previous, history)
        topic = view.topic(OPEN_TOPIC)
        channel = topic.channel(OPEN_CHANNEL) if topic else None
        assert channel is not None and channel.ready == PARTS * CLIENTS * 10
        assert channel.client_count == PARTS * CLIENTS
        if screen == "channel":  # the only screen that reads the connections themselves
            assert len(channel.clients) == PARTS * CLIENTS
        elif screen == "hot spots":  # every connection listed (counted, not parsed)
            assert sum(len(p.stats.clients) for p in channel.parts) == PARTS * CLIENTS
        hot_start = time.process_time()
        if screen == "hot spots":
            assert len(rank_channels(view, "requeue")) == TOPICS * CHANNELS
        assert len(node_summaries(view)) == 1
        end = time.process_time()
        samples.append((end - start) * 1000)
        if hot_share is not None:
            hot_share.append((end - hot_start) * 1000)
        previous = snap
    if screen != "hot spots":  # the other topics: their clients counted, not listed
        other = view.topic(f"topic{TOPICS - 1}")
        assert other is not None and not other.clients_listed
        assert all(c.client_count == PARTS * CLIENTS for c in other.channels)
    return samples


def bench_stages(polls: list[Poll], rounds: int = 9) -> dict[str, list[float]]:
    """The hot-spots refresh in its stages, CPU ms each: the body's decode alone (msgspec),
    the rest of the parse, the view (history on), the channel ranking with the node
    totals. The decode is timed apart on the same body, then subtracted from the parse."""
    history = History()
    previous = snapshot(polls[0], 0.0)
    build_view(previous, None, history)
    stages: dict[str, list[float]] = {"decode": [], "parse rest": [], "view": [], "rank": []}
    for i in range(rounds):
        poll = polls[(i + 1) % len(polls)]
        with gc_paused():
            start = time.process_time()
            wire.NSQD_STATS.decode(poll.full)
            decoded = time.process_time()
        snap = snapshot(poll, 2.0 * (i + 1))
        parsed = time.process_time()
        view = build_view(snap, previous, history)
        viewed = time.process_time()
        rank_channels(view, "requeue")
        node_summaries(view)
        end = time.process_time()
        stages["decode"].append((decoded - start) * 1000)
        stages["parse rest"].append((parsed - decoded - (decoded - start)) * 1000)
        stages["view"].append((viewed - parsed) * 1000)
        stages["rank"].append((end - viewed) * 1000)
        previous = snap
    return stages


def bench_hot_clients(polls: list[Poll], rounds: int = 3) -> list[float]:
    """The hot-clients ranking alone, on a view whose clients were not parsed yet."""
    previous = snapshot(polls[0], 0.0)
    samples = []
    for i in range(rounds):
        snap = snapshot(polls[(i + 1) % len(polls)], 2.0 * (i + 1))
        view = build_view(snap, previous, History())
        start = time.process_time()
        ranked = rank_clients(view, "requeue", 200)
        samples.append((time.process_time() - start) * 1000)
        assert len(ranked) == min(200, TOPICS * PARTS * CHANNELS * CLIENTS)
        previous = snap
    return samples


class SyntheticPoller:
    """Stands in for :class:`StatsPoller`: the same threaded decode+parse, no HTTP, and the
    same requests as the app asks for (:meth:`set_clients`): every client, or none but the
    open topic's.

    ``busy`` records each refresh's span (work start → view applied) to tell which key
    presses overlapped one; ``started`` is set when a refresh begins.
    """

    def __init__(self, polls: list[Poll]) -> None:
        self.polls = polls
        self.n = 0
        self.clients: frozenset[ClientScope] | None = None
        self.started = asyncio.Event()
        self.busy: list[list[float]] = []

    def set_clients(self, scopes: Collection[ClientScope] | None) -> None:
        self.clients = None if scopes is None else frozenset(scopes)
        opened = {OPEN_TOPIC, (OPEN_TOPIC, OPEN_CHANNEL)}
        assert self.clients is None or self.clients <= opened, self.clients

    async def snapshot(self) -> ClusterSnapshot:
        self.n += 1
        self.busy.append([time.perf_counter(), float("inf")])
        self.started.set()
        poll = self.polls[self.n % len(self.polls)]
        body, details = poll.full, []
        if self.clients is not None:
            body = poll.lean
            details = [
                poll.open_topic if s == OPEN_TOPIC else poll.open_channel for s in self.clients
            ]
        node = await asyncio.to_thread(
            parse_nsqd_body, body, NODE, fetched_at=2.0 * self.n, details=details
        )
        return ClusterSnapshot(taken_at=1700000100.0 + 2.0 * self.n, nodes=(node,))

    async def aclose(self) -> None:
        return None


class BenchApp(DashApp):
    """Marks when each refresh's view has been applied to the screen."""

    poller: SyntheticPoller

    def apply_view(self, view: Any) -> None:
        super().apply_view(view)
        if self.poller.busy:
            self.poller.busy[-1][1] = time.perf_counter()


def make_app(polls: list[Poll], interval: float) -> BenchApp:
    poller = SyntheticPoller(polls)
    app = BenchApp(StatsSession(poller), interval=interval)
    app.poller = poller
    return app


async def timed_press(app: DashApp, table: RowTable, key: str) -> tuple[float, float]:
    """Send ``key`` as the terminal driver would; wait until the table's cursor moved."""
    expected = table.cursor_row + (1 if key == "down" else -1)
    driver = app._driver
    assert driver is not None
    start = time.perf_counter()
    driver.send_message(events.Key(key, None))
    while table.cursor_row != expected:
        await asyncio.sleep(0.0005)
    return start, time.perf_counter()


async def key_latencies(app: BenchApp, table_id: str, presses: int) -> list[float]:
    out = []
    overlapped = 0
    async with app.run_test(size=(200, 50)) as pilot:
        while app.polls < 2:
            await pilot.pause(0.05)
        if table_id == "clients":
            await pilot.press("enter", "enter")  # topic0 → ch0: 100 partitions × 5 clients
            while app.screen.query("#clients") and (
                app.screen.query_one("#clients", RowTable).row_count == 0
            ):
                await pilot.pause(0.05)
        table = app.screen.query_one(f"#{table_id}", RowTable)
        await pilot.pause(0.2)
        polls_before = app.polls
        for i in range(presses):
            if i % 4 == 0:  # right as a refresh starts, 0-250 ms into it
                app.poller.started.clear()
                await app.poller.started.wait()
                await asyncio.sleep((i * 37 % 250) / 1000)
            else:
                await asyncio.sleep(0.03)
            start, end = await timed_press(app, table, "down" if i % 2 == 0 else "up")
            out.append((end - start) * 1000)
            overlapped += any(a < end and start < b for a, b in app.poller.busy)
        polled = app.polls - polls_before
    print(
        f"  ({polled} refreshes of the view happened during the {presses} presses; "
        f"{overlapped} presses overlapped a refresh)"
    )
    return out


def summary(name: str, ms: list[float], target: float) -> None:
    q = statistics.quantiles(ms, n=20) if len(ms) >= 2 else ms
    p95 = q[-1]
    verdict = "OK" if max(ms) < target else "OVER TARGET"
    print(
        f"{name:<44} median {statistics.median(ms):7.1f} ms  p95 {p95:7.1f} ms  "
        f"max {max(ms):7.1f} ms  (target < {target:.0f} ms: {verdict})"
    )


def main() -> None:
    global PARTS, CHANNELS, CLIENTS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=TOPICS * PARTS, help="over 10 topics")
    parser.add_argument("--channels", type=int, default=CHANNELS, help="per partition")
    parser.add_argument("--clients", type=int, default=CLIENTS, help="per channel partition")
    parser.add_argument("--cpu-only", action="store_true", help="skip the key-latency runs")
    args = parser.parse_args()
    PARTS, CHANNELS, CLIENTS = max(1, args.partitions // TOPICS), args.channels, args.clients
    polls = [synthetic_poll(s) for s in range(3)]
    total_clients = TOPICS * PARTS * CHANNELS * CLIENTS
    target = 200 if TOPICS * PARTS <= 1000 else 500
    print(
        f"payload: {TOPICS * PARTS} partitions × {CHANNELS} channels × {CLIENTS} clients "
        f"= {total_clients:,} client rows, {len(polls[0].full) / 1e6:.1f} MB JSON; without "
        f"clients {len(polls[0].lean) / 1e6:.1f} MB; {OPEN_TOPIC} alone with its "
        f"{PARTS * CHANNELS * CLIENTS:,} clients {len(polls[0].open_topic) / 1e6:.1f} MB, "
        f"{OPEN_TOPIC}/{OPEN_CHANNEL} {len(polls[0].open_channel) / 1e6:.1f} MB"
    )
    hot_share: list[float] = []
    every = bench_cpu(polls, 15, hot_share)
    summary("model CPU per refresh, all clients, gc as is", every, target)
    summary("  of which hot spots + node totals", hot_share, target)
    freeze_after_bursts()  # what DashApp turns on: each refresh's survivors are frozen
    try:
        summary("as dash runs it: hot-spots screen", bench_cpu(polls), target)
        summary("as dash runs it: topic screen", bench_cpu(polls, screen="topic"), target)
        summary("as dash runs it: channel screen", bench_cpu(polls, screen="channel"), target)
        stages = bench_stages(polls)
    finally:
        freeze_after_bursts(0)
    print(
        "  hot-spots refresh by stage, median ms: "
        + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in stages.items())
    )
    summary("hot clients ranking (only while shown)", bench_hot_clients(polls), target)
    if args.cpu_only:
        return
    for interval in (2.0, 0.5):
        print(f"UI: key presses while polling every {interval} s")
        ms = asyncio.run(key_latencies(make_app(polls, interval), "topics", 40))
        summary("key → handled, topics list", ms, 100)
        ms = asyncio.run(key_latencies(make_app(polls, interval), "clients", 40))
        summary(f"key → handled, channel screen ({PARTS * CLIENTS} clients)", ms, 100)


if __name__ == "__main__":
    main()
