"""The fastest an ordered channel can be read here: a floor for ``tail --ordered``.

On an ordered channel youzan's nsqd sends a partition's next message only after the FIN
of the last one, so the rate is one client + server round trip per message per
partition. This client does nothing but that round trip: one blocking socket and one
thread per partition leader, ``recv`` -> decode (nsqctl's sans-IO protocol) -> ``FIN``,
no output, no bookkeeping. Timed from the first SUB to the last FIN (connects, the lookup
and the closing CLS excluded), so what is left is nsqd's side of the round trip and the kernel's.

``--asyncio`` does the same round trip on one asyncio event loop for every partition
(nsqctl's process model), ``--loops`` on an event loop per partition, each on its own
thread: what the process model costs apart from anything nsqctl does per message.
``--one-thread`` reads every partition on one thread, ``poll`` over their sockets: the
round trips overlap as on threads, with no interpreter lock handed between partitions.
``--write-lines`` keeps the threads and adds what ``tail --ordered`` must do before each
FIN (the order checked, the line written): what a tail on threads could reach.
``--processes`` reads each partition in a process of its own, forked once its connection
is made (with ``--write-lines`` too): the round trips overlap as on threads, and no
partition ever waits for the interpreter lock another one holds.

Prints one JSON line: ``{"received": N, "seconds": S, "per_partition": {...}}``.
Used by ``bench_redesign.py`` (rows ``ordered floor``, ``ordered floor, one loop``,
``ordered floor, a loop each``, ``ordered floor, writing lines``); runs alone too::

    python -m bench.ordered_floor --lookupd 127.0.0.1:4161 --topic T --channel C --count N
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import mmap
import multiprocessing
import os
import select
import socket
import sys
import threading
import time
from functools import partial
from typing import Any

import httpx

from nsqctl import protocol as p
from nsqctl.connection.stream import TRANSPORT_READ_SIZE
from nsqctl.consumer.order import OrderChecker
from nsqctl.protocol.frames import CLOSE_WAIT, HEARTBEAT, FrameDecoder, FrameEvent
from nsqctl.protocol.raw_message import MessageLayout, RawMessage

LAYOUT = MessageLayout(family="redesign", ordered=True)


def _reply(sock: socket.socket, decoder: FrameDecoder) -> bytes:
    """The data of the next frame (a handshake reply; nsqd sends nothing else meanwhile)."""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("nsqd closed the connection")
        frames = decoder.feed(chunk)
        if frames:
            return frames[0].data


class LineOutput:
    """``--write-lines``: what ``tail --ordered`` must do with a message before its FIN,
    at the least: check its order and write its line (one ``write`` to ``/dev/null``,
    under a lock the readers share, as one output stream needs)."""

    def __init__(self) -> None:
        self.fd = os.open(os.devnull, os.O_WRONLY)
        self.lock = threading.Lock()
        self.order = OrderChecker("floor")

    def write(self, address: str, part: int, msg: RawMessage) -> None:
        violation = self.order.check(address, part, msg)
        if violation is not None:
            raise AssertionError(f"out of order: {violation}")
        line = msg.body + b"\n"
        with self.lock:
            os.write(self.fd, line)


class Goal:
    """The messages to read over all partitions (the prefill need not split evenly)."""

    def __init__(self, want: int, output: LineOutput | None = None) -> None:
        self.want = want
        self.output = output
        self.readers: list[Reader] = []
        self.finished = 0.0
        self.lock = threading.Lock()
        self.loop_readers: list[LoopReader] = []  # --asyncio, --loops

    def reached(self) -> bool:
        return sum(r.count for r in self.readers) >= self.want

    def finish(self) -> None:
        """The last message was FINed: stop the clock, then close every connection cleanly
        (CLS; each reader ends at its CLOSE_WAIT), waking readers whose partition is done.
        An asyncio reader's socket belongs to its loop: its CLS goes through that loop."""
        with self.lock:
            if self.finished:
                return
            self.finished = time.perf_counter()
            for proto in self.loop_readers:
                assert proto.transport is not None
                proto.loop.call_soon_threadsafe(proto.transport.write, p.cls())
            if not self.loop_readers:
                for r in self.readers:
                    r.sock.sendall(p.cls())


class Reader(threading.Thread):
    def __init__(self, host: str, port: int, topic: str, channel: str, part: int, goal: Goal):
        super().__init__(daemon=True)
        self.topic, self.channel, self.part, self.goal = topic, channel, part, goal
        self.sock = socket.create_connection((host, port), timeout=30)
        self.sock.settimeout(None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ident = {"feature_negotiation": True, "heartbeat_interval": 30000, "client_id": "floor"}
        self.sock.sendall(p.MAGIC_V2 + p.identify(ident))
        self.decoder = FrameDecoder()
        _reply(self.sock, self.decoder)
        self.count = 0
        self.error: str | None = None
        self.go = threading.Event()
        self.last = b""
        self.address = ""

    def subscribe(self) -> None:
        """SUB_ORDERED, then RDY 1 once nsqd said OK."""
        self.sock.sendall(p.sub_ordered(self.topic, self.channel, self.part))
        reply = _reply(self.sock, self.decoder)
        if reply != p.OK:
            raise ConnectionError(f"SUB_ORDERED answered {reply!r}")
        self.sock.sendall(p.rdy(1))
        self.address = f"{self.sock.getpeername()}"

    def handle(self, events: list[FrameEvent]) -> bool:
        """Each message written (``--write-lines``) and FINed; True at nsqd's CLOSE_WAIT."""
        sock, goal, output = self.sock, self.goal, self.goal.output
        for event in events:
            if event.__class__ is list:
                for msg in event:
                    if output is not None and msg.id != self.last:
                        output.write(self.address, self.part, msg)
                    sock.sendall(p.fin(msg.id))
                    # youzan resends the last message when an ordered SUB resets the
                    # channel's reader: FIN it again, count it once.
                    if msg.id != self.last:
                        self.count += 1
                        self.last = msg.id
                        if goal.reached():
                            goal.finish()
            elif event[1] == HEARTBEAT:
                sock.sendall(p.nop())
            elif event[1] == CLOSE_WAIT:
                return True
        return False

    def read(self) -> list[FrameEvent]:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("nsqd closed the connection")
        return self.decoder.feed_events(chunk, LAYOUT)

    def run(self) -> None:
        try:
            self.go.wait()
            self.subscribe()
            while not self.handle(self.read()):
                pass
        except Exception as err:  # reported in the JSON; the bench marks the run failed
            self.error = repr(err)


def run_polled(readers: list[Reader], timeout: float) -> None:
    """``--one-thread``: every partition on this one thread, ``poll`` over their sockets.
    The round trips still overlap (each partition waits on nsqd, not on the other), with
    no second thread: no hand-over of the interpreter lock between partitions, and one
    wake-up serves every partition whose message came meanwhile."""
    poller = select.poll()
    by_fd = {}
    for r in readers:
        r.subscribe()
        by_fd[r.sock.fileno()] = r
        poller.register(r.sock, select.POLLIN)
    deadline = time.monotonic() + timeout
    try:
        while by_fd:
            ready = poller.poll(max(0.0, deadline - time.monotonic()) * 1000)
            if not ready:
                raise TimeoutError("nothing came")
            for fd, _ in ready:
                r = by_fd[fd]
                if r.handle(r.read()):
                    poller.unregister(fd)
                    del by_fd[fd]
    except Exception as err:  # reported in the JSON; the bench marks the run failed
        readers[0].error = repr(err)


class LoopReader(asyncio.Protocol):
    """One partition of the ``--asyncio``/``--loops`` floor: the same round trip as
    ``Reader``, on an asyncio event loop (one for every partition, as nsqctl has, or one
    per partition), read in the transport's callback: what the loop itself costs."""

    def __init__(self, reader: Reader, goal: Goal) -> None:
        self.reader, self.goal = reader, goal
        self.loop = asyncio.get_running_loop()
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self.transport: asyncio.Transport | None = None
        self.subscribed = False
        self.last = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        # nsqctl's own read size: asyncio's default allocates 256 KiB a read (an mmap)
        transport.max_size = TRANSPORT_READ_SIZE  # type: ignore[attr-defined]
        r = self.reader
        transport.write(p.sub_ordered(r.topic, r.channel, r.part))

    def data_received(self, data: bytes) -> None:
        transport, goal, r = self.transport, self.goal, self.reader
        assert transport is not None
        for event in r.decoder.feed_events(data, LAYOUT):
            if event.__class__ is list:
                for msg in event:
                    transport.write(p.fin(msg.id))
                    if msg.id != self.last:  # youzan's resend after an ordered SUB
                        r.count += 1
                        self.last = msg.id
                        if not goal.finished and goal.reached():
                            goal.finish()
            elif not self.subscribed:
                if event[1] != p.OK:
                    r.error = f"SUB_ORDERED answered {event[1]!r}"
                    transport.close()
                    return
                self.subscribed = True
                transport.write(p.rdy(1))
            elif event[1] == HEARTBEAT:
                transport.write(p.nop())
            elif event[1] == CLOSE_WAIT:
                transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def run_on_loop(goal: Goal, readers: list[Reader], timeout: float) -> None:
    """Read ``readers`` on this thread's event loop until each has closed."""
    loop = asyncio.get_running_loop()
    protos = []
    for r in readers:
        r.sock.setblocking(False)
        _, proto = await loop.create_connection(partial(LoopReader, r, goal), sock=r.sock)
        protos.append(proto)
    with goal.lock:
        goal.loop_readers.extend(protos)
    await asyncio.wait_for(asyncio.gather(*(proto.closed for proto in protos)), timeout)


def run_forked(goal: Goal, readers: list[Reader], started: float, want: int) -> int:
    """``--processes``: each reader in a child of its own; the children share the count
    (and the time of the last FIN) through shared memory, and print nothing: this process
    reports, as the other modes do. Lines are written without a lock: one ``write`` of a
    line is whole on ``/dev/null``, a pipe (``PIPE_BUF``) and a file (the kernel orders the
    writes to one open file)."""
    shared = mmap.mmap(-1, 16)  # anonymous, shared with the children: count, last FIN
    counts = memoryview(shared).cast("q")
    ends = memoryview(shared).cast("d")
    lock = multiprocessing.Lock()

    def reached() -> bool:
        with lock:
            counts[0] += 1
            ends[1] = time.perf_counter()
            return counts[0] >= want

    def finish() -> None:  # as Goal.finish: a CLS on every partition's connection
        for x in readers:
            x.sock.sendall(p.cls())

    pids = []
    for r in readers:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                goal.readers = [r]
                goal.reached = reached  # type: ignore[method-assign]
                goal.finish = finish  # type: ignore[method-assign]
                if goal.output is not None:
                    goal.output.lock = contextlib.nullcontext()  # type: ignore[assignment]
                r.subscribe()
                while not r.handle(r.read()):
                    pass
            except Exception as err:
                print(json.dumps({"child": r.part, "error": repr(err)}), file=sys.stderr)
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    failed = sum(os.waitpid(pid, 0)[1] != 0 for pid in pids)
    received = counts[0]
    seconds = ends[1] - started
    errors = [f"{failed} reader(s) failed"] if failed else []
    if received < want:
        errors.append(f"only {received} of {want} messages came")
    print(json.dumps({"received": received, "seconds": seconds, "errors": errors}))
    for r in readers:
        r.sock.close()
    return 1 if errors else 0


def channel_args(description: str) -> argparse.ArgumentParser:
    """The options every ordered probe takes: where, what and how many to read."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--lookupd", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--channel", required=True)
    ap.add_argument("--count", type=int, required=True, help="messages over all partitions")
    return ap


def lookup_partitions(lookupd: str, topic: str) -> dict[str, Any]:
    """The lookupd's partitions of ``topic`` (number -> its leader's producer record);
    exits when there are none."""
    answer = httpx.get(
        f"http://{lookupd}/lookup", params={"topic": topic, "access": "r"}, timeout=10
    ).json()
    parts: dict[str, Any] = (
        answer.get("partitions") or answer.get("data", {}).get("partitions") or {}
    )
    if not parts:
        raise SystemExit(f"{sys.argv[0]}: no partitions of {topic} in the lookup")
    return parts


def main() -> int:
    ap = channel_args(__doc__.splitlines()[0])
    ap.add_argument(
        "--asyncio",
        action="store_true",
        help="one event loop for all partitions instead of a thread each",
    )
    ap.add_argument("--loops", action="store_true", help="an event loop per partition")
    ap.add_argument(
        "--one-thread",
        action="store_true",
        help="every partition on one thread, poll over their sockets",
    )
    ap.add_argument(
        "--processes",
        action="store_true",
        help="a process per partition (forked after connecting) instead of a thread each",
    )
    ap.add_argument(
        "--write-lines",
        action="store_true",
        help="threads: check each message's order and write its line before its FIN",
    )
    args = ap.parse_args()
    parts = lookup_partitions(args.lookupd, args.topic)
    goal = Goal(args.count, LineOutput() if args.write_lines else None)
    goal.readers = [
        Reader(v["broadcast_address"], v["tcp_port"], args.topic, args.channel, int(k), goal)
        for k, v in parts.items()
    ]
    readers = goal.readers
    started = time.perf_counter()
    timeout = max(60.0, args.count / 1000)
    if args.loops or args.asyncio:
        groups = [[r] for r in readers] if args.loops else [readers]
        threads = [
            threading.Thread(target=asyncio.run, args=(run_on_loop(goal, group, timeout),))
            for group in groups
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    elif args.one_thread:
        run_polled(readers, timeout)
    elif args.processes:
        return run_forked(goal, readers, started, args.count)
    else:
        for r in readers:
            r.start()
            r.go.set()
        for r in readers:
            r.join(timeout=timeout)
    seconds = goal.finished - started if goal.finished else time.perf_counter() - started
    errors = [r.error for r in readers if r.error]
    if not goal.finished:
        errors.append(f"only {sum(r.count for r in readers)} of {args.count} messages came")
    report = {
        "received": sum(r.count for r in readers),
        "seconds": seconds,
        "per_partition": {r.part: r.count for r in readers},
        "errors": errors,
    }
    print(json.dumps(report))
    for r in readers:
        r.sock.close()
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
