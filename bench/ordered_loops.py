"""``tail --ordered``'s own path on one event loop, or on an event loop per partition.

A probe of a design, not a benchmark row: would ``tail --ordered`` gain from reading each
partition on an event loop of its own, on its own thread (a Consumer per partition, the
loops sharing the GIL)? It runs nsqctl's Consumer with tail's output (raw, to
``/dev/null``, each message written before its FIN) either as one Consumer on one loop
(what ``nsqctl tail --ordered`` does) or as one Consumer per partition, each on its own
thread and loop. Timed from the start to the ``--count``-th message; run it under
``perf stat`` for the CPU. Compare with ``ordered_floor.py`` (``--asyncio``, ``--loops``)
on the same channel setup: a fresh channel per run, filled after it was created.

    python -m bench.ordered_loops --lookupd 127.0.0.1:4161 --topic T --channel C --count N
    python -m bench.ordered_loops ... --each

Prints one JSON line: ``{"received": N, "seconds": S}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time

from bench.ordered_floor import channel_args, lookup_partitions
from nsqctl.cli.commands.tail import MessageFilter, TailOutput
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message


class Count:
    """Messages written over every partition; ``reached`` is set at the goal."""

    def __init__(self, want: int) -> None:
        self.want = want
        self.seen = 0
        self.lock = threading.Lock()
        self.reached = threading.Event()

    def add(self) -> None:
        with self.lock:
            self.seen += 1
            if self.seen >= self.want:
                self.reached.set()


async def consume(args: argparse.Namespace, partitions: list[int] | None, count: Count) -> None:
    with open(os.devnull, "wb") as out:
        output = TailOutput(out, "raw", False, 0, 1, MessageFilter())

        def handle(msg: Message) -> None:
            output.add(msg)
            count.add()

        consumer = Consumer(
            args.topic,
            args.channel,
            handle,
            lookupd_http=[args.lookupd],
            # max_in_flight: tail's default (an ordered channel keeps RDY 1 each)
            options=ConsumerOptions(ordered=True, partitions=partitions, max_in_flight=200),
        )
        output.intake_stopper = lambda: consumer.set_max_in_flight(0)
        await consumer.start()
        while not count.reached.is_set():
            await asyncio.sleep(0.02)
        output.close()
        await consumer.stop(timeout=5)


def main() -> int:
    ap = channel_args(__doc__.splitlines()[0])
    ap.add_argument("--each", action="store_true", help="a Consumer and loop per partition")
    args = ap.parse_args()
    parts = lookup_partitions(args.lookupd, args.topic)
    count = Count(args.count)
    groups: list[list[int] | None] = [[int(k)] for k in parts] if args.each else [None]
    threads = [
        threading.Thread(target=asyncio.run, args=(consume(args, group, count),))
        for group in groups
    ]
    started = time.perf_counter()
    for t in threads:
        t.start()
    reached = count.reached.wait(timeout=max(60.0, args.count / 1000))
    seconds = time.perf_counter() - started
    for t in threads:
        t.join()
    print(json.dumps({"received": count.seen, "seconds": seconds}))
    return 0 if reached else 1


if __name__ == "__main__":
    sys.exit(main())
