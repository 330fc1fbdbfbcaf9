"""The fastest an ordered channel can be read here: a floor for ``tail --ordered``.

On an ordered channel youzan's nsqd sends a partition's next message only after the FIN
of the last one, so the rate is one client + server round trip per message per
partition. This client does nothing but that round trip: one blocking socket and one
thread per partition leader, ``recv`` -> decode (nsqctl's sans-IO protocol) -> ``FIN``,
no output, no bookkeeping. Timed from the first SUB to the last FIN (connects, the lookup
and the closing CLS excluded), so what is left is nsqd's side of the round trip and the kernel's.

Prints one JSON line: ``{"received": N, "seconds": S, "per_partition": {...}}``.
Used by ``bench_redesign.py`` (row ``ordered floor``); runs alone too::

    python bench/ordered_floor.py --lookupd 127.0.0.1:4161 --topic T --channel C --count N
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time

import httpx

from nsqctl import protocol as p
from nsqctl.protocol.frames import CLOSE_WAIT, HEARTBEAT, FrameDecoder
from nsqctl.protocol.message import MessageLayout

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


class Goal:
    """The messages to read over all partitions (the prefill need not split evenly)."""

    def __init__(self, want: int) -> None:
        self.want = want
        self.readers: list[Reader] = []
        self.finished = 0.0
        self.lock = threading.Lock()

    def reached(self) -> bool:
        return sum(r.count for r in self.readers) >= self.want

    def finish(self) -> None:
        """The last message was FINed: stop the clock, then close every connection cleanly
        (CLS; each reader ends at its CLOSE_WAIT), waking readers whose partition is done."""
        with self.lock:
            if self.finished:
                return
            self.finished = time.perf_counter()
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

    def run(self) -> None:
        try:
            self.go.wait()
            sock, goal = self.sock, self.goal
            sock.sendall(p.sub_ordered(self.topic, self.channel, self.part))
            reply = _reply(sock, self.decoder)
            if reply != p.OK:
                raise ConnectionError(f"SUB_ORDERED answered {reply!r}")
            sock.sendall(p.rdy(1))
            decoder = self.decoder
            events: list = []
            fin, nop = p.fin, p.nop()
            last = b""
            while True:
                for event in events:
                    if event.__class__ is list:
                        for msg in event:  # type: ignore[union-attr]
                            sock.sendall(fin(msg.id))
                            # youzan resends the last message when an ordered SUB resets
                            # the channel's reader: FIN it again, count it once.
                            if msg.id != last:
                                self.count += 1
                                last = msg.id
                                if goal.reached():
                                    goal.finish()
                    elif event[1] == HEARTBEAT:  # type: ignore[index]
                        sock.sendall(nop)
                    elif event[1] == CLOSE_WAIT:  # type: ignore[index]
                        return
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("nsqd closed the connection")
                events = decoder.feed_events(chunk, LAYOUT)
        except Exception as err:  # reported in the JSON; the bench marks the run failed
            self.error = repr(err)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lookupd", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--channel", required=True)
    ap.add_argument("--count", type=int, required=True, help="messages over all partitions")
    args = ap.parse_args()
    answer = httpx.get(
        f"http://{args.lookupd}/lookup", params={"topic": args.topic, "access": "r"}, timeout=10
    ).json()
    parts = answer.get("partitions") or answer.get("data", {}).get("partitions") or {}
    if not parts:
        print(f"ordered_floor: no partitions of {args.topic} in the lookup", file=sys.stderr)
        return 1
    goal = Goal(args.count)
    goal.readers = [
        Reader(v["broadcast_address"], v["tcp_port"], args.topic, args.channel, int(k), goal)
        for k, v in parts.items()
    ]
    readers = goal.readers
    started = time.perf_counter()
    for r in readers:
        r.start()
        r.go.set()
    for r in readers:
        r.join(timeout=max(60.0, args.count / 1000))
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
