"""Helpers for tests against real redesign (youzan) clusters.

* topics made together (nsqlookupd enables writes on new topics in one periodic check, so
  several topics created at once cost about as much as one);
* what each partition's leader reports in ``/stats``;
* reading a topic back with the library consumer;
* running youzan's Go tools and parsing ``nsq_tail`` output (it prefixes every message
  with the local time and ": ").
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from nsqctl import admin
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.stats import read_nsqd_stats
from nsqctl.stats.model import ChannelStats, TopicPartitionStats
from tests.helpers.cli import NSQCTL, clean_env, invoke

# re-exported for the tests that import them from here; each is defined with the helpers
# of its kind
from tests.helpers.names import unique as unique
from tests.helpers.wait import eventually as eventually

TIMEOUT = 60.0


@dataclass(frozen=True)
class TopicSpec:
    partitions: int = 2
    replicas: int = 1
    ordered: bool = False
    ext: bool = False


async def create_topics(
    lookupd: Sequence[str], specs: Mapping[str, TopicSpec], channels: Sequence[str] = ("c",)
) -> None:
    """Create every topic at once (each waits until writable), then ``channels`` on each
    (before anything is published: a redesign channel made later starts at the end)."""

    async def one(topic: str, spec: TopicSpec) -> None:
        report = await admin.create_topic_async(
            lookupd,
            topic,
            partitions=spec.partitions,
            replicas=spec.replicas,
            ordered=spec.ordered,
            ext=spec.ext,
        )
        report.raise_for_failures()
        assert not report.warnings, report.warnings
        for channel in channels:
            placement, stages = await admin.prepare(
                "channel", topic, lookupd, (), action="create", channel=channel
            )
            created = await admin.run_plan("channel create", placement, stages, channel=channel)
            created.raise_for_failures()
            assert not created.warnings, created.warnings  # on every replica too

    await asyncio.gather(*(one(t, s) for t, s in specs.items()))


async def subscribe_ordered_once(c: Cluster, topic: str, channel: str = "c") -> None:
    """Subscribe ``channel`` ordered on every partition, then close. youzan resets a
    channel's reader at its first ordered subscription and resends what was in flight
    (a second copy; a REQ or FIN of the first then fails): done before anything is
    published, the reset finds nothing in flight."""
    consumer = Consumer(
        topic,
        channel,
        lambda m: None,
        lookupd_http=c.lookupd_http,
        options=ConsumerOptions(ordered=True),
    )
    await consumer.start()
    await consumer.stop()


def nsqd_stats(http: str, topic: str) -> list[TopicPartitionStats]:
    """One nsqd's copies of ``topic`` (one per partition it holds), from its ``/stats``."""
    return [t for t in read_nsqd_stats(http, topic=topic).topics if t.topic == topic]


def leader_stats(c: Cluster, topic: str) -> dict[int, TopicPartitionStats]:
    """partition → its leader's copy (``node``: the leader's HTTP address), from every
    running nsqd."""
    found: dict[int, TopicPartitionStats] = {}
    live = [n.http_address for n in c.nsqds if process.pid_runs(n.pid, n.exe)]  # not killed
    for http in live:
        for t in nsqd_stats(http, topic):
            if t.is_leader and t.partition is not None:
                assert t.partition not in found, f"two leaders for {topic} partition {t.partition}"
                found[t.partition] = t
    return dict(sorted(found.items()))


def message_counts(c: Cluster, topic: str) -> dict[int, int]:
    """partition → messages stored, as its leader counts them."""
    return {p: t.message_count for p, t in leader_stats(c, topic).items()}


def channel_stats(c: Cluster, topic: str, channel: str) -> dict[int, ChannelStats]:
    """partition → the leader's stats of ``channel`` (partitions without it are left out)."""
    out: dict[int, ChannelStats] = {}
    for part, t in leader_stats(c, topic).items():
        found = t.channel(channel)
        if found is not None:
            out[part] = found
    return out


def channel_depths(c: Cluster, topic: str, channel: str) -> dict[int, int]:
    return {p: ch.depth for p, ch in channel_stats(c, topic, channel).items()}


OPTION_FIELDS = frozenset(f.name for f in dataclasses.fields(ConsumerOptions))


async def read_messages(
    lookupd: Sequence[str],
    topic: str,
    channel: str,
    count: int,
    *,
    settle: float = 0.5,
    timeout: float = TIMEOUT,
    **consumer_kwargs: Any,
) -> list[Message]:
    """Consume until ``count`` messages arrived (FINing each), then ``settle`` seconds more
    so that an extra (a duplicate, a stray) would be seen too."""
    got: list[Message] = []
    done = asyncio.Event()

    def handle(msg: Message) -> None:
        got.append(msg)
        if len(got) >= count:
            done.set()

    # the options' fields go to ConsumerOptions, the rest (config, nsqd_tcp...) to Consumer
    settings = {"max_in_flight": 100} | {
        k: consumer_kwargs.pop(k) for k in OPTION_FIELDS & consumer_kwargs.keys()
    }
    consumer = Consumer(
        topic,
        channel,
        handle,
        lookupd_http=list(lookupd),
        options=ConsumerOptions(**settings),
        **consumer_kwargs,
    )
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), timeout)
        await asyncio.sleep(settle)
    except TimeoutError:
        per_partition = Counter(m.partition for m in got)
        raise AssertionError(
            f"only {len(got)} of {count} messages of {topic} arrived "
            f"(per partition {dict(per_partition)}; consumer {consumer.stats})"
        ) from None
    finally:
        await consumer.stop()
    return got


def by_partition(messages: Sequence[Message]) -> dict[int, list[Message]]:
    """partition → its messages in storage order (internal ids grow within a partition)."""
    out: dict[int, list[Message]] = {}
    for msg in messages:
        assert msg.partition is not None and msg.internal_id is not None
        out.setdefault(msg.partition, []).append(msg)
    return {p: sorted(ms, key=lambda m: m.internal_id or 0) for p, ms in sorted(out.items())}


def run_process(
    argv: Sequence[str | bytes], *, stdin: bytes = b"", timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[bytes]:
    """Run to completion in a clean environment (an overrun kills it: our own child)."""
    return subprocess.run(
        list(argv), input=stdin, capture_output=True, env=clean_env(), timeout=timeout, check=False
    )


def check(proc: subprocess.CompletedProcess[bytes]) -> bytes:
    """stdout of a process that must have exited 0."""
    assert proc.returncode == 0, (proc.args, proc.stderr.decode(errors="replace")[-2000:])
    return proc.stdout


def nsqctl(*args: str, stdin: bytes = b"", timeout: float = TIMEOUT) -> bytes:
    """stdout of ``nsqctl ARGS``, which must exit 0."""
    return check(run_process([NSQCTL, *args], stdin=stdin, timeout=timeout))


def run_ok(*args: str) -> str:
    """``nsqctl ARGS`` in-process (quicker than a subprocess); its stdout, after exit 0."""
    result = invoke(*args)
    assert result.exit_code == 0, (args, result.output, result.exception)
    return str(result.stdout)


def nsqctl_all(*commands: Sequence[str]) -> list[bytes]:
    """Run several ``nsqctl`` commands at once (e.g. topic creations, which each wait for
    the same lookupd check); the stdout of each, all of which must exit 0."""
    with ThreadPoolExecutor(len(commands)) as pool:
        return list(pool.map(lambda args: nsqctl(*args), commands))


def tail_json(lookupd: Sequence[str], topic: str, count: int, *args: str) -> list[dict[str, Any]]:
    """``nsqctl tail TOPIC -n COUNT --format json ARGS``: one record per message."""
    out = nsqctl(
        "tail", topic, "-n", str(count), "--format", "json", "--lookupd", lookupd[0], *args
    )
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == count, records
    return records


# youzan nsq_tail writes ``time.Now().Local().String() + ": " + body + "\n"`` per message,
# e.g. "2026-11-22 23:45:31.924628213 +0000 UTC: ". Bodies may hold newlines: a record
# starts only where such a time stamp starts a line.
_YOUZAN_TAIL_PREFIX = re.compile(
    rb"(?:\A|(?<=\n))\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? [+-]\d{4} [A-Za-z0-9+-]+: "
)


def parse_youzan_tail(output: bytes) -> list[bytes]:
    """The message bodies in youzan ``nsq_tail`` output, in the order printed."""
    marks = list(_YOUZAN_TAIL_PREFIX.finditer(output))
    assert output.endswith(b"\n") and marks and marks[0].start() == 0, output[:200]
    ends = [m.start() for m in marks[1:]] + [len(output)]
    return [output[m.end() : end - 1] for m, end in zip(marks, ends, strict=True)]
