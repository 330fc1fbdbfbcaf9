"""The commands that read a channel's messages or figures say which partition they could
not read when one has no leader, on real servers: they never show the partitions they
reached as if they were the whole channel.

One private cluster (3 nsqd) serves the module: a topic of 3 partitions with 1 replica,
so each partition lives on one nsqd, with messages on each. The nsqd holding partition 1
is killed with -9: partition 1 has no live copy. ``peek`` shows the others and says
partition 1 was not read (and refuses ``--partition 1`` at runtime, rather than call the
partition nonexistent); ``stat TOPIC CHANNEL`` lists the channel's partition 1 as unknown
and says it has no leader; ``tail`` waits for partition 1's leader as it waits after a
failover, saying so, and gives up after the failover window instead of waiting silently
forever. Last, partition 2's nsqd is stopped (SIGSTOP) while nsqlookupd still lists it:
``peek`` shows partition 0 and names both partitions it could not read. After that, the
nsqd holding a second, one-partition topic is killed too (if it was not the first): a
consumer of that topic, which nsqlookupd then lists with no partition and no producer,
gives up after its failover window. A history ``replay`` fails naming partition 1 rather
than report the others' messages as the whole history.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import pytest

from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.errors import FailoverTimeoutError
from nsqctl.producer import Producer
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import assert_one_line_error, cli, run_main
from tests.helpers.clusters import running_cluster
from tests.helpers.degraded import ok
from tests.helpers.hang import stopped
from tests.helpers.redesign import TopicSpec, create_topics, eventually, leader_stats, unique

pytestmark = pytest.mark.redesign

PER_PARTITION = 3


@dataclass
class Split:
    c: Cluster
    topic: str  # 3 partitions, 1 replica: partition 1 has no live copy
    whole: str  # 1 partition, 1 replica: leaderless in the last test

    @property
    def lookupd(self) -> list[str]:
        return ["--lookupd", self.c.lookupd_http[0]]


async def _fill(c: Cluster, topic: str) -> None:
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        for partition in (0, 1, 2):
            for n in range(PER_PARTITION):
                await producer.publish(topic, f"p{partition}-{n}".encode(), partition=partition)


def _only_partition_0_led(s: Split) -> bool:
    info = json.loads(ok("lookup", s.topic, "--json", *s.lookupd).stdout)
    return [p["leader_http"] is not None for p in info["partitions"]] == [True, False, True]


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Split]:
    for c in running_cluster("redesign", tmp_path_factory.mktemp("reads"), nsqd=3):
        topic, whole = unique("split-reads"), unique("unled")
        specs = {topic: TopicSpec(partitions=3), whole: TopicSpec(partitions=1)}
        asyncio.run(create_topics(c.lookupd_http, specs))
        asyncio.run(_fill(c, topic))
        victim_http = leader_stats(c, topic)[1].node
        process.kill_hard(next(n for n in c.nsqds if n.http_address == victim_http))
        s = Split(c, topic, whole)
        eventually(partial(_only_partition_0_led, s), 60, "the lookup to drop leader 1")
        yield s


def test_peek_says_which_partition_it_could_not_read(split: Split) -> None:
    s = split
    shown = run_main("peek", s.topic, "c", "--format", "json", *s.lookupd)
    assert shown.returncode == 0, shown.stderr
    bodies = [json.loads(line)["body"] for line in shown.stdout.splitlines()]
    assert sorted(bodies) == [f"p{p}-{n}" for p in (0, 2) for n in range(PER_PARTITION)]
    [warning] = [line for line in shown.stderr.splitlines() if "not read" in line]
    assert f"{s.topic} partition(s) 1 not read: no leader" in warning
    # the partition exists: a runtime failure (1), not a partition that is not there (2)
    line = assert_one_line_error(run_main("peek", s.topic, "c", "--partition", "1", *s.lookupd), 1)
    assert "partition 1 has no leader" in line and "no partition 1" not in line
    beyond = run_main("peek", s.topic, "c", "--partition", "5", *s.lookupd)
    assert "(partitions: [0, 1, 2])" in assert_one_line_error(beyond, 2)


def test_stat_of_a_channel_lists_the_partition_it_cannot_see(split: Split) -> None:
    s = split
    text = run_main("stat", s.topic, "c", "-n", "1", *s.lookupd)
    assert text.returncode == 0, text.stderr
    assert f"{s.topic}#1 has no leader (no live copy" in text.stderr
    [unknown] = [line for line in text.stdout.splitlines() if f"{s.topic}/c#1" in line]
    assert unknown.split()[2] == "?", unknown  # its depth: unknown, not 0 and not left out
    # the channel's own row sums the partitions read: it says it misses one
    [whole] = [line for line in text.stdout.splitlines() if line.split()[1:2] == [f"{s.topic}/c"]]
    assert whole.endswith("PARTIAL (1 partition unread)"), whole
    [record] = [
        json.loads(line)
        for line in ok("stat", s.topic, "c", "--json", "-n", "1", *s.lookupd).stdout.splitlines()
    ]
    parts = {r["partition"]: r for r in record["rows"] if r["scope"] == "channel_partition"}
    assert sorted(parts) == [0, 1, 2]
    assert parts[0]["depth"] == PER_PARTITION and parts[0]["live"] is True
    assert parts[1]["depth"] is None and parts[1]["live"] is False and parts[1]["node"] is None


def test_tail_waits_for_the_leaderless_partition_then_gives_up(split: Split) -> None:
    s = split
    # a history read (its own temporary channel): channel c stays for the next test
    tail = cli("tail", s.topic, "--from-start", "-e", "--failover-window", "6", *s.lookupd)
    assert tail.returncode == 1, tail.stderr
    # the others are read meanwhile; partition 1 is said to be waited for, then given up
    expected = [f"p{p}-{n}" for p in (0, 2) for n in range(PER_PARTITION)]
    assert sorted(tail.stdout.splitlines()) == expected
    lines = [line for line in tail.stderr.splitlines() if line.strip()]
    assert any(f"waiting for a leader for {s.topic}/1" in line for line in lines), lines
    assert lines[-1].startswith(f"nsqctl: error: no leader for {s.topic}/1 within the failover")
    assert "Traceback" not in tail.stderr


@pytest.mark.spark  # replay needs the archive extra (pyarrow)
def test_a_history_replay_missing_a_partition_fails_naming_it(split: Split) -> None:
    s = split
    # a dry run reads as a replay does (its own temporary channel) and publishes nothing
    replay = cli(
        "replay", s.topic, "--from-offset", "0", "--to-topic", "nowhere", "--dry-run",
        "--failover-window", "3", *s.lookupd,
    )  # fmt: skip
    assert replay.returncode == 1, (replay.stdout, replay.stderr)
    assert "Traceback" not in replay.stderr and "would replay" not in replay.stdout
    lines = [line for line in replay.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith(f"nsqctl: error: no leader for {s.topic}/1 within"), lines
    # the others were read meanwhile, and it says how far it got
    assert f"note: {2 * PER_PARTITION} message(s) of {s.topic} history were read" in lines[-2]
    # per partition: where the two it read got to, and the one it could not reach
    resume = re.search(
        r"--partition 0 --from-offset (\d+), --partition 2 --from-offset (\d+)", lines[-2]
    )
    assert resume is not None and all(int(n) > 0 for n in resume.groups()), lines[-2]
    assert "any other partition from the start given (partition(s) 1 out of reach)" in lines[-2]
    # its channel is left, and the note says when it can be deleted, not a delete that
    # would be refused now
    assert "partition(s) 1 have no leader now" in replay.stderr, replay.stderr
    assert "once partition(s) 1 have a leader again" in replay.stderr, replay.stderr


async def test_peek_names_a_partition_whose_leader_does_not_answer(split: Split) -> None:
    """Partition 2's nsqd stopped: nsqlookupd still lists it as the leader for some
    seconds, and its /stats does not answer. The last test: the node stays stopped until
    the peek is done."""
    s = split
    [hung] = [n for n in s.c.nsqds if n.http_address == leader_stats(s.c, s.topic)[2].node]
    async with stopped(hung):
        shown = await asyncio.to_thread(
            run_main, "peek", s.topic, "c", "--format", "json", *s.lookupd
        )
    assert shown.returncode == 0, shown.stderr
    bodies = [json.loads(line)["body"] for line in shown.stdout.splitlines()]
    assert bodies == [f"p0-{n}" for n in range(PER_PARTITION)]
    warnings = [line for line in shown.stderr.splitlines() if "not read" in line]
    assert any(f"{s.topic} partition(s) 1 not read: no leader" in w for w in warnings), warnings
    assert any(
        f"{s.topic} partition 2 not read: its leader did not answer" in w and hung.http_address in w
        for w in warnings
    ), warnings


def _unled(s: Split) -> bool:
    info = json.loads(ok("lookup", s.whole, "--json", *s.lookupd).stdout)
    return all(p["leader_http"] is None for p in info["partitions"])


async def _consume_until_it_fails(s: Split) -> Consumer:
    options = ConsumerOptions(failover_window=3.0)
    consumer = Consumer(
        s.whole, "c", lambda msg: None, lookupd_http=s.c.lookupd_http, options=options
    )
    try:
        async with asyncio.timeout(30):  # far beyond the window: the wait that never ends
            with pytest.raises(FailoverTimeoutError):
                await consumer.run_forever()
    finally:
        await consumer.close()
    return consumer


def test_a_consumer_of_a_topic_with_no_leader_at_all_gives_up_after_the_failover_window(
    split: Split,
) -> None:
    """Every partition leaderless: youzan's nsqlookupd answers with the topic's meta and
    neither partitions nor producers. The consumer waits for a leader as after a failover
    and gives up after the window, rather than wait silently forever. Kills a node: last."""
    s = split
    for held in leader_stats(s.c, s.whole).values():  # none if the node killed first held it
        process.kill_hard(next(n for n in s.c.nsqds if n.http_address == held.node))
    eventually(partial(_unled, s), 60, f"the lookup to drop {s.whole}'s leader")
    consumer = asyncio.run(_consume_until_it_fails(s))
    assert isinstance(consumer.error, FailoverTimeoutError)
    assert "no leader for" in str(consumer.error), consumer.error
