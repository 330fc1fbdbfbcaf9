"""CPU cost of the stats model per refresh, and dashboard key latency while polling.

    python bench/bench_stats_model.py

1. A synthetic redesign ``/stats`` body with 1,000 partitions (10 topics × 100) × 4 channels
   × 5 clients: JSON decode + parse + view (rates against the previous poll, history) —
   CPU time per refresh, target < 200 ms.
2. The Textual app polling that payload continuously (each refresh decodes, parses and
   builds the view, as the live session does): how long a key press takes to be handled,
   on the topics list and on a channel screen listing 500 client connections; target
   < 100 ms.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from textual.widgets import DataTable  # noqa: E402

from nsqctl.stats.history import History  # noqa: E402
from nsqctl.stats.model import ClusterSnapshot  # noqa: E402
from nsqctl.stats.parse import parse_nsqd_stats  # noqa: E402
from nsqctl.stats.view import ClusterView, build_view  # noqa: E402
from tui.app import DashApp  # noqa: E402

TOPICS, PARTS, CHANNELS, CLIENTS = 10, 100, 4, 5
NODE = "127.0.0.1:4151"


def synthetic_payload(step: int) -> bytes:
    """One nsqd answering for every partition (as leader); counters advance with ``step``."""
    topics: list[dict[str, Any]] = []
    for t in range(TOPICS):
        for p in range(PARTS):
            channels = []
            for c in range(CHANNELS):
                clients = [
                    {
                        "client_id": f"c{t}-{p}-{c}-{k}", "hostname": "worker",
                        "remote_address": f"10.0.{c}.{k}:{40000 + p}", "version": "V2",
                        "state": 3, "ready_count": 10, "in_flight_count": (k * 3 + step) % 11,
                        "message_count": 1000 + step * 7, "finish_count": 990 + step * 7,
                        "requeue_count": k, "timeout_count": step // 3, "deferred_count": 0,
                        "connect_ts": 1700000000, "sample_rate": 0, "deflate": False,
                        "snappy": k == 0, "user_agent": "go-nsq/1.0.8", "tls": False,
                    }
                    for k in range(CLIENTS)
                ]
                channels.append({
                    "channel_name": f"ch{c}", "depth": 100 + step * c, "backend_depth": 0,
                    "in_flight_count": 20, "deferred_count": 1, "message_count": 5000 + 35 * step,
                    "requeue_count": 10, "timeout_count": step, "clients": clients,
                    "paused": False, "skipped": False,
                })
            topics.append({
                "topic_name": f"topic{t}", "topic_partition": str(p), "channels": channels,
                "depth": 1 << 20, "backend_depth": 1 << 20, "message_count": 5000 + 35 * step,
                "is_leader": True, "is_multi_ordered": False, "is_ext": t == 0,
            })
    body = {"version": "0.3.7-HA.1.13.0", "health": "OK", "start_time": 1700000000,
            "topics": topics}  # fmt: skip
    return json.dumps(body).encode()


def process(body: bytes, fetched_at: float) -> ClusterSnapshot:
    node = parse_nsqd_stats(json.loads(body), NODE, fetched_at=fetched_at)
    return ClusterSnapshot(taken_at=1700000100.0 + fetched_at, nodes=(node,))


def bench_cpu(bodies: list[bytes], rounds: int = 10) -> list[float]:
    history = History()
    previous = process(bodies[0], 0.0)
    build_view(previous, None, history)
    samples = []
    for i in range(rounds):
        body = bodies[(i + 1) % len(bodies)]
        start = time.process_time()
        snap = process(body, 2.0 * (i + 1))
        build_view(snap, previous, history)
        samples.append((time.process_time() - start) * 1000)
        previous = snap
    return samples


class SyntheticPolling:
    """A live-like source: every refresh does the full decode/parse/view work in a thread."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = bodies
        self.history = History()
        self.previous: ClusterSnapshot | None = None
        self.n = 0

    async def refresh(self) -> ClusterView:
        self.n += 1
        body = self.bodies[self.n % len(self.bodies)]

        def work() -> ClusterView:
            snap = process(body, 2.0 * self.n)
            view = build_view(snap, self.previous, self.history)
            self.previous = snap
            return view

        return await asyncio.to_thread(work)

    async def aclose(self) -> None:
        return None


async def key_latencies(app: DashApp, table_id: str, presses: int) -> list[float]:
    out = []
    async with app.run_test(size=(200, 50)) as pilot:
        while app.polls < 2:
            await pilot.pause(0.05)
        if table_id == "clients":
            await pilot.press("enter", "enter")  # topic0 → ch0: 100 partitions × 5 clients
            while app.screen.query("#clients") and (
                app.screen.query_one("#clients", DataTable).row_count == 0
            ):
                await pilot.pause(0.05)
        table = app.screen.query_one(f"#{table_id}", DataTable)
        polls_before = app.polls
        for i in range(presses):
            key = "down" if i % 2 == 0 else "up"
            expected = table.cursor_row + (1 if key == "down" else -1)
            start = time.perf_counter()
            await pilot.press(key)
            while table.cursor_row != expected:
                await asyncio.sleep(0.0005)
            out.append((time.perf_counter() - start) * 1000)
            await asyncio.sleep(0.03)  # spread presses over several polls
        polled = app.polls - polls_before
    print(f"  ({polled} refreshes of the view happened during the {presses} presses)")
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
    bodies = [synthetic_payload(s) for s in range(3)]
    total_clients = TOPICS * PARTS * CHANNELS * CLIENTS
    print(
        f"payload: {TOPICS * PARTS} partitions × {CHANNELS} channels × {CLIENTS} clients "
        f"= {total_clients:,} client rows, {len(bodies[0]) / 1e6:.1f} MB JSON"
    )
    summary("model CPU per refresh (decode+parse+view)", bench_cpu(bodies), 200)
    for interval in (2.0, 0.5):
        print(f"UI: key presses while polling every {interval} s")
        app = DashApp(SyntheticPolling(bodies), interval=interval)
        summary("key → handled, topics list", asyncio.run(key_latencies(app, "topics", 40)), 100)
        app = DashApp(SyntheticPolling(bodies), interval=interval)
        ms = asyncio.run(key_latencies(app, "clients", 40))
        summary("key → handled, channel screen (500 clients)", ms, 100)


if __name__ == "__main__":
    main()
