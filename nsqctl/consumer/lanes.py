"""Ordered partitions read on threads of their own: a lane per partition that does only
what each message needs (``recv`` -> decode -> order check -> hand out -> ``FIN``).

On an ordered channel youzan's nsqd sends a partition's next message only after the FIN
of the last, so the rate is one round trip per message per partition. On one event loop
the partitions take their turns; on a thread each, blocking in ``poll``/``recv``, their
round trips overlap and each costs the least Python can do. The event loop keeps
everything else: connecting, IDENTIFY, SUB, RDY, failover, reconnects and the resume
position. It lends a subscribed connection's socket to a lane (:meth:`Connection.lend`)
and takes it back (:meth:`Connection.take_back`) when the lane meets anything but a plain
message (an error frame, a close, a protocol error, a message past ``max_attempts``, one
the sink refuses), when the loop needs the socket (a command to send, a close), or when
the consumer stops. What the lane read and did not handle goes back with the socket, as
bytes, and the loop handles it as a read of its own: nothing is skipped or handled twice.

The consumer's books (counts, FINed ids, confirmed positions, the last FINed mark, order
events) are the delivery path's own: a lane sends them batched updates
(:meth:`DeliveryPath.lane_settled`), which the loop applies on :meth:`OrderedLanes.drain`
and whenever it takes a lane back (before the partition's next read on the loop, so a
resume position or a resend check never sees stale books). The order check is the
consumer's one :class:`OrderChecker`; a partition's entries are only touched by the lane
while it holds the partition.

Only a caller whose handling is safe on another thread and cheap (``nsqctl tail
--ordered`` writing lines) uses lanes; the library Consumer's handlers run on its loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from nsqctl import protocol as p
from nsqctl.consumer.order import OrderViolation
from nsqctl.protocol.frames import HEARTBEAT, FrameDecoder, FrameType
from nsqctl.protocol.raw_message import RawMessage
from nsqctl.protocol.session import idle_timeout

if TYPE_CHECKING:
    from nsqctl.connection import Connection
    from nsqctl.consumer.connections import Target
    from nsqctl.consumer.delivery import DeliveryPath

log = logging.getLogger("nsqctl.consumer")

READ_SIZE = 64 * 1024
_RESPONSE = int(FrameType.RESPONSE)
_POLLIN = select.POLLIN
_POLLOUT = select.POLLOUT


class LaneSink(Protocol):
    """What a lane hands its messages to, on the lane's thread."""

    def write_lane(self, raws: list[RawMessage]) -> bool:
        """Handle ``raws`` (one partition's, in order) before their FIN; False to leave
        them to the loop, untouched (a limit reached, the output gone)."""
        ...


Targets = Callable[[], "dict[Target, Connection]"]


class PartitionLane:
    """One partition's connection read on a thread (see the module docstring)."""

    def __init__(
        self,
        conn: Connection,
        partition: int | None,
        mark: tuple[int | None, int | None],
        delivery: DeliveryPath,
        sink: LaneSink,
        max_attempts: int,
    ) -> None:
        self.conn = conn
        self.partition = partition
        self.nsqd = str(conn.address)
        self._last_key = mark
        self._order_check = delivery.order_checker.check
        self._sink = sink
        self._max_attempts = max_attempts
        self._layout = conn.layout
        idle = idle_timeout(conn.config.heartbeat_interval_ms)
        # poll's timeout; -1 (none) when no heartbeats were asked for: silence says nothing
        self._idle_ms = int(idle * 1000) if idle != math.inf else -1
        self.sock: socket.socket | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._stopping = False
        # The batch the loop has not applied yet (see DeliveryPath.lane_settled).
        self._lock = threading.Lock()
        self._done: list[RawMessage] = []
        self._redelivered = 0
        self._violations: list[OrderViolation] = []
        # What the lane leaves: bytes read and not handled, when it last read, and how
        # the socket ended (False: it did not; True: closed by nsqd; an exception).
        self.unread = b""
        self.last_read = time.monotonic()
        self.end: BaseException | bool = False
        self.returned = False  # the loop has taken the socket back
        self.thread = threading.Thread(target=self._run, name=f"lane-{partition}", daemon=True)
        self.on_exit: Callable[[PartitionLane], None] = lambda lane: None

    # -- the loop's side ------------------------------------------------------------------

    def start(self, sock: socket.socket) -> None:
        self.sock = sock
        self.thread.start()

    def take_batch(self) -> tuple[list[RawMessage], int, list[OrderViolation]]:
        with self._lock:
            batch = (self._done, self._redelivered, self._violations)
            if self._done or self._redelivered or self._violations:
                self._done, self._redelivered, self._violations = [], 0, []
        return batch

    def stop(self) -> None:
        """Ask the thread to leave (at the next frame boundary) and wait until it has."""
        self._stopping = True
        if self.thread.is_alive():
            os.write(self._wake_w, b"x")
            self.thread.join()

    def release(self) -> None:
        """After the thread ended: close what the lane opened."""
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        if self.sock is not None:
            self.sock.close()  # the duplicate; the connection keeps its own

    # -- the thread's side ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._read()
        except BaseException as err:  # a bug must not leave the partition unread
            log.exception("reader of %s partition %s failed", self.nsqd, self.partition)
            self.end = err
        finally:
            if not self._stopping:
                self.on_exit(self)

    def _read(self) -> None:
        sock = self.sock
        assert sock is not None
        fd = sock.fileno()
        poller = select.poll()
        poller.register(fd, _POLLIN)
        poller.register(self._wake_r, _POLLIN)
        decoder = FrameDecoder()
        layout = self._layout
        recv, poll = sock.recv, poller.poll
        fin, nop = p.fin, p.nop()
        order_check, sink_write = self._order_check, self._sink.write_lane
        partition, nsqd = self.partition, self.nsqd
        max_attempts, idle_ms = self._max_attempts, self._idle_ms
        monotonic = time.monotonic
        lock = self._lock
        carry = b""  # read and not yet a whole frame
        while True:
            # Asked to stop: leave at once, even inside a frame. The part of it read goes
            # back as bytes and the loop's session reads the rest: waiting for nsqd to
            # finish the frame would hold the stop (and the loop) until it does.
            if self._stopping:
                self.unread = carry
                return
            ready = poll(idle_ms)
            if not ready or (len(ready) == 1 and ready[0][0] != fd):
                self.unread = carry  # the stop's wake-up, or silence (the idle deadline)
                return
            try:
                chunk = recv(READ_SIZE)
            except BlockingIOError:
                continue
            except OSError as err:
                self.unread, self.end = carry, err
                return
            if not chunk:
                self.unread, self.end = carry, True
                return
            self.last_read = monotonic()
            data = carry + chunk if carry else chunk
            try:
                events = decoder.feed_events(chunk, layout)
            except p.ProtocolError:
                self.unread = data  # the loop's session meets the same error
                return
            left = decoder.buffered
            if not events:
                carry = data
                continue
            if self._stopping or len(events) != 1:
                self.unread = data
                return
            event = events[0]
            if event.__class__ is not list:
                if event == (_RESPONSE, HEARTBEAT):
                    if not self._send(sock, nop):
                        self.unread = data[len(data) - left :] if left else b""
                        return
                    carry = data[len(data) - left :] if left else b""
                    continue
                self.unread = data
                return
            fresh: RawMessage | None = None
            again: list[bytes] = []
            for raw in event:
                if max_attempts and raw.attempts > max_attempts:
                    fresh = None
                    break
                if (raw.offset, raw.internal_id) == self._last_key:
                    # youzan resends the last message when it resets the channel's
                    # reader: FIN it again (the first FIN may have failed), once handed out
                    again.append(raw.id)
                    continue
                if fresh is not None:  # two new messages in one read: not the usual case
                    fresh = None
                    break
                fresh = raw
            else:
                if fresh is None and again:
                    out = b"".join([fin(i) for i in again])
                    with lock:
                        self._redelivered += len(again)
                    if not self._send(sock, out):
                        self.unread = data[len(data) - left :] if left else b""
                        return
                    carry = data[len(data) - left :] if left else b""
                    continue
            if fresh is None:
                self.unread = data
                return
            if not sink_write([fresh]):
                self.unread = data  # unchecked: the loop checks it as it arrives there
                return
            violation = order_check(nsqd, partition, fresh)
            if violation is not None:
                with lock:
                    self._violations.append(violation)
            again.append(fresh.id)
            out = fin(fresh.id) if len(again) == 1 else b"".join([fin(i) for i in again])
            with lock:  # the loop swaps the list out under the lock
                self._done.append(fresh)
                self._redelivered += len(again) - 1
            self._last_key = (fresh.offset, fresh.internal_id)
            if not self._send(sock, out):
                self.unread = data[len(data) - left :] if left else b""
                return
            carry = data[len(data) - left :] if left else b""

    def _send(self, sock: socket.socket, data: bytes) -> bool:
        """All of ``data`` on the non-blocking socket; False (and ``end`` set) when it
        failed: the message was handled, its FIN may not have reached nsqd."""
        view = memoryview(data)
        try:
            while view:
                try:
                    view = view[sock.send(view) :]
                except BlockingIOError:
                    select.poll().poll(1)  # a full send buffer: not on a consumer's FINs
                    continue
        except OSError as err:
            self.end = err
            return False
        return True


class OrderedLanes:
    """The lanes of one consumer's ordered partitions: lends each subscribed connection
    the loop is not reading for a reason of its own, takes them back, applies their
    batches to the consumer's books. Every method runs on the consumer's loop."""

    def __init__(
        self,
        connections: Targets,
        delivery: DeliveryPath,
        sink: LaneSink,
        *,
        max_attempts: int = 0,
    ) -> None:
        self._connections = connections
        self._delivery = delivery
        self._sink = sink
        self._max_attempts = max_attempts
        self._lanes: dict[int, PartitionLane] = {}  # by id(connection)
        self._running = True
        self._loop = asyncio.get_running_loop()
        #: partitions lent so far (a lane each time), for a caller's report
        self.lent = 0

    def lend(self) -> None:
        """Give a lane each subscribed ordered partition that has none and can have one."""
        if not self._running:
            return
        delivery = self._delivery
        for (_address, partition), conn in list(self._connections().items()):
            if id(conn) in self._lanes or not conn.lendable:
                continue
            mark = delivery.lane_mark(partition)
            if mark is None:
                continue
            lane = PartitionLane(conn, partition, mark, delivery, self._sink, self._max_attempts)
            sock = conn.lend(functools.partial(self._take_back, lane))
            if sock is None:
                lane.release()
                continue
            lane.on_exit = self._exited
            self._lanes[id(conn)] = lane
            self.lent += 1
            lane.start(sock)

    def drain(self) -> None:
        """Apply each lane's batch to the consumer's books."""
        for lane in list(self._lanes.values()):
            self._apply(lane)

    def stop(self) -> None:
        """Take every partition back and lend none again (the consumer stops)."""
        self._running = False
        for lane in list(self._lanes.values()):
            self._take_back(lane)

    @property
    def active(self) -> int:
        return len(self._lanes)

    def _apply(self, lane: PartitionLane) -> None:
        raws, redelivered, violations = lane.take_batch()
        if raws or redelivered or violations:
            self._delivery.lane_settled(lane.partition, lane.nsqd, raws, redelivered, violations)

    def _exited(self, lane: PartitionLane) -> None:
        """On the lane's thread, as it ends on its own: the loop takes the socket back."""
        self._loop.call_soon_threadsafe(self._take_back, lane)

    def _take_back(self, lane: PartitionLane) -> None:
        if lane.returned:
            return
        lane.stop()
        lane.returned = True
        self._lanes.pop(id(lane.conn), None)
        self._apply(lane)  # the books first: the loop's next read of it may need them
        lane.release()
        lane.conn.take_back(lane.unread, lane.last_read, lane.end)
