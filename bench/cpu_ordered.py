"""CPU per message of ``nsqctl tail --ordered``'s path alone, without nsqd: a profile tool.

On an ordered channel youzan's nsqd sends a partition's next message only after the FIN
of the last, so every read is one message and the client's time per message adds to the
round trip directly. This feeds pre-encoded ordered MESSAGE frames of two partitions, one
frame per read and the partitions taking turns (as nsqd sends them), through
``SocketProtocol.data_received`` (:mod:`inproc`) into a ``Consumer(ordered=True)`` whose
handler is tail's own output (raw format, to ``/dev/null``, flushed per message with its
FIN after the write), and the FINs into a transport that counts them. What it measures:
read callback -> frame decode -> Message -> order check -> output write -> FIN -> RDY
bookkeeping, all the client does per message but the socket syscalls and loop polling.

    python -m bench.cpu_ordered                 # CPU µs per message, 3 repeats
    python -m bench.cpu_ordered --profile 30    # and a cProfile of one run, top 30
    python -m bench.cpu_ordered --plain 50      # plain tail instead: 50 messages a read
    python -m bench.cpu_ordered --lanes         # the path tail --ordered takes now
    python -m bench.cpu_ordered --lanes --pipe  # its lines into a pipe (``| cat``)

``--lanes``: the same frames through :class:`nsqctl.consumer.lanes.PartitionLane`, a
thread per partition on one end of a socket pair, tail's ``write_lane`` to ``/dev/null``;
a child process on the other ends sends each partition's next frame once the last one's
FIN came (as nsqd does). This process's CPU per message: poll, recv, decode, order check,
line, FIN, with the syscalls this time (the child's are not counted); and the wall time
of a round trip (a partition's messages over the run's time: the child's turn and the
lane's, the part of an ordered stream's round trip that is not the network and nsqd).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import pstats
import resource
import selectors
import socket
import statistics
import subprocess
import time
from types import SimpleNamespace
from typing import Any, BinaryIO, cast

from bench.inproc import attach
from nsqctl.cli.commands.tail import MessageFilter, TailOutput
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.consumer.lanes import PartitionLane
from nsqctl.consumer.order import OrderChecker
from nsqctl.protocol.frames import encode_frame
from nsqctl.protocol.raw_message import MessageLayout, RawMessage, encode_message

LAYOUT = MessageLayout(family="redesign", ordered=True)
PLAIN = MessageLayout(family="redesign")
PARTITIONS = (0, 1)
ADDRESSES = ("127.0.0.1:9", "127.0.0.1:10")


def frames(count: int, size: int, partition: int, layout: MessageLayout) -> list[bytes]:
    """``count`` frames of one partition, consecutive disk-queue offsets."""
    body = b"y" * size
    disk_size = size + 30
    return [
        encode_frame(
            2,
            encode_message(
                RawMessage(
                    1_700_000_000_000_000_000,
                    1,
                    b"",
                    body,
                    internal_id=i + 1,
                    trace_id=partition,
                    offset=i * disk_size,
                    size=disk_size,
                ),
                layout,
            ),
        )
        for i in range(count)
    ]


async def run(
    per_partition: list[list[bytes]], per_read: int, profile: cProfile.Profile | None
) -> float:
    """CPU seconds per message of one pass over the frames (``per_read`` 1: ordered)."""
    ordered = per_read == 1
    with open(os.devnull, "wb") as out:
        output = TailOutput(out, "raw", False, 0, 1 if ordered else 200, MessageFilter())
        consumer = Consumer(
            "t",
            "c",
            output.add,
            nsqd_tcp=list(ADDRESSES),
            options=ConsumerOptions(ordered=ordered, max_in_flight=200),
        )
        output.intake_stopper = lambda: consumer.set_max_in_flight(0)
        socks = []
        for address, partition in zip(ADDRESSES, PARTITIONS, strict=True):
            layout = LAYOUT if ordered else PLAIN
            sock, transport, _conn = attach(consumer, address, partition, layout)
            socks.append((sock, transport))
        (sock0, t0), (sock1, t1) = socks
        first, second = (
            [b"".join(f[i : i + per_read]) for i in range(0, len(f), per_read)]
            for f in per_partition
        )
        if profile is not None:
            profile.enable()
        start = time.process_time()
        for a, b in zip(first, second, strict=True):
            sock0.data_received(a)
            sock1.data_received(b)
            await asyncio.sleep(0)  # the loop's turn between reads
        seconds = time.process_time() - start
        if profile is not None:
            profile.disable()
        count = sum(map(len, per_partition))
        output.flush()  # what the timer flush would write
        fins = t0.written + t1.written
        if output.written != count or fins < count * 21:
            raise SystemExit(f"run broken: {output.written} written, {fins} bytes of FIN")
        return seconds / count


def serve(socks: list[socket.socket], per_partition: list[list[bytes]]) -> None:
    """The child: each partition's frames, the next after the FIN of the last."""
    sel = selectors.DefaultSelector()
    left = {}
    for sock, frames_ in zip(socks, per_partition, strict=True):
        sock.setblocking(True)
        sock.sendall(frames_[0])
        left[sock] = iter(frames_[1:])
        sel.register(sock, selectors.EVENT_READ)
    while left:
        for key, _ in sel.select():
            ready = key.fileobj
            assert isinstance(ready, socket.socket)
            sock = ready
            sock.recv(4096)  # the FIN (each is 21 bytes; one at a time in flight)
            nxt = next(left[sock], None)
            if nxt is None:
                sel.unregister(sock)
                del left[sock]
            else:
                sock.sendall(nxt)


def run_lanes(per_partition: list[list[bytes]], pipe: bool = False) -> tuple[float, float]:
    """CPU seconds of this process per message, lanes reading both partitions, and wall
    seconds per message of one partition (a round trip: the child's turn and ours)."""
    pairs = [socket.socketpair() for _ in per_partition]
    pid = os.fork()
    if pid == 0:
        try:
            serve([theirs for _, theirs in pairs], per_partition)
        finally:
            os._exit(0)
    count = sum(map(len, per_partition))
    with contextlib.ExitStack() as stack:
        if pipe:  # lines into a pipe that ``cat`` drains, as ``tail --ordered | cat``
            drain = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
            stack.callback(drain.wait)
            assert drain.stdin is not None
            out = cast(BinaryIO, stack.enter_context(drain.stdin))
        else:
            out = stack.enter_context(open(os.devnull, "wb"))
        output = TailOutput(out, "raw", False, 0, 1, MessageFilter())
        order = OrderChecker("t")
        delivery = cast(Any, SimpleNamespace(order_checker=order))
        start = resource.getrusage(resource.RUSAGE_SELF)
        began = time.perf_counter()
        lanes = []
        for partition, (ours, theirs) in enumerate(pairs):
            theirs.close()
            ours.setblocking(False)
            conn = cast(
                Any,
                SimpleNamespace(
                    address=f"127.0.0.1:{partition}",
                    layout=LAYOUT,
                    config=SimpleNamespace(heartbeat_interval_ms=30000),
                ),
            )
            lane = PartitionLane(conn, partition, (None, None), delivery, output, 0)
            lane.on_exit = lambda lane: None
            lane.start(ours)
            lanes.append(lane)
        for lane in lanes:
            lane.thread.join()  # each ends at its socket's end (the child is done)
        end = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.perf_counter() - began
        os.waitpid(pid, 0)
        handled = sum(len(lane.take_batch()[0]) for lane in lanes)
        for lane in lanes:
            lane.release()
        if output.written != count or handled != count:
            raise SystemExit(f"run broken: {output.written} written, {handled} handled")
    cpu = (end.ru_utime - start.ru_utime) + (end.ru_stime - start.ru_stime)
    return cpu / count, wall / max(map(len, per_partition))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=40_000, help="over both partitions")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", type=int, metavar="N", help="cProfile one run, top N")
    ap.add_argument("--plain", type=int, metavar="K", help="plain tail, K messages per read")
    ap.add_argument("--lanes", action="store_true", help="a thread per partition (see above)")
    ap.add_argument("--pipe", action="store_true", help="--lanes: lines into a pipe, not /dev/null")
    args = ap.parse_args()
    per_read = args.plain or 1
    layout = LAYOUT if per_read == 1 else PLAIN
    per_partition = [frames(args.messages // 2, args.size, p, layout) for p in PARTITIONS]
    if args.lanes:
        lane_runs = [run_lanes(per_partition, args.pipe) for _ in range(args.repeats)]
        lane_us = [cpu * 1e6 for cpu, _ in lane_runs]
        trip_us = [wall * 1e6 for _, wall in lane_runs]
        print(
            f"tail --ordered on threads: {statistics.median(lane_us):.2f} us CPU/msg (median "
            f"of {len(lane_us)}; runs {', '.join(f'{u:.2f}' for u in lane_us)}); "
            f"{statistics.median(trip_us):.2f} us a round trip ("
            f"{', '.join(f'{u:.2f}' for u in trip_us)}), {args.messages:,} messages"
        )
        return
    runs = [asyncio.run(run(per_partition, per_read, None)) for _ in range(args.repeats)]
    us = [r * 1e6 for r in runs]
    what = "tail --ordered" if per_read == 1 else f"tail ({per_read} messages a read)"
    print(
        f"{what} path: {statistics.median(us):.2f} us CPU/msg (median of "
        f"{len(us)}; runs {', '.join(f'{u:.2f}' for u in us)}), {args.messages:,} messages"
    )
    if args.profile:
        prof = cProfile.Profile()
        asyncio.run(run(per_partition, per_read, prof))
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
