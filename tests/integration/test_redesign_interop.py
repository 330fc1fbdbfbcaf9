"""Interop with youzan's own Go tools on 2-partition topics, byte for byte, both ways:

* ``nsqctl pub`` → youzan ``nsq_tail`` (plain, and ``-ordered`` on an ordered topic);
* youzan ``to_nsq`` → ``nsqctl tail`` (raw lines, and ``--format json`` for bodies that
  hold newlines).

youzan ``nsq_tail`` prints ``<local time>: <body>\\n`` per message; a body may hold
newlines, since a record starts only where a time stamp starts a line. ``to_nsq`` splits
stdin on a one-byte ``-delimiter`` and strips it, so its bodies hold every byte value but
that one. Counts are also checked per partition in the leaders' ``/stats``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from nsqctl.message import body_from_json
from nsqctl.servers import build
from nsqctl.servers.cluster import Cluster
from tests.helpers.redesign import (
    TopicSpec,
    channel_stats,
    check,
    create_topics,
    message_counts,
    nsqctl,
    parse_youzan_tail,
    run_process,
    subscribe_ordered_once,
    tail_json,
    unique,
)

pytestmark = pytest.mark.redesign

ALL_BYTES = bytes(range(256))


def without(byte: int, salt: int) -> bytes:
    """Every byte value but ``byte``, rotated by ``salt`` so bodies differ in more than a
    prefix."""
    rest = bytes(b for b in ALL_BYTES if b != byte)
    return rest[salt % len(rest) :] + rest[: salt % len(rest)]


@dataclass(frozen=True)
class Topics:
    to_tail: str  # nsqctl pub -> nsq_tail
    to_tail_ordered: str  # nsqctl pub -> nsq_tail -ordered
    from_lines: str  # to_nsq (newline) -> nsqctl tail
    from_bytes: str  # to_nsq (0xff) -> nsqctl tail --format json


@pytest.fixture(scope="module")
def topics(redesign_cluster: Cluster) -> Topics:
    names = Topics(unique("io-tail"), unique("io-ord"), unique("io-lines"), unique("io-bytes"))
    specs = {
        names.to_tail: TopicSpec(),
        names.to_tail_ordered: TopicSpec(ordered=True),
        names.from_lines: TopicSpec(),
        names.from_bytes: TopicSpec(),
    }
    asyncio.run(create_topics(redesign_cluster.lookupd_http, specs))
    return names


@pytest.fixture(scope="module")
def youzan_bins(redesign_bins: Path) -> Path:
    """youzan's Go tools, built beside its servers."""
    assert build.bin_dir("redesign") == redesign_bins
    return redesign_bins


def youzan_tail(bins: Path, c: Cluster, topic: str, count: int, *flags: str) -> list[bytes]:
    out = check(
        run_process(
            [
                str(bins / "nsq_tail"),
                f"-topic={topic}",
                "-channel=c",
                f"-lookupd-http-address={c.lookupd_http[0]}",
                f"-n={count}",
                *flags,
            ]
        )
    )
    return parse_youzan_tail(out)


def to_nsq(bins: Path, c: Cluster, topic: str, data: bytes, *flags: str | bytes) -> None:
    check(
        run_process(
            [
                str(bins / "to_nsq"),
                f"-topic={topic}",
                f"-lookupd-http-address={c.lookupd_http[0]}",
                *flags,
            ],
            stdin=data,
        )
    )


def test_nsqctl_pub_read_by_youzan_nsq_tail(
    redesign_cluster: Cluster, topics: Topics, youzan_bins: Path, tmp_path: Path
) -> None:
    c, topic = redesign_cluster, topics.to_tail
    lk = ["--lookupd", c.lookupd_http[0]]
    # Split on NUL: the bodies hold every other byte value, newlines included.
    split = [b"nul-split-%02d:" % i + without(0x00, 37 * i) for i in range(20)]
    nsqctl(
        "pub",
        topic,
        "--delimiter",
        "\\x00",
        "--batch",
        "3",
        *lk,
        "-q",
        stdin=b"\x00".join(split) + b"\x00",
    )
    whole = [ALL_BYTES, ALL_BYTES[::-1] * 3, b"\n\n" + ALL_BYTES + b"\n"]
    files = []
    for i, body in enumerate(whole):
        files.append(tmp_path / f"body{i}.bin")
        files[-1].write_bytes(body)
    nsqctl("pub", topic, "--binary", *map(str, files), *lk, "-q")
    counts = message_counts(c, topic)
    assert sum(counts.values()) == 23 and min(counts.values()) >= 3, counts

    got = youzan_tail(youzan_bins, c, topic, 23)
    assert Counter(got) == Counter(split + whole)


def test_nsqctl_pub_read_by_youzan_nsq_tail_ordered(
    redesign_cluster: Cluster, topics: Topics, youzan_bins: Path
) -> None:
    c, topic = redesign_cluster, topics.to_tail_ordered
    lk = ["--lookupd", c.lookupd_http[0]]
    # youzan resets a channel's reader on its first ordered subscription, which can deliver
    # a message twice; subscribe ordered once before publishing so nsq_tail sees no reset.
    asyncio.run(subscribe_ordered_once(c, topic))
    bodies = {
        part: [b"p%d-%02d:" % (part, i) + without(0x0A, 11 * i + part) for i in range(15)]
        for part in (0, 1)
    }
    for part, items in bodies.items():
        nsqctl(
            "pub",
            topic,
            "--partition",
            str(part),
            "--batch",
            "4",
            *lk,
            "-q",
            stdin=b"\n".join(items) + b"\n",
        )
    assert message_counts(c, topic) == {0: 15, 1: 15}

    got = youzan_tail(youzan_bins, c, topic, 30, "-ordered")
    assert Counter(got) == Counter(bodies[0] + bodies[1])
    for part, items in bodies.items():  # each partition in publish order
        assert [b for b in got if b.startswith(b"p%d-" % part)] == items


def test_youzan_to_nsq_lines_read_by_nsqctl_tail(
    redesign_cluster: Cluster, topics: Topics, youzan_bins: Path
) -> None:
    c, topic = redesign_cluster, topics.from_lines
    bodies = [b"line-%02d:" % i + without(0x0A, 13 * i) for i in range(30)]
    to_nsq(youzan_bins, c, topic, b"".join(b + b"\n" for b in bodies))
    assert sum(message_counts(c, topic).values()) == 30

    out = nsqctl("tail", topic, "-c", "c", "-n", "30", "--lookupd", c.lookupd_http[0])
    assert out.endswith(b"\n")
    assert Counter(out[:-1].split(b"\n")) == Counter(bodies)
    stats = channel_stats(c, topic, "c").values()  # everything printed was FINed
    assert all((ch.depth, ch.in_flight_count) == (0, 0) for ch in stats), stats


def test_youzan_to_nsq_binary_delimiter_read_by_nsqctl_tail_json(
    redesign_cluster: Cluster, topics: Topics, youzan_bins: Path
) -> None:
    c, topic = redesign_cluster, topics.from_bytes
    bodies = [b"bytes-%02d\n" % i + without(0xFF, 29 * i) for i in range(25)]
    to_nsq(youzan_bins, c, topic, b"".join(b + b"\xff" for b in bodies), b"-delimiter=\xff")
    assert sum(message_counts(c, topic).values()) == 25

    records = tail_json(c.lookupd_http, topic, 25, "-c", "c")
    assert Counter(body_from_json(r) for r in records) == Counter(bodies)
    assert all(r["body_encoding"] == "base64" for r in records)  # not UTF-8: exact bytes
    assert {r["partition"] for r in records} <= {0, 1}
    assert all(r["internal_id"] >> 50 == r["partition"] for r in records)
