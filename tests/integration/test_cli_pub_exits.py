"""How ``nsqctl pub`` ends when its surroundings are unusual: stderr or stdin closed by
the shell, SIGINT mid-stream, a partition number no topic can have. Real subprocesses
against the real session clusters; what was stored is read from nsqd's ``/stats``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time

import httpx
import pytest

from nsqctl.errors import ConfigError
from nsqctl.producer import Producer, ProducerOptions
from nsqctl.servers import cluster, process
from nsqctl.stats import read_nsqd_stats
from tests.helpers.cli import (
    NSQCTL,
    assert_one_line_error,
    clean_env,
    cli,
    pub_process,
    run_cli,
    run_main,
)
from tests.helpers.names import unique
from tests.helpers.redesign import TopicSpec, create_topics, eventually, message_counts
from tests.helpers.sockets import ESTABLISHED, tcp_table


def _stored(http: str, topic: str) -> int:
    """Messages the nsqd took for ``topic`` (original family)."""
    node = read_nsqd_stats(http, topic=topic)
    return sum(t.message_count for t in node.topics if t.topic == topic)


def _shell(redirect: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``nsqctl ARGS REDIRECT`` through sh, so the shell closes the descriptor itself."""
    return subprocess.run(
        ["sh", "-c", f'exec "$@" {redirect}', "sh", NSQCTL, *args],
        capture_output=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )


@pytest.mark.original
def test_pub_with_stderr_closed_still_publishes(original_cluster: cluster.Cluster) -> None:
    """``2>&-``: nowhere to show progress, but the messages go and the exit code says so."""
    c = original_cluster
    topic = unique("noerr")
    proc = _shell("2>&-", "pub", topic, "a", "b", "--nsqd", c.nsqd_tcp[0])
    assert proc.returncode == 0, proc.stdout
    assert _stored(c.nsqd_http[0], topic) == 2
    proc = _shell("2>&-", "pub", topic, "c", "--json", "--nsqd", c.nsqd_tcp[0])
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == {
        "topic": topic,
        "published": 1,
        "unpublished": 0,
        "skipped": 0,
        "too_large": [],
        "lines": {
            "published": [[1, 1]],
            "refused": [],
            "unconfirmed": [],
            "unsent": [],
            "sent_up_to": 1,
        },
        "error": None,
    }
    assert _stored(c.nsqd_http[0], topic) == 3


@pytest.mark.original
def test_pub_with_stdin_closed_is_a_one_line_usage_error(
    original_cluster: cluster.Cluster,
) -> None:
    topic = unique("noin")
    proc = _shell("<&-", "pub", topic, "--nsqd", original_cluster.nsqd_tcp[0])
    line = assert_one_line_error(proc, 2)
    assert "stdin is closed" in line
    proc = _shell("<&-", "pub", topic, "--binary", "--nsqd", original_cluster.nsqd_tcp[0])
    assert "stdin is closed" in assert_one_line_error(proc, 2)
    assert _stored(original_cluster.nsqd_http[0], topic) == 0


@pytest.mark.original
def test_partition_given_an_original_nsqd_is_a_one_line_error_naming_its_family(
    original_cluster: cluster.Cluster,
) -> None:
    """With --nsqd alone the family is known only once connected: an original nsqd has no
    partitions, and the error says so about that nsqd (not about the topic's servers)."""
    c = original_cluster
    topic = unique("origpart")
    line = assert_one_line_error(
        cli("pub", topic, "x", "--partition", "1", "--nsqd", c.nsqd_tcp[0]), 2
    )
    assert f"nsqd {c.nsqd_tcp[0]} is an original NSQ server (no partitions)" in line, line
    assert "do not give a partition" in line
    # refused before it was written: never "sent but not confirmed" (a retry's duplicates)
    assert "(no input line was published; nothing was sent)" in line, line
    assert _stored(c.nsqd_http[0], topic) == 0


def test_partition_of_a_topic_nsqlookupd_lists_on_original_servers_is_refused_unsent(
    original_cluster: cluster.Cluster,
) -> None:
    c = original_cluster
    topic = unique("origpartlk")
    httpx.post(f"http://{c.nsqd_http[0]}/topic/create?topic={topic}", timeout=10)
    url = f"http://{c.lookupd_http[0]}/lookup?topic={topic}"
    eventually(lambda: httpx.get(url, timeout=10).status_code == 200, 30, "the topic listed")
    proc = cli("pub", topic, "x", "y", "--partition", "1", "--lookupd", c.lookupd_http[0])
    line = assert_one_line_error(proc, 2)
    assert f"topic {topic!r} is on original NSQ servers, which have no partitions" in line
    assert line.endswith("(no input line was published; nothing was sent) (flag: --partition)")
    assert _stored(c.nsqd_http[0], topic) == 0


def _publish_through(
    proc: subprocess.Popen[bytes], http: str, topic: str, lines: list[bytes]
) -> None:
    """Write ``lines`` to a running ``pub``'s stdin (left open: it waits for more) and wait
    until nsqd (``http``) stored them all."""
    assert proc.stdin is not None
    proc.stdin.write(b"".join(line + b"\n" for line in lines))
    proc.stdin.flush()

    def published() -> bool:
        if _stored(http, topic) >= len(lines):
            return True
        assert proc.poll() is None, proc.communicate()
        return False

    eventually(published, 30, f"the {len(lines)} lines to be published", step=0.05)


@pytest.mark.original
def test_sigint_says_how_many_messages_were_published(original_cluster: cluster.Cluster) -> None:
    """Ctrl-C while stdin is still open: exit 130, and stderr and the --json report count
    what got OK."""
    c = original_cluster
    topic = unique("sigint")
    proc = pub_process(topic, "--json", "--nsqd", c.nsqd_tcp[0])
    try:
        _publish_through(proc, c.nsqd_http[0], topic, [b"m%d" % i for i in range(25)])
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert b"Traceback" not in err, err
    assert f"interrupted: 25 message(s) published to {topic}".encode() in err, err
    assert json.loads(out) == {
        "topic": topic,
        "published": 25,
        "unpublished": 0,
        "skipped": 0,
        "too_large": [],
        "lines": {
            "published": [[1, 25]],
            "refused": [],
            "unconfirmed": [],
            "unsent": [],
            "sent_up_to": 25,
        },
        "error": "interrupted",
    }


def _unread_on(port: int) -> int:
    """Bytes waiting unread in the receive queues of established TCP connections whose
    local port is ``port`` (a stopped nsqd's, from /proc/net/tcp): what clients sent it."""
    return sum(
        row.receive_queue
        for row in tcp_table()
        if row.state == ESTABLISHED and row.local_port == port
    )


@pytest.mark.original
def test_sigint_counts_the_batch_nsqd_answers_after_it(original_cluster: cluster.Cluster) -> None:
    """Ctrl-C while a batch is on its way: nsqd (stopped when the batch reached it,
    resumed as Ctrl-C lands) stores it and answers within pub's grace, so pub counts it
    published instead of telling the operator to send it again."""
    c = original_cluster
    nsqd = c.nsqds[0]
    topic = unique("grace")
    proc = pub_process(topic, "--json", "--nsqd", nsqd.tcp_address)
    try:
        _publish_through(proc, nsqd.http_address, topic, [b"a%d" % i for i in range(5)])
        process.pause(nsqd)
        try:
            assert proc.stdin is not None
            proc.stdin.write(b"".join(b"b%d\n" % i for i in range(20)))
            proc.stdin.flush()  # stdin stays open: pub waits for more input
            eventually(  # the MPUB is in the stopped nsqd's receive queue
                lambda: _unread_on(nsqd.tcp_port) > 0, 30, "pub sending to the stopped nsqd"
            )
            proc.send_signal(signal.SIGINT)
        finally:
            process.resume(nsqd)
        out, err = proc.communicate(timeout=30)
    finally:
        process.resume(nsqd)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert f"interrupted: 25 message(s) published to {topic}".encode() in err, err
    assert json.loads(out)["published"] == 25 and json.loads(out)["unpublished"] == 0, out
    assert _stored(nsqd.http_address, topic) == 25


@pytest.mark.redesign
def test_negative_partition_is_bad_input_on_the_redesign(
    redesign_cluster: cluster.Cluster,
) -> None:
    """Partition -1 cannot get a leader by waiting: rejected at once, exit 2, as the
    original family rejects any partition."""
    c = redesign_cluster
    topic = unique("negpart")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2)}))
    proc = subprocess.run(
        [NSQCTL, "pub", topic, "x", "--partition", "-1", "--lookupd", c.lookupd_http[0]],
        capture_output=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )
    line = assert_one_line_error(proc, 2)
    assert "'--partition': -1 is not in the range x>=0" in line

    # A long failover window makes waiting obvious: a call that waited for a leader of
    # partition -1 would take the whole window; one rejected as bad input returns at once.
    window = 60.0

    async def library() -> float:
        policy = ProducerOptions(failover_window=window)
        async with Producer(lookupd_http=c.lookupd_http, options=policy) as producer:
            started = time.monotonic()
            with pytest.raises(ConfigError, match="numbered from 0") as err:
                await producer.publish(topic, b"x", partition=-1)
            assert err.value.setting == "partition"
            return time.monotonic() - started

    assert asyncio.run(library()) < window / 4  # no retry budget was spent waiting
    assert message_counts(c, topic) == {0: 0, 1: 0}


@pytest.mark.original
def test_bad_input_mid_stream_still_ends_json_with_the_summary(
    original_cluster: cluster.Cluster,
) -> None:
    """Line 250 is not JSON: the first MPUB (lines 1-200) was stored before it was read,
    and a script reading --json learns so from the summary line, as on any other failure."""
    c = original_cluster
    topic = unique("jsonbad")
    lines = [b"notjson" if i == 250 else b'{"k": %d}' % i for i in range(1, 301)]
    proc = run_cli(
        ["pub", topic, "--shard-field", "k", "--json", "--nsqd", c.nsqd_tcp[0]],
        input=b"\n".join(lines) + b"\n",
    )
    line = assert_one_line_error(proc, 2)
    assert "line 250 is not JSON" in line, line
    summary = json.loads(proc.stdout.decode().splitlines()[-1])
    assert (summary["published"], summary["unpublished"]) == (200, 100), summary
    assert summary["error"] is not None and "line 250 is not JSON" in summary["error"]
    assert _stored(c.nsqd_http[0], topic) == 200


@pytest.mark.original
@pytest.mark.parametrize("field", ["", "user..id", ".id"])
def test_a_shard_field_with_an_empty_name_is_refused_before_anything_is_sent(
    original_cluster: cluster.Cluster, field: str
) -> None:
    """An empty field name (or an empty part of a dotted path) is bad input at once, in a
    line that quotes it, not a per-line error naming an empty field; even a line that has
    an empty key is not published."""
    c = original_cluster
    topic = unique("emptyfield")
    proc = run_main(
        "pub", topic, '{"": "x", "id": 1}', "--shard-field", field, "--nsqd", c.nsqd_tcp[0]
    )
    line = assert_one_line_error(proc, 2)
    assert line == (
        f"nsqctl: error: bad --shard-field {field!r}: name the JSON field holding each "
        "message's shard key (a dotted path for a nested one, e.g. user.id)"
    )
    assert not any(t.topic == topic for t in read_nsqd_stats(c.nsqd_http[0]).topics)
