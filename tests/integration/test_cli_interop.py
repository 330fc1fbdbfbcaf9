"""Interop with nsq's own Go tools, byte for byte, through the real session cluster.

* ``nsqctl pub`` (lines on stdin, and ``--binary FILE...`` with multi-line and arbitrary
  binary bodies) is read back by Go ``nsq_tail``;
* Go ``to_nsq`` (lines on stdin) is read back by ``nsqctl tail``.

Both tails print ``body + "\\n"`` per message. Line bodies never contain a newline, so
the output splits back into bodies exactly; multi-line bodies are compared as a whole
(the output must be the concatenation of ``body + "\\n"`` in some delivery order).
Counts are checked against nsqd ``/stats`` too. Every process is a real subprocess with
a timeout, killed by its PID if it overruns; every topic is unique and deleted afterwards.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from nsqctl.servers import cluster
from nsqctl.stats import read_nsqd_stats
from nsqctl.stats.model import ChannelStats
from tests.helpers.cli import NSQCTL, clean_env
from tests.helpers.names import unique

pytestmark = pytest.mark.original

TIMEOUT = 60.0


@contextlib.contextmanager
def _topic_on(c: cluster.Cluster, prefix: str, channel: str) -> Iterator[str]:
    """A fresh topic with a durable channel on nsqd 0 (so messages published before the
    reader connects are kept for it); deleted afterwards."""
    topic = unique(prefix)
    http = c.nsqd_http[0]
    httpx.post(
        f"http://{http}/topic/create", params={"topic": topic}, timeout=10
    ).raise_for_status()
    httpx.post(
        f"http://{http}/channel/create", params={"topic": topic, "channel": channel}, timeout=10
    ).raise_for_status()
    try:
        yield topic
    finally:
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(f"http://{http}/topic/delete", params={"topic": topic}, timeout=10)


def _run(
    argv: Sequence[str], *, stdin: bytes = b"", timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[bytes]:
    """Run to completion with a timeout; on overrun kill it (by PID, our own child)."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def _channel_stats(c: cluster.Cluster, topic: str, channel: str) -> ChannelStats:
    node = read_nsqd_stats(c.nsqd_http[0], topic=topic, channel=channel)
    found = node.channel(topic, channel)
    if found is None:
        raise AssertionError(f"no channel {channel} of {topic}")
    return found


def _topic_count(c: cluster.Cluster, topic: str) -> tuple[int, int]:
    found = read_nsqd_stats(c.nsqd_http[0], topic=topic).topic(topic)
    if found is None:
        raise AssertionError(f"no topic {topic}")
    return found.message_count, -1 if found.message_bytes is None else found.message_bytes


def _nsqctl_pub(c: cluster.Cluster, topic: str, *args: str, stdin: bytes = b"") -> None:
    proc = _run([NSQCTL, "pub", topic, "--nsqd", c.nsqd_tcp[0], "-q", *args], stdin=stdin)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")


def _nsq_tail(bins: Path, c: cluster.Cluster, topic: str, channel: str, count: int) -> bytes:
    proc = _run(
        [
            str(bins / "nsq_tail"),
            f"--topic={topic}",
            f"--channel={channel}",
            f"--nsqd-tcp-address={c.nsqd_tcp[0]}",
            f"-n={count}",
        ]
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def _nsqctl_tail(c: cluster.Cluster, topic: str, channel: str, count: int) -> bytes:
    proc = _run(
        [NSQCTL, "tail", topic, "--nsqd", c.nsqd_tcp[0], "--channel", channel, "-n", str(count)]
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def _lines(output: bytes) -> list[bytes]:
    assert output.endswith(b"\n"), output[-50:]
    return output[:-1].split(b"\n")


# Bodies without a newline: every byte value except 0x0a shows up somewhere.
_ALL_BUT_NEWLINE = bytes(b for b in range(256) if b != 0x0A)
LINE_BODIES: list[bytes] = [
    b"plain ascii",
    "wörld ✓ ünïcödé".encode(),
    b"tabs\tand  spaces  ",
    b" leading and trailing space ",
    b"carriage\rreturn\r",
    b"nul\x00in\x00the\x00middle",
    b"\xff\xfe\xfd not utf-8 \x80\x81",
    _ALL_BUT_NEWLINE,
    b"x" * 10_000,
    b'{"json": [1, 2, 3], "k": "v"}',
    b"\\n is not a newline here",
    b"-",
]


def test_nsqctl_pub_lines_read_by_nsq_tail(
    original_cluster: cluster.Cluster, original_bins: Path
) -> None:
    c = original_cluster
    with _topic_on(c, "pub_lines", "interop") as topic:
        _nsqctl_pub(c, topic, stdin=b"".join(b + b"\n" for b in LINE_BODIES))
        assert _topic_count(c, topic) == (len(LINE_BODIES), sum(map(len, LINE_BODIES)))
        out = _nsq_tail(original_bins, c, topic, "interop", len(LINE_BODIES))
        assert Counter(_lines(out)) == Counter(LINE_BODIES)
        assert _channel_stats(c, topic, "interop").depth == 0


def test_nsqctl_pub_many_batches_read_by_nsq_tail(
    original_cluster: cluster.Cluster, original_bins: Path
) -> None:
    """Several MPUB batches (5,000 distinct bodies) arrive complete and unchanged."""
    c = original_cluster
    bodies = [b"msg-%05d-" % i + bytes([0x80 + i % 128]) * (i % 50) for i in range(5000)]
    with _topic_on(c, "pub_many", "interop") as topic:
        _nsqctl_pub(c, topic, stdin=b"".join(b + b"\n" for b in bodies))
        assert _topic_count(c, topic) == (len(bodies), sum(map(len, bodies)))
        out = _nsq_tail(original_bins, c, topic, "interop", len(bodies))
        assert Counter(_lines(out)) == Counter(bodies)


def test_nsqctl_pub_binary_files_read_by_nsq_tail(
    original_cluster: cluster.Cluster, original_bins: Path, tmp_path: Path
) -> None:
    """``--binary FILE...``: one message per file, bytes as they are (newlines included)."""
    c = original_cluster
    bodies = [
        b"first line\nsecond line\n\nfourth after an empty one",
        bytes(range(256)) * 4,  # every byte value, newlines and NULs included
        b"\n\nstarts and ends with newlines\n\n",
        b"\r\n windows \r\n line ends \r\n",
        os.urandom(4096),
    ]
    files = []
    for i, body in enumerate(bodies):
        path = tmp_path / f"body{i}.bin"
        path.write_bytes(body)
        files.append(str(path))
    with _topic_on(c, "pub_binary", "interop") as topic:
        _nsqctl_pub(c, topic, "--binary", *files)
        assert _topic_count(c, topic) == (len(bodies), sum(map(len, bodies)))
        out = _nsq_tail(original_bins, c, topic, "interop", len(bodies))
        # nsq_tail prints body + "\n": the output is that, in some delivery order.
        assert len(out) == sum(len(b) + 1 for b in bodies)
        assert any(
            out == b"".join(b + b"\n" for b in order) for order in itertools.permutations(bodies)
        ), out[:200]
        assert _channel_stats(c, topic, "interop").depth == 0


def test_to_nsq_lines_read_by_nsqctl_tail(
    original_cluster: cluster.Cluster, original_bins: Path
) -> None:
    c = original_cluster
    with _topic_on(c, "to_nsq", "interop") as topic:
        # to_nsq strips the delimiter (and drops empty lines): end every line with one.
        stdin = b"".join(b + b"\n" for b in LINE_BODIES)
        proc = _run(
            [
                str(original_bins / "to_nsq"),
                f"--topic={topic}",
                f"--nsqd-tcp-address={c.nsqd_tcp[0]}",
            ],
            stdin=stdin,
        )
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        assert _topic_count(c, topic) == (len(LINE_BODIES), sum(map(len, LINE_BODIES)))
        out = _nsqctl_tail(c, topic, "interop", len(LINE_BODIES))
        assert Counter(_lines(out)) == Counter(LINE_BODIES)
        stats = _channel_stats(c, topic, "interop")
        # nsqctl tail FINs every printed message before it exits
        assert (stats.depth, stats.in_flight_count, stats.requeue_count) == (0, 0, 0)


def test_to_nsq_many_lines_read_by_nsqctl_tail(
    original_cluster: cluster.Cluster, original_bins: Path
) -> None:
    c = original_cluster
    bodies = [b"line %04d \xc3\xa9 \x00 \xff" % i for i in range(2000)]
    with _topic_on(c, "to_nsq_many", "interop") as topic:
        proc = _run(
            [
                str(original_bins / "to_nsq"),
                f"--topic={topic}",
                f"--nsqd-tcp-address={c.nsqd_tcp[0]}",
            ],
            stdin=b"".join(b + b"\n" for b in bodies),
        )
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        assert _topic_count(c, topic)[0] == len(bodies)
        out = _nsqctl_tail(c, topic, "interop", len(bodies))
        assert Counter(_lines(out)) == Counter(bodies)
        stats = _channel_stats(c, topic, "interop")
        assert (stats.depth, stats.in_flight_count, stats.requeue_count) == (0, 0, 0)
