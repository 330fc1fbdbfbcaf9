"""The producer against real servers of both families."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

import nsqctl
from nsqctl import admin
from nsqctl.connection import Connection, ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.errors import ConfigError, PartitionUnavailableError, PublishError
from nsqctl.producer import Producer, ProducerOptions
from nsqctl.protocol import BadMessageError, InvalidError
from nsqctl.protocol.raw_message import RawMessage
from nsqctl.servers import cluster, process
from nsqctl.sharding import murmur3_32, pick_node_for_key
from nsqctl.stats import read_nsqd_stats
from tests.conftest import StartCluster
from tests.helpers.cli import cli
from tests.helpers.names import unique
from tests.helpers.redesign import TopicSpec, create_topics
from tests.helpers.wait import wait_for


def _stored(http: str, topic: str) -> int:
    """Messages nsqd ``http`` took for ``topic``, from its ``/stats`` (the one reader)."""
    return sum(
        t.message_count for t in read_nsqd_stats(http, topic=topic).topics if t.topic == topic
    )


async def read_back(
    address: str,
    topic: str,
    count: int,
    *,
    partition: int | None = None,
    timeout: float = 20.0,
) -> list[RawMessage]:
    """SUB on one nsqd (partition) and FIN until ``count`` messages arrived."""
    got: list[RawMessage] = []
    done = asyncio.Event()

    def on_message(conn: Connection, msg: RawMessage) -> None:
        got.append(msg)
        conn.fin(msg.id)
        if len(got) >= count:
            done.set()

    conn = await Connection.open(address, on_message=on_message)
    try:
        await conn.subscribe(topic, "readback", partition)
        conn.rdy(min(count, 2000) or 1)
        if count:
            await asyncio.wait_for(done.wait(), timeout)
        else:
            await asyncio.sleep(0.5)
    finally:
        await conn.close()
    return got


async def test_publish_mpub_dpub_round_trip(original_cluster: cluster.Cluster) -> None:
    topic = unique("rt")
    nsqd = original_cluster.nsqd_tcp[0]
    bodies = [b"single", *[f"m{i}".encode() for i in range(50)], b"\x00\xffbinary\n\r"]
    async with Producer(nsqd_tcp=[nsqd]) as producer:
        await producer.publish(topic, bodies[0])
        await producer.publish_many(topic, bodies[1:])
        await producer.publish_deferred(topic, b"deferred", 0.3)
    got = await read_back(nsqd, topic, len(bodies) + 1)
    assert sorted(m.body for m in got) == sorted([*bodies, b"deferred"])
    assert all(len(m.id) == 16 and m.internal_id is None for m in got)


async def test_mpub_splits_under_max_body_size(start_cluster: StartCluster) -> None:
    c = start_cluster("original", nsqd_args=["--max-body-size=10000"])
    topic = unique("split")
    bodies = [bytes([i % 256]) * 900 for i in range(40)]  # 36 KB in total
    async with Producer(
        nsqd_tcp=c.nsqd_tcp, options=ProducerOptions(max_body_size=10000)
    ) as producer:
        await producer.publish_many(topic, bodies)
    got = await read_back(c.nsqd_tcp[0], topic, 40)
    assert sorted(m.body for m in got) == sorted(bodies)


async def test_keyed_call_split_into_batches_keeps_its_place_in_call_order(
    original_cluster: cluster.Cluster,
) -> None:
    """A sharded publish_many split into several MPUBs, and a sharded publish called right
    after it: every batch of the first call lands before the later call."""
    nsqd = original_cluster.nsqd_tcp[0]
    topic = unique("keyedsplit")
    bodies = [b"%03d:" % i + b"x" * 900 for i in range(20)]  # several 4000-byte MPUBs
    async with Producer(nsqd_tcp=[nsqd], options=ProducerOptions(max_body_size=4000)) as producer:
        # topology and connection cached: the later call need not wait for any IO
        await producer.publish(topic, b"warm", shard_key="k")
        first = asyncio.ensure_future(producer.publish_many(topic, bodies, shard_key="k"))
        later = asyncio.ensure_future(producer.publish(topic, b"later", shard_key="k"))
        await asyncio.gather(first, later)
    got = await read_back(nsqd, topic, len(bodies) + 2)
    assert [m.body for m in got] == [b"warm", *bodies, b"later"]


async def test_bad_message_raised_not_retried(original_cluster: cluster.Cluster) -> None:
    async with Producer(nsqd_tcp=original_cluster.nsqd_tcp[:1]) as producer:
        t0 = time.monotonic()
        with pytest.raises(BadMessageError, match="do not retry"):
            await producer.publish(unique("big"), b"x" * (2 * 1024 * 1024))
        assert time.monotonic() - t0 < 5  # raised at once, not after the retry budget


async def test_a_defer_beyond_nsqds_limit_is_said_so_not_a_state_error(
    original_cluster: cluster.Cluster,
) -> None:
    """nsqd answers a DPUB delay beyond its --max-req-timeout (one hour by default) with
    E_INVALID and a text saying the timeout is out of range: the hint says the same (the
    delay is too long), not that the command came in the wrong state of the connection."""
    async with Producer(nsqd_tcp=original_cluster.nsqd_tcp[:1]) as producer:
        with pytest.raises(InvalidError) as caught:
            await producer.publish_deferred(unique("deferlong"), b"x", 3600.001)
    text = str(caught.value)
    assert "DPUB timeout 3600001 out of range" in text, text
    assert "--max-req-timeout" in text and "shorter delay" in text, text
    assert "state" not in text, text


async def test_partition_on_original_is_a_clear_error(original_cluster: cluster.Cluster) -> None:
    async with Producer(lookupd_http=original_cluster.lookupd_http) as producer:
        with pytest.raises(Exception, match="no partitions"):
            await producer.publish(unique("np"), b"x", partition=1)


async def test_lookup_publish_creates_topic_on_original(original_cluster: cluster.Cluster) -> None:
    topic = unique("newtopic")
    async with Producer(lookupd_http=original_cluster.lookupd_http) as producer:
        await producer.publish(topic, b"first")
    counts = []
    for http in original_cluster.nsqd_http:
        node = read_nsqd_stats(http, topic=topic)
        counts += [t.message_count for t in node.topics if t.topic == topic]
    assert counts == [1]


async def test_shard_key_picks_one_nsqd_consistently(original_cluster: cluster.Cluster) -> None:
    topic = unique("shard")
    keys = [f"user-{i}" for i in range(20)]
    async with Producer(lookupd_http=original_cluster.lookupd_http) as producer:
        for round_ in range(3):
            for key in keys:
                await producer.publish(topic, f"{key}|{round_}".encode(), shard_key=key)
    by_node: dict[str, list[str]] = {}
    nodes = sorted(original_cluster.nsqd_tcp)
    for nsqd in nodes:
        http = original_cluster.nsqds[original_cluster.nsqd_tcp.index(nsqd)].http_address
        count = _stored(http, topic)
        msgs = await read_back(nsqd, topic, count) if count else []
        by_node[nsqd] = [m.body.decode().split("|")[0] for m in msgs]
    for key in keys:
        holders = [n for n, ks in by_node.items() if key in ks]
        assert holders == [pick_node_for_key(key, nodes)], key
        assert by_node[holders[0]].count(key) == 3


def _stopped(pid: int) -> bool:
    """The process is stopped (SIGSTOP): its state in ``/proc/PID/stat`` is T."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] == "T"


def _with_a_dead_nsqd(c: cluster.Cluster) -> tuple[list[str], str]:
    """nsqd addresses for a producer, the first a loopback port nobody listens on, the
    second ``c``'s first nsqd; and a shard key that goes to the dead one."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        nodes = [f"127.0.0.1:{s.getsockname()[1]}", c.nsqd_tcp[0]]
    key = next(f"user-{i}" for i in range(100) if pick_node_for_key(f"user-{i}", nodes) == nodes[0])
    return nodes, key


async def test_a_sharded_publish_to_a_dead_nsqd_fails_as_a_connect_error(
    original_cluster: cluster.Cluster,
) -> None:
    """The original family has no partition leaders: a keyed publish whose nsqd cannot be
    reached waits out the failover window for it and then raises a PublishConnectError (a
    ConnectError naming the address setting), not a PartitionUnavailableError saying no
    leader took it, which would send a caller after a redesign partition that is not there."""
    topic = unique("sharddead")
    nodes, key = _with_a_dead_nsqd(original_cluster)
    dead = nodes[0]
    options = ProducerOptions(failover_window=1.0, backoff=0.05, max_backoff=0.2)
    async with Producer(nsqd_tcp=nodes, options=options) as producer:
        await producer.publish(topic, b"first")  # the topic is written: publishes wait
        with pytest.raises(nsqctl.PublishConnectError) as caught:
            await producer.publish(topic, b"keyed", shard_key=key)
    err = caught.value
    assert not isinstance(err, nsqctl.LeaderUnavailableError), err
    assert err.setting == "nsqd_tcp" and dead in str(err)
    assert isinstance(err.__cause__, nsqctl.ConnectError)
    # refused at once, every time: not a deadline that passed
    assert not isinstance(err, nsqctl.NsqctlTimeoutError) and "timed out" not in str(err)


async def test_publishes_and_a_consumer_start_failing_on_a_hung_nsqd_are_timeouts(
    start_cluster: StartCluster,
) -> None:
    """A hung nsqd (SIGSTOPped: its kernel still accepts connections, nothing answers):
    the publish sent on the open connection gets no reply, and each retry's new
    connection no handshake. Every attempt failed by a deadline, so the publish ends with
    an NsqctlTimeoutError; still the PublishConnectError its last attempt makes it, or,
    with one attempt only (no reply), the PublishTransportError. A consumer starting
    meanwhile reaches no nsqd, none refusing: a NoConnectionError and a timeout."""
    c = start_cluster("original", nsqd=1)
    config = ConnectionConfig(connect_timeout=0.3, request_timeout=0.5)
    retrying = Producer(
        nsqd_tcp=c.nsqd_tcp,
        config=config,
        options=ProducerOptions(max_attempts=3, failover_window=0, backoff=0.05),
    )
    once = Producer(
        nsqd_tcp=c.nsqd_tcp,
        config=config,
        options=ProducerOptions(max_attempts=1, failover_window=0),
    )
    topic = unique("hungpub")
    consumer = Consumer(
        topic,
        "c",
        lambda msg: None,
        nsqd_tcp=c.nsqd_tcp,
        config=config,
        options=ConsumerOptions(connect_timeout=1.0),
    )
    try:
        for producer in (retrying, once):  # connected: the first attempts will wait
            await producer.publish(topic, b"before")
        hung = c.nsqds[0]
        process.pause(hung)
        try:
            await wait_for(lambda: _stopped(hung.pid), 10.0, "nsqd stopped by SIGSTOP")
            errors = await asyncio.gather(
                retrying.publish(topic, b"during"),
                once.publish(topic, b"during"),
                consumer.start(),
                return_exceptions=True,
            )
        finally:
            process.resume(hung)
    finally:
        await retrying.close()
        await once.close()
        await consumer.close()
    err, single, start = errors
    assert isinstance(err, nsqctl.NsqctlTimeoutError), repr(err)
    assert isinstance(err, nsqctl.PublishConnectTimeoutError), repr(err)
    assert isinstance(err, nsqctl.PublishConnectError)  # its kind before timeouts had one
    assert isinstance(err.__cause__, nsqctl.HandshakeTimeoutError)
    assert "3 attempt(s) (each timed out)" in str(err), err
    assert isinstance(single, nsqctl.NsqctlTimeoutError), repr(single)
    assert isinstance(single, nsqctl.PublishTimeoutError), repr(single)
    assert isinstance(single, nsqctl.PublishTransportError)
    assert isinstance(single.__cause__, nsqctl.ReplyTimeoutError)
    assert "no reply to pub" in str(single), single
    assert isinstance(start, nsqctl.NoConnectionTimeoutError), repr(start)
    assert isinstance(start, nsqctl.NoConnectionError) and start.setting == "connect_timeout"


async def test_a_publish_timing_out_on_one_nsqd_tries_the_others(
    start_cluster: StartCluster,
) -> None:
    """A topic on two original nsqds, published through the lookupd. With one nsqd hung
    (SIGSTOP), concurrent publishes whose first attempt timed out on it retry on the
    other (a round-robin position shared by the calls would send some back to the hung
    one); with both hung, the final error names both nsqds and what each did."""
    c = start_cluster("original", nsqd=2)
    topic = unique("hungtwo")
    for address in c.nsqd_tcp:  # the topic on both nsqds
        async with Producer(nsqd_tcp=[address]) as direct:
            await direct.publish(topic, b"seed")
    config = ConnectionConfig(connect_timeout=0.3, request_timeout=0.5)
    options = ProducerOptions(max_attempts=2, failover_window=0, backoff=0.05)

    async def listed() -> bool:
        async with Producer(lookupd_http=c.lookupd_http) as looking:
            return len((await looking.topology(topic, refresh=True)).producers) == 2

    await wait_for(listed, 30.0, f"both nsqds listed for {topic} by the lookupd")
    first, second = c.nsqds
    try:
        process.pause(first)
        await wait_for(lambda: _stopped(first.pid), 10.0, "nsqd stopped by SIGSTOP")
        async with Producer(lookupd_http=c.lookupd_http, config=config, options=options) as one:
            # each call's first attempt goes round-robin, so some start on the hung nsqd
            await asyncio.gather(*(one.publish(topic, b"one hung") for _ in range(4)))
        process.pause(second)
        await wait_for(lambda: _stopped(second.pid), 10.0, "nsqd stopped by SIGSTOP")
        async with Producer(lookupd_http=c.lookupd_http, config=config, options=options) as two:
            with pytest.raises(nsqctl.PublishConnectTimeoutError) as caught:
                await two.publish(topic, b"both hung")
    finally:
        process.resume(first)
        process.resume(second)
    text = str(caught.value)
    assert "2 attempt(s) (each timed out)" in text, text
    for address in c.nsqd_tcp:
        assert f"nsqd {address} did not finish the handshake" in text, text


@pytest.mark.redesign
async def test_a_publish_riding_out_a_hung_leader_is_a_timeout(
    start_cluster: StartCluster,
) -> None:
    """A redesign partition whose only nsqd hangs (SIGSTOP) while the lookup goes on
    naming it leader: a publish to the written topic rides the failover window, each
    attempt failing by a deadline, and ends with a PartitionTimeoutError: the
    PartitionUnavailableError it was, and an NsqctlTimeoutError. Its own one-nsqd
    cluster: the test stops the nsqd."""
    c = start_cluster("redesign", nsqd=1)
    topic = unique("hungleader")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1)}, channels=())
    config = ConnectionConfig(connect_timeout=0.3, request_timeout=0.5)
    options = ProducerOptions(failover_window=2.0, backoff=0.05, max_backoff=0.2)
    producer = Producer(lookupd_http=c.lookupd_http, config=config, options=options)
    try:
        await producer.publish(topic, b"before")  # written: the next publish rides
        hung = c.nsqds[0]
        process.pause(hung)
        try:
            await wait_for(lambda: _stopped(hung.pid), 10.0, "nsqd stopped by SIGSTOP")
            with pytest.raises(nsqctl.NsqctlTimeoutError) as caught:
                await producer.publish(topic, b"during")
        finally:
            process.resume(hung)
    finally:
        await producer.close()
    err = caught.value
    assert isinstance(err, nsqctl.PartitionTimeoutError), repr(err)
    assert isinstance(err, PartitionUnavailableError) and err.partition == 0
    assert err.setting == "failover_window"
    assert "each attempt timed out" in str(err), err


async def test_publishing_on_a_closed_producer_is_a_usage_error(
    original_cluster: cluster.Cluster,
) -> None:
    """A publish after close() is a mistake in the calling code: a UsageError, still the
    PublishError it was, known unsent; every way to publish says so, and nothing of it
    reaches nsqd."""
    topic = unique("closedpub")
    http = original_cluster.nsqds[0].http_address
    producer = Producer(nsqd_tcp=original_cluster.nsqd_tcp[:1])
    await producer.publish(topic, b"before close")
    await producer.close()
    attempts = {
        "publish": producer.publish(topic, b"after"),
        "publish_many": producer.publish_many(topic, [b"a", b"b"]),
        "publish_deferred": producer.publish_deferred(topic, b"later", 1.0),
    }
    for name, attempt in attempts.items():
        with pytest.raises(nsqctl.UsageError, match="closed producer") as caught:
            await attempt
        err = caught.value
        assert isinstance(err, PublishError), name  # what callers caught before
        assert isinstance(err, nsqctl.ProducerClosedError), name
        assert err.unsent is True, name
        assert topic in str(err), name
    assert _stored(http, topic) == 1


async def test_close_ends_a_publish_waiting_to_retry(original_cluster: cluster.Cluster) -> None:
    """A publish riding out the failover window (its nsqd unreachable) when the producer
    closes fails then with a PublishError, its last failure chained, and close() returns
    once it has: it does not retry on, and maybe store its message, after the close."""
    topic = unique("closeride")
    nodes, key = _with_a_dead_nsqd(original_cluster)
    waiting: list[nsqctl.FailoverEvent] = []
    options = ProducerOptions(failover_window=120.0)
    producer = Producer(nsqd_tcp=nodes, options=options, on_failover=waiting.append)
    await producer.publish(topic, b"first")  # the topic is written: publishes wait
    keyed = asyncio.create_task(producer.publish(topic, b"keyed", shard_key=key))
    try:
        await wait_for(lambda: waiting, 30.0, "the keyed publish waiting for its nsqd")
        async with asyncio.timeout(30):  # far below the 120 s window it would ride
            await producer.close()
        assert keyed.done()
        with pytest.raises(PublishError, match="closed") as caught:
            await keyed
    finally:
        keyed.cancel()
    assert isinstance(caught.value.__cause__, nsqctl.ConnectError)


async def test_close_waits_for_batches_not_yet_started(original_cluster: cluster.Cluster) -> None:
    """close() called in the same loop turn as a publish_many split into batches, before
    any batch task ran: close() returns only once the batches have ended, and they fail
    saying the producer closed, without connecting: nothing is stored after the close."""
    topic = unique("closebatch")
    producer = Producer(
        nsqd_tcp=original_cluster.nsqd_tcp[:1], options=ProducerOptions(max_body_size=64)
    )
    bodies = [b"x" * 20 for _ in range(12)]  # several MPUB batches under 64 bytes
    publish = asyncio.create_task(producer.publish_many(topic, bodies))
    try:
        await asyncio.create_task(producer.close())
        assert publish.done(), "close() returned while a batch could still publish"
        with pytest.raises(PublishError, match="closed before the publish"):
            await publish
    finally:
        publish.cancel()
        await producer.close()
    assert _stored(original_cluster.nsqds[0].http_address, topic) == 0


async def test_a_split_publish_with_one_batch_stored_is_not_called_unsent(
    original_cluster: cluster.Cluster,
) -> None:
    """publish_many split into two batches over two nsqds, one a port nobody listens on
    and one attempt each: the batch to the dead one is refused before it was written,
    the other is stored. The call's error must not say "nothing was sent" (publishing
    it all again would copy the stored batch), and it comes once both batches ended."""
    topic = unique("halfstored")
    nodes, _ = _with_a_dead_nsqd(original_cluster)
    options = ProducerOptions(max_attempts=1, max_body_size=80)
    bodies = [b"x" * 20 for _ in range(6)]  # two MPUB batches of three under 80 bytes
    async with Producer(nsqd_tcp=nodes, options=options) as producer:
        with pytest.raises(nsqctl.PublishConnectError) as caught:
            await producer.publish_many(topic, bodies)
        assert caught.value.unsent is False
        assert _stored(original_cluster.nsqds[0].http_address, topic) == 3


async def test_a_message_nsqd_refuses_as_too_big_is_known_unsent(
    original_cluster: cluster.Cluster,
) -> None:
    """nsqd checks each message's size while it reads the command, before it stores
    anything (E_BAD_MESSAGE): the refusal says unsent, so publishing the rest again makes
    no copy, and nothing of the command is stored (PUB and MPUB alike)."""
    topic = unique("toobig")
    big = b"z" * (2 << 20)  # over nsqd's default --max-msg-size, under the client's limit
    async with Producer(nsqd_tcp=original_cluster.nsqd_tcp[:1]) as producer:
        await producer.publish(topic, b"stored")
        for publish in (producer.publish(topic, big), producer.publish_many(topic, [b"a", big])):
            with pytest.raises(nsqctl.BadMessageError) as caught:
                await publish
            assert caught.value.unsent is True
    assert _stored(original_cluster.nsqds[0].http_address, topic) == 1


async def test_a_publish_refused_for_the_nsqd_family_is_known_unsent(
    original_cluster: cluster.Cluster, redesign_cluster: cluster.Cluster
) -> None:
    """A publish the connected nsqd's family cannot take (a partition or a traced or ext
    publish on the original NSQ, DPUB on the redesign) is refused before a byte is
    written: its error says unsent, so a caller may publish it again elsewhere without
    making a copy, and nothing is stored."""
    topic = unique("familyrefused")
    refusals: list[ConfigError] = []
    async with Producer(nsqd_tcp=original_cluster.nsqd_tcp[:1]) as producer:
        for publish in (
            producer.publish(topic, b"x", partition=1),
            producer.publish_traced(topic, b"x", 7),
            producer.publish_ext(topic, b"x", {"k": "v"}),
        ):
            with pytest.raises(ConfigError, match="original NSQ server") as caught:
                await publish
            refusals.append(caught.value)
    async with Producer(nsqd_tcp=redesign_cluster.nsqd_tcp[:1]) as producer:
        with pytest.raises(ConfigError, match="no deferred publish") as caught:
            await producer.publish_deferred(topic, b"x", 1.0)
        refusals.append(caught.value)
    assert [err.unsent for err in refusals] == [True] * 4
    assert _stored(original_cluster.nsqds[0].http_address, topic) == 0


async def test_nsqd_killed_and_restarted_mid_publish(start_cluster: StartCluster) -> None:
    """Every publish that returned OK is on the server afterwards; every failure raised."""
    c = start_cluster("original", nsqd_args=["--mem-queue-size=0", "--sync-every=1"])
    node = c.nsqds[0]
    topic = unique("fault")
    acked: list[int] = []
    failed: list[int] = []
    policy = ProducerOptions(max_attempts=40, retry_timeout=20.0, backoff=0.05, max_backoff=0.5)

    async def publisher(producer: Producer) -> None:
        for i in range(600):
            try:
                await producer.publish(topic, str(i).encode())
                acked.append(i)
            except PublishError:
                failed.append(i)
            await asyncio.sleep(0.002)

    async with Producer(nsqd_tcp=c.nsqd_tcp, options=policy) as producer:
        task = asyncio.create_task(publisher(producer))
        while len(acked) < 150:
            await asyncio.sleep(0.01)
        process.kill_hard(node)
        await asyncio.sleep(0.7)
        await asyncio.to_thread(c.restart, node)
        await task
    assert acked and len(acked) + len(failed) == 600
    stored = await read_back(c.nsqd_tcp[0], topic, len(acked), timeout=30)
    stored_ids = {int(m.body) for m in stored}
    assert set(acked) <= stored_ids
    assert len(acked) > 300, f"too few publishes survived the restart: {len(acked)}"


# ---------------------------------------------------------------- redesign


async def test_traced_publish_and_sharding_on_partitions(
    redesign_cluster: cluster.Cluster,
) -> None:
    topic = unique("traced")
    admin.create_topic(redesign_cluster.lookupd_http, topic, partitions=2, replicas=1)
    # A youzan channel starts at the end of the topic: create it before publishing.
    lookupd = redesign_cluster.lookupd_http[0]
    made = cli("channel", "create", topic, "readback", "--lookupd", lookupd)
    assert made.returncode == 0, made.stderr
    async with Producer(lookupd_http=redesign_cluster.lookupd_http) as producer:
        receipt = await producer.publish_traced(topic, b"traced-body", 424242, partition=1)
        assert receipt.trace_id == 424242 and receipt.partition == 1
        assert receipt.internal_id >> 50 == 1  # partition p ids start at p << 50
        keys = [f"k{i}" for i in range(20)]
        for key in keys:
            await producer.publish(topic, key.encode(), shard_key=key)
        topo = await producer.topology(topic)
    expected: dict[int, list[bytes]] = {0: [], 1: []}
    for key in keys:
        expected[murmur3_32(key) % 2].append(key.encode())
    for part in (0, 1):
        leader = topo.partitions[part]
        extra = 1 if part == 1 else 0
        got = await read_back(
            str(leader.tcp_address), topic, len(expected[part]) + extra, partition=part
        )
        bodies = [m.body for m in got if m.body != b"traced-body"]
        assert sorted(bodies) == sorted(expected[part])
        assert all(m.internal_id is not None and m.internal_id >> 50 == part for m in got)


async def test_sharded_publish_to_missing_partition_fails(
    redesign_cluster: cluster.Cluster,
) -> None:
    topic = unique("nopart")
    admin.create_topic(redesign_cluster.lookupd_http, topic, partitions=2, replicas=1)
    policy = ProducerOptions(max_attempts=2, retry_timeout=2.0)
    async with Producer(lookupd_http=redesign_cluster.lookupd_http, options=policy) as producer:
        with pytest.raises(PartitionUnavailableError):
            await producer.publish(topic, b"x", partition=7)


async def test_publish_to_a_missing_redesign_topic_is_not_found(
    redesign_cluster: cluster.Cluster,
) -> None:
    """Found missing by the lookupds or by nsqd's E_TOPIC_NOT_EXIST: one error, caught as
    the NotFoundError it is, after the retries a just-created topic would get."""
    topic = unique("missing")
    policy = ProducerOptions(max_attempts=2, backoff=0.05)
    async with Producer(lookupd_http=redesign_cluster.lookupd_http, options=policy) as producer:
        with pytest.raises(
            nsqctl.NotFoundError, match="does not exist on any lookupd"
        ) as by_lookup:
            await producer.publish(topic, b"x")
    async with Producer(nsqd_tcp=redesign_cluster.nsqd_tcp[:1], options=policy) as producer:
        with pytest.raises(nsqctl.NotFoundError, match="does not exist on this nsqd") as by_nsqd:
            await producer.publish(topic, b"x")
    for caught in (by_lookup, by_nsqd):
        assert isinstance(caught.value, nsqctl.TopicNotFoundError)
        assert caught.value.topic == topic
    assert isinstance(by_nsqd.value, nsqctl.ServerError)
    assert by_nsqd.value.code == "E_TOPIC_NOT_EXIST"


async def test_a_text_body_is_refused_before_anything_is_sent(
    original_cluster: cluster.Cluster,
) -> None:
    topic = unique("textbody")
    async with Producer(nsqd_tcp=original_cluster.nsqd_tcp[:1]) as producer:
        with pytest.raises(nsqctl.ConfigError, match=r"body must be bytes.*got str") as caught:
            await producer.publish(topic, "text")  # type: ignore[arg-type]
        await producer.publish(topic, b"bytes")  # the producer is still usable
    assert caught.value.setting == "body"
    assert _stored(original_cluster.nsqd_http[0], topic) == 1  # the text was not stored
