"""Handler concurrency on a real nsqd: handlers in threads, async handlers bounded by
``concurrency``, auto-touch past a short message timeout, and close while a handler
thread runs. Overlap is asserted from each handler's recorded start and end, never from
wall time."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx

from nsqctl.connection import Connection, ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.errors import AlreadyRespondedError
from nsqctl.message import Message, finish_all
from nsqctl.producer import Producer
from nsqctl.protocol.raw_message import RawMessage
from nsqctl.servers import cluster
from tests.helpers.names import unique
from tests.helpers.wait import wait_for
from tests.integration.test_consumer import channel_stats, wait_channel_settled


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    """How many of the (start, end) spans were running together at most."""
    return max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)


async def test_a_plain_function_handler_runs_in_threads_and_overlaps(
    original_cluster: cluster.Cluster,
) -> None:
    """10 messages, a blocking handler of 0.2 s, threads=True with concurrency=10: every
    message is handled off the event loop, several at once, and FINed once (a third by
    the handler's own finish(), a third by finish_all(), from its thread, carried to the
    loop)."""
    topic = unique("threads")
    nsqd, http = original_cluster.nsqd_tcp[0], original_cluster.nsqd_http[0]
    async with Producer(nsqd_tcp=[nsqd]) as producer:
        await producer.publish_many(topic, [b"%d" % i for i in range(10)])
    spans: list[tuple[float, float]] = []
    threads: set[str] = set()
    lock = threading.Lock()

    def handle(msg: Message) -> None:
        start = time.monotonic()
        time.sleep(0.2)
        if int(msg.body) % 3 == 1:
            msg.finish()  # from the handler's thread
        elif int(msg.body) % 3 == 2:
            finish_all([msg])
        with lock:
            spans.append((start, time.monotonic()))
            threads.add(threading.current_thread().name)

    async with Consumer(
        topic,
        "th",
        handle,
        nsqd_tcp=[nsqd],
        options=ConsumerOptions(max_in_flight=10, concurrency=10, threads=True),
    ) as consumer:
        await wait_for(lambda: consumer.stats.finished == 10, 20.0, "10 messages finished")
    assert len(spans) == 10
    assert _most_at_once(spans) > 1, spans
    assert threading.main_thread().name not in threads, threads
    ch = await wait_channel_settled(http, topic, "th")
    assert ch is not None and ch.requeue_count == 0 and ch.timeout_count == 0, ch
    assert consumer.stats.finished == 10 and consumer.stats.requeued == 0


async def test_async_handlers_run_at_most_concurrency_at_once(
    original_cluster: cluster.Cluster,
) -> None:
    """max_in_flight 10 and concurrency 3: the handlers overlap, never more than 3."""
    topic = unique("bound")
    nsqd, http = original_cluster.nsqd_tcp[1], original_cluster.nsqd_http[1]
    async with Producer(nsqd_tcp=[nsqd]) as producer:
        await producer.publish_many(topic, [b"x"] * 10)
    spans: list[tuple[float, float]] = []

    async def handle(msg: Message) -> None:
        start = time.monotonic()
        await asyncio.sleep(0.2)
        spans.append((start, time.monotonic()))

    async with Consumer(
        topic,
        "bd",
        handle,
        nsqd_tcp=[nsqd],
        options=ConsumerOptions(max_in_flight=10, concurrency=3),
    ) as consumer:
        await wait_for(lambda: consumer.stats.finished == 10, 20.0, "10 messages finished")
    assert 1 < _most_at_once(spans) <= 3, spans
    ch = await wait_channel_settled(http, topic, "bd")
    assert ch is not None and ch.requeue_count == 0 and ch.timeout_count == 0, ch


async def test_auto_touch_keeps_a_long_thread_handler_past_the_message_timeout(
    original_cluster: cluster.Cluster,
) -> None:
    """A message timeout of 1 s negotiated in IDENTIFY (nsqd's minimum) and a handler
    thread that holds its message until nsqd has timed out another one on the same
    channel (a probe connection holding a message unanswered, so the short timeout is
    proven live: nsqd scans a new channel's in-flight messages only after a while). With
    auto_touch the handler's message is touched meanwhile, then FINed: delivered once,
    and the probe's is the channel's only timeout."""
    topic = unique("touch")
    nsqd, http = original_cluster.nsqd_tcp[0], original_cluster.nsqd_http[0]
    short = ConnectionConfig(msg_timeout_ms=1000)
    async with Producer(nsqd_tcp=[nsqd]) as producer:
        await producer.publish(topic, b"long")
        release = threading.Event()
        handled: list[tuple[bytes, int]] = []

        def handle(msg: Message) -> None:
            handled.append((msg.body, msg.attempts))
            if msg.body == b"long":
                release.wait(30)

        consumer = Consumer(
            topic,
            "tc",
            handle,
            nsqd_tcp=[nsqd],
            config=short,
            options=ConsumerOptions(concurrency=1, threads=True, auto_touch=True),
        )
        probe_got: list[RawMessage] = []
        probe = None
        try:
            await consumer.start()
            (conn,) = consumer.connections.values()
            assert conn.identify is not None and conn.identify.msg_timeout == 1000
            await wait_for(lambda: handled, 10.0, "the long handler to start")
            await producer.publish(topic, b"probe")
            probe = await Connection.open(
                nsqd, short, on_message=lambda _conn, raw: probe_got.append(raw)
            )
            await probe.subscribe(topic, "tc")
            probe.rdy(1)
            await wait_for(lambda: probe_got, 10.0, "the probe to hold a message")
            probe.rdy(0)  # its message, once timed out, goes to the consumer

            async def timed_out() -> bool:
                async with httpx.AsyncClient() as client:
                    ch = await channel_stats(client, http, topic, "tc")
                return ch is not None and ch.timeout_count >= 1

            await wait_for(timed_out, 20.0, "nsqd to time out the probe's message", 0.1)
            release.set()
            await wait_for(lambda: consumer.stats.finished == 2, 20.0, "both finished")
        finally:
            release.set()
            if probe is not None:
                await probe.close()
            await consumer.close()
    assert handled == [(b"long", 1), (b"probe", 2)], handled
    assert consumer.stats.touched >= 2, consumer.stats
    ch = await wait_channel_settled(http, topic, "tc")
    assert ch is not None and ch.timeout_count == 1 and ch.requeue_count == 0, ch


async def test_close_during_a_thread_handler_gives_its_message_back_once(
    original_cluster: cluster.Cluster,
) -> None:
    """One handler thread (concurrency 1) holding a message, a second message waiting for
    it, stop_timeout 0.5: close() gives both back once (the waiting one never reaches the
    handler); the thread, which cannot be cancelled, runs on and its late finish() raises
    AlreadyRespondedError with no FIN sent; another consumer gets both again at once."""
    topic = unique("closeth")
    nsqd, http = original_cluster.nsqd_tcp[1], original_cluster.nsqd_http[1]
    async with Producer(nsqd_tcp=[nsqd]) as producer:
        await producer.publish_many(topic, [b"a", b"b"])
    release = threading.Event()
    started: list[bytes] = []
    late: list[BaseException] = []

    def handle(msg: Message) -> None:
        started.append(msg.body)
        release.wait(20)
        try:
            msg.finish()
        except AlreadyRespondedError as err:
            late.append(err)

    consumer = Consumer(
        topic,
        "ct",
        handle,
        nsqd_tcp=[nsqd],
        options=ConsumerOptions(max_in_flight=2, concurrency=1, threads=True, stop_timeout=0.5),
    )
    await consumer.start()
    await wait_for(lambda: started and consumer.in_flight == 2, 10.0, "one handled, one waiting")
    await consumer.close()
    release.set()
    await wait_for(lambda: late, 10.0, "the thread's late finish() to raise")
    assert len(started) == 1
    assert consumer.stats.requeued == 2 and consumer.stats.finished == 0, consumer.stats

    again: list[Message] = []
    async with Consumer(
        topic, "ct", again.append, nsqd_tcp=[nsqd], options=ConsumerOptions(max_in_flight=2)
    ):
        # far below nsqd's 60 s message timeout: only messages given back come this soon
        await wait_for(lambda: len(again) == 2, 15.0, "both messages again")
    assert sorted((m.body, m.attempts) for m in again) == [(b"a", 2), (b"b", 2)]
    ch = await wait_channel_settled(http, topic, "ct")
    assert ch is not None and ch.requeue_count == 2 and ch.timeout_count == 0, ch
