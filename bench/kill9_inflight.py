"""What a kill -9 of an original nsqd does to the messages it has handed to a consumer.

One nsqd (``--mem-queue-size=0``: every message on disk) per case; a consumer subscribes
with RDY above the count and answers nothing; 50 messages are published. Once the
channel's disk-queue metadata (``TOPIC:CHANNEL.diskqueue.meta.dat``) says every message
was read and nsqd saved that, the nsqd is killed with -9 and restarted, and a second
consumer takes whatever it delivers again. Each case counts: received by the consumer
before the kill, delivered again after the restart, in neither (lost).

    python -m bench.kill9_inflight            # every case, a table
    python -m bench.kill9_inflight --json

Cases: nsqd's default output buffering (250 ms) and the consumer asking for a long one
(30 s: the messages wait in nsqd's buffer, deterministically), each with nsqd's default
``--sync-every`` and with ``--sync-every=1``, an unbuffered consumer
(``output_buffer_size=-1``), and a SIGTERM instead of the kill -9. Exit 1 when a case's
outcome is not the one the Soak section of bench/README.md states.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from bench._common import channel_stats, create_channel, print_table, say, unique_topic
from nsqctl import Producer
from nsqctl.connection import ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message
from nsqctl.servers import build, cluster, process
from tests.helpers.soak_losses import read_meta, read_queue
from tests.helpers.wait import wait_for

COUNT = 50
# a disk-queue record: int32 size, int64 timestamp, uint16 attempts, 16-byte id, the body
RECORD_OVERHEAD = 30
CHANNEL = "held"


@dataclass(frozen=True)
class Case:
    name: str
    nsqd_args: tuple[str, ...]
    config: ConnectionConfig
    # kill only once the consumer holds every message (else as soon as nsqd saved that it
    # handed them all out)
    wait_received: bool
    # what the Soak section of bench/README.md states: some lost? some delivered again?
    expect_loss: bool
    expect_again: bool = False
    sigterm: bool = False  # stop nsqd cleanly instead of kill -9


LONG_BUFFER = ConnectionConfig(output_buffer_timeout_ms=30_000, output_buffer_size=65_536)
UNBUFFERED = ConnectionConfig(output_buffer_size=-1)
CASES = (
    Case(
        "default buffering, killed once the consumer has them", (), ConnectionConfig(), True, False
    ),
    Case("30 s output buffer", (), LONG_BUFFER, False, True),
    Case("30 s output buffer, --sync-every=1", ("--sync-every=1",), LONG_BUFFER, False, True),
    Case("unbuffered consumer", (), UNBUFFERED, False, False),
    Case("unbuffered consumer, --sync-every=1", ("--sync-every=1",), UNBUFFERED, False, False),
    Case("30 s output buffer, SIGTERM", (), LONG_BUFFER, False, False, True, True),
)


@dataclass
class Outcome:
    case: str
    published: int
    received_before_kill: int
    delivered_again: int
    lost: int
    meta_at_kill: str
    behind_saved_read: int  # in the channel's data file, behind the saved read position
    expect_loss: bool
    expect_again: bool

    @property
    def as_stated(self) -> bool:
        return (self.lost > 0) == self.expect_loss and (
            self.delivered_again > 0
        ) == self.expect_again


def all_read(meta_path: Path, size: int) -> bool:
    """The saved read and write positions are both at ``size`` bytes of the first file:
    every message was written to the channel's queue, handed out, and nsqd synced that."""
    meta = read_meta(meta_path)
    return meta is not None and meta.read == meta.write == (0, size)


async def run_case(case: Case, work: Path) -> Outcome:
    bins = build.build("original")
    c = cluster.start(
        "original",
        work,
        nsqd=1,
        bin_dir=bins,
        nsqd_args=["--mem-queue-size=0", *case.nsqd_args],
    )
    try:
        node = c.nsqds[0]
        topic = unique_topic("held")
        create_channel(node.http_address, topic, CHANNEL)
        meta_path = Path(node.data_dir) / f"{topic}:{CHANNEL}.diskqueue.meta.dat"
        received: set[bytes] = set()
        first = Consumer(
            topic,
            CHANNEL,
            nsqd_tcp=[node.tcp_address],
            config=case.config,
            options=ConsumerOptions(max_in_flight=COUNT * 2, reconnect_initial=60.0),
        )
        await first.start()

        async def hold() -> None:
            async for msg in first:  # held: never FINed
                received.add(msg.body)

        holder = asyncio.create_task(hold())
        bodies = [b"held-%d" % i for i in range(COUNT)]
        async with Producer(nsqd_tcp=[node.tcp_address]) as producer:
            await producer.publish_many(topic, bodies)
        size = sum(RECORD_OVERHEAD + len(b) for b in bodies)
        await wait_for(lambda: all_read(meta_path, size), 30, "the read position saved", 0.005)
        if case.wait_received:
            await wait_for(lambda: len(received) == COUNT, 10, "every message received")
        meta = meta_path.read_text().replace("\n", " ").strip()
        if case.sigterm:
            process.stop(node)
        else:
            process.kill_hard(node)
        # still in the channel's data file, behind the read position nsqd saved
        saved = read_meta(meta_path)
        queued = read_queue(Path(node.data_dir), f"{topic}:{CHANNEL}")
        behind = sum(
            1
            for b in bodies
            if b in queued and saved and (queued[b].file_num, queued[b].offset) < saved.read
        )
        # whatever reached the consumer's socket is read before it sees the connection end
        await wait_for(lambda: not first.connections, 10, "the consumer to see the kill", 0.02)
        at_kill = set(received)
        holder.cancel()
        await first.stop(timeout=1)
        await asyncio.to_thread(c.restart, node)
        again: set[bytes] = set()

        def take(msg: Message) -> None:
            again.add(msg.body)

        second = Consumer(topic, CHANNEL, take, nsqd_tcp=[node.tcp_address])
        await second.start()

        def caught_up() -> bool:
            st = channel_stats(node.http_address, topic, CHANNEL)
            return st is not None and st.depth == 0 and st.in_flight_count == 0

        await wait_for(caught_up, 30, "the restarted channel drained", 0.1)
        await second.stop()
        lost = len(set(bodies) - at_kill - again)
        return Outcome(
            case.name,
            COUNT,
            len(at_kill),
            len(again),
            lost,
            meta,
            behind,
            case.expect_loss,
            case.expect_again,
        )
    finally:
        c.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="nsqctl-kill9-") as tmp:
        for n, case in enumerate(CASES):
            say(f"case: {case.name}")
            outcomes.append(asyncio.run(run_case(case, Path(tmp) / str(n))))
    if args.json:
        print(json.dumps([asdict(o) for o in outcomes]))
    else:
        print_table(
            f"kill -9 of an original nsqd holding {COUNT} unanswered messages",
            [
                "case",
                "received before kill",
                "delivered again",
                "lost",
                "behind saved read",
                "meta at kill",
            ],
            [
                [
                    o.case,
                    str(o.received_before_kill),
                    str(o.delivered_again),
                    str(o.lost),
                    str(o.behind_saved_read),
                    o.meta_at_kill,
                ]
                for o in outcomes
            ],
        )
    wrong = [o for o in outcomes if not o.as_stated]
    for o in wrong:
        print(
            f"PROBLEM: {o.case}: {o.lost} lost, {o.delivered_again} delivered again; the "
            f"README says {'some' if o.expect_loss else 'none'} lost, "
            f"{'some' if o.expect_again else 'none'} delivered again"
        )
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
