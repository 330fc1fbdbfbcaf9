"""A history replay (``--from-offset``) on real youzan servers honours ``--rate``, and the
per-partition offsets it reports are where a replay of each partition goes on from
without repeating a message or missing one."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from nsqctl.message import body_from_json
from nsqctl.servers.cluster import Cluster
from tests.helpers.redesign import (
    TopicSpec,
    create_topics,
    message_counts,
    nsqctl,
    tail_json,
    unique,
)

# replay needs the archive extra (pyarrow): the spark step, which has it, runs this
pytestmark = [pytest.mark.redesign, pytest.mark.spark]

TOTAL = 30
FIRST = 12  # replayed at the rate; the rest by partition, from the offsets reported
RATE = 5  # at most 1 message at once, then 1 per 0.2 s: FIRST take ≥ (FIRST - 1) / RATE s


def test_rate_holds_a_history_replay_back_and_its_offsets_resume_it_exactly(
    redesign_cluster: Cluster,
) -> None:
    c = redesign_cluster
    lk = ["--lookupd", c.lookupd_http[0]]
    source, target = unique("hist-rate-src"), unique("hist-rate-dst")
    specs = {source: TopicSpec(partitions=2), target: TopicSpec(partitions=2)}
    asyncio.run(create_topics(c.lookupd_http, specs))
    bodies = [b"m-%03d" % i for i in range(TOTAL)]
    nsqctl("pub", source, "--batch", "5", *lk, "-q", stdin=b"\n".join(bodies) + b"\n")
    stored = tail_json(c.lookupd_http, source, TOTAL, "--from-start")

    began = time.monotonic()
    first = nsqctl(
        "replay", source, "--from-offset", "0", "--to-topic", target, "-n", str(FIRST),
        "--rate", str(RATE), "--json", *lk,
    )  # fmt: skip
    elapsed = time.monotonic() - began
    report = json.loads(first)
    assert report["published"] == FIRST, report
    # a lower bound only, which no machine beats: the replay is held back, not timed
    assert elapsed >= (FIRST - 1) / RATE, elapsed

    resume = {int(p): n for p, n in report["details"]["resume"].items()}
    for partition in {r["partition"] for r in stored}:
        start = resume.get(partition, 0)  # a partition with nothing replayed: from the start
        left = [r for r in stored if r["partition"] == partition and r["offset"] >= start]
        if left:
            nsqctl(
                "replay", source, "--from-offset", str(start), "--partition", str(partition),
                "--to-topic", target, "-n", str(len(left)), *lk,
            )  # fmt: skip
    # every message once: none repeated at a resume offset, none skipped past
    assert sum(message_counts(c, target).values()) == TOTAL
    copied = tail_json(c.lookupd_http, target, TOTAL, "--from-start")
    assert sorted(body_from_json(r) for r in copied) == bodies
