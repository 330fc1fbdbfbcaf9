"""``nsqctl peek --borrow N`` on the original session cluster (2 nsqd): it lends what
was asked when the channel holds it, and says why when it lends fewer."""

from __future__ import annotations

import json
import uuid

import pytest

from nsqctl.servers.cluster import Cluster
from nsqctl.stats import read_nsqd_stats
from tests.helpers.cli import NSQCTL, cli, invoke, run_text
from tests.helpers.redesign import eventually

pytestmark = pytest.mark.original


def _waiting(c: Cluster, topic: str, nsqds: int = 2) -> int:
    """Messages waiting in channel c over the first ``nsqds`` nsqds, when none is in
    flight or deferred."""
    total = 0
    for http in c.nsqd_http[:nsqds]:
        ch = read_nsqd_stats(http, topic=topic, channel="c").channel(topic, "c")
        if ch is None or ch.in_flight_count or ch.deferred_count:
            return -1
        total += ch.depth
    return total


def test_borrow_lends_what_was_asked_over_two_nsqds_or_says_why_not(
    original_cluster: Cluster,
) -> None:
    """Two on one nsqd, one on the other: `--borrow 3` got one from each (its window of
    3 shared as 1 per nsqd), after waiting 5 s, and said nothing."""
    c = original_cluster
    topic = f"borrow_two-{uuid.uuid4().hex[:8]}"
    for index, bodies in ((0, ["a", "b"]), (1, ["c"])):
        pub = invoke("pub", topic, *bodies, "--nsqd", c.nsqd_tcp[index])
        assert pub.exit_code == 0, pub.output
        made = invoke("channel", "create", topic, "c", "--nsqd-http", c.nsqd_http[index])
        assert made.exit_code == 0, made.output
    # the channel was made after the publish: nsqd hands the topic's queue to it
    eventually(lambda: _waiting(c, topic) == 3, 30, "3 messages waiting in c")
    where = ["--lookupd", c.lookupd_http[0], "--format", "json"]
    proc = cli("peek", topic, "c", "--borrow", "3", *where)
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(line)["body"] for line in proc.stdout.splitlines()) == [
        "a",
        "b",
        "c",
    ]
    assert "borrowed" not in proc.stderr
    eventually(lambda: _waiting(c, topic) == 3, 30, "the borrowed messages back")
    more = cli("peek", topic, "c", "--borrow", "5", *where)
    assert more.returncode == 0, more.stderr
    assert len(more.stdout.splitlines()) == 3
    assert "borrowed 3 of 5 message(s) asked: the channel held only 3" in more.stderr


def test_borrow_into_a_reader_that_goes_away_ends_141_and_gives_every_message_back(
    original_cluster: Cluster,
) -> None:
    """``peek --borrow 60 | head -c 10``: 240 kB of output, far more than a pipe holds, so
    the reader is gone part way through the write. peek must notice (exit 141, as every
    command does, no traceback) rather than lose the rest in a buffer and report success,
    and the borrowed messages must all be back on the channel."""
    c = original_cluster
    topic = f"borrow_gone-{uuid.uuid4().hex[:8]}"
    pub = invoke("pub", topic, *(["x" * 4000] * 60), "--nsqd", c.nsqd_tcp[0])
    assert pub.exit_code == 0, pub.output
    made = invoke("channel", "create", topic, "c", "--nsqd-http", c.nsqd_http[0])
    assert made.exit_code == 0, made.output
    eventually(lambda: _waiting(c, topic, 1) == 60, 30, "60 messages waiting in c")
    peek = f"{NSQCTL} peek {topic} c --borrow 60 --format json --lookupd {c.lookupd_http[0]}"
    proc = run_text(["bash", "-o", "pipefail", "-c", f"{peek} | head -c 10 >/dev/null"])
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr and "error" not in proc.stderr, proc.stderr
    eventually(lambda: _waiting(c, topic, 1) == 60, 30, "the borrowed messages back")


def test_borrow_names_an_nsqd_where_the_channel_is_paused_and_lends_the_rest(
    original_cluster: Cluster,
) -> None:
    """A paused channel delivers nothing: its two messages there are said to be out of
    reach (not blamed on another consumer after a 5 s wait), the other nsqd's are lent."""
    c = original_cluster
    topic = f"borrow_paused-{uuid.uuid4().hex[:8]}"
    for index, bodies in ((0, ["a", "b"]), (1, ["c", "d"])):
        pub = invoke("pub", topic, *bodies, "--nsqd", c.nsqd_tcp[index])
        assert pub.exit_code == 0, pub.output
        made = invoke("channel", "create", topic, "c", "--nsqd-http", c.nsqd_http[index])
        assert made.exit_code == 0, made.output
    eventually(lambda: _waiting(c, topic) == 4, 30, "4 messages waiting in c")
    paused = c.nsqd_http[1]
    pause = invoke("channel", "pause", topic, "c", "--nsqd-http", paused)
    assert pause.exit_code == 0, pause.output
    where = ["--lookupd", c.lookupd_http[0], "--format", "json"]
    proc = cli("peek", topic, "c", "--borrow", "10", *where)
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(line)["body"] for line in proc.stdout.splitlines()) == ["a", "b"]
    said = f"{topic}/c is paused on nsqd {paused} (2 message(s) waiting)"
    assert said in proc.stderr and "not borrowed" in proc.stderr, proc.stderr
    eventually(lambda: _waiting(c, topic) == 4, 30, "the borrowed messages back")
    held = read_nsqd_stats(paused, topic=topic, channel="c").channel(topic, "c")
    assert held is not None and held.paused and held.depth == 2
