"""Ctrl-C ends a plain ``nsqctl tail`` whose reader stalled, in the middle of a batch.

The ordered tail's two paths are tested with the lanes (test_redesign_ordered_lanes.py);
a plain tail writes its messages in batches of up to hundreds, so the stop can land in
the middle of one: the messages whose lines are all out count as written (FINed), the
rest are given back once, and nothing is printed twice or lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pytest

from nsqctl.servers.cluster import Cluster
from nsqctl.stats import read_nsqd_stats
from nsqctl.stats.model import ChannelStats
from tests.helpers.cli import NSQCTL, clean_env, run_cli
from tests.helpers.names import unique
from tests.helpers.stalled import interrupted_while_stalled, stalled
from tests.helpers.wait import eventually

pytestmark = [pytest.mark.original, pytest.mark.timeout(180)]


def _published(topic: str, where: list[str], count: int) -> list[bytes]:
    """``count`` numbered lines of 96 bytes published to ``topic``."""
    bodies = [b"%05d-" % i + b"y" * 90 for i in range(count)]
    pub = run_cli(["pub", topic, *where], input=b"\n".join(bodies) + b"\n")
    assert pub.returncode == 0, pub.stderr.decode()
    return bodies


def test_ctrl_c_in_the_middle_of_a_batch_to_a_stalled_reader_loses_and_repeats_nothing(
    original_cluster: Cluster, tmp_path: Path
) -> None:
    c = original_cluster
    topic, count = unique("stall"), 5000
    where = ["--nsqd", c.nsqd_tcp[0]]
    bodies = _published(topic, where, count)
    tail = ["tail", topic, "-c", "c", *where]
    lines = interrupted_while_stalled(tail)
    assert 0 < len(lines) < count and len(set(lines)) == len(lines), len(lines)
    assert set(lines) <= set(bodies)  # whole lines only
    rest = tmp_path / "rest.txt"
    proc = run_cli([*tail, "-n", str(count - len(lines))], stdout=rest)
    assert proc.returncode == 0, proc.stderr.decode()
    again = rest.read_bytes().splitlines()
    assert sorted(again + lines) == sorted(bodies)  # each once: printed or left


def test_ctrl_c_gives_back_what_a_stalled_pipe_holds_when_stderr_is_that_pipe(
    original_cluster: Cluster,
) -> None:
    """``nsqctl tail -c DURABLE 2>&1 | less`` scrolled back: Ctrl-C, and after waiting
    for the reader tail gives back what it wrote into the pipe unread, and ends. Its
    notice of that goes to standard error, the same full pipe: it must neither hold the
    give-back nor hang the stop (a write there waits in the kernel, which no signal ends)."""
    c = original_cluster
    topic, count = unique("stallerr"), 3000
    where = ["--nsqd", c.nsqd_tcp[0]]
    bodies = _published(topic, where, count)
    read_end, write_end = os.pipe()
    tail = subprocess.Popen(
        [NSQCTL, "tail", topic, "-c", "keep", *where],
        stdout=write_end,
        stderr=write_end,
        env=clean_env(),
    )
    # A write end of the test's own, non-blocking (a file description of its own: the
    # flag is not shared with tail's), to fill the room the pipe's last page has left.
    filler = os.open(f"/proc/self/fd/{write_end}", os.O_WRONLY | os.O_NONBLOCK)
    os.close(write_end)
    printed = bytearray()
    try:
        eventually(stalled(read_end), 30, "the tail waiting on the full pipe")
        with contextlib.suppress(BlockingIOError):  # empty lines, after whole ones
            while True:
                os.write(filler, b"\n")
        os.close(filler)
        tail.send_signal(signal.SIGINT)

        eventually(
            lambda: _keep(c, topic).in_flight_count == 0,
            30,
            lambda: f"{_keep(c, topic).in_flight_count} in flight",
        )
        tail.wait(timeout=30)  # a hang: the notice waited on the full pipe
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
        with open(read_end, "rb") as rest:
            printed.extend(rest.read())
    assert tail.returncode == 0, bytes(printed)[-2000:]
    lines = [line for line in bytes(printed).splitlines() if line and b"nsqctl" not in line]
    assert 0 < len(lines) < count and len(set(lines)) == len(lines), len(lines)
    assert set(lines) <= set(bodies), b"Traceback" in printed


def test_a_second_ctrl_c_ends_the_wait_for_a_stalled_pipe_reader(original_cluster: Cluster) -> None:
    """``nsqctl tail -c DURABLE | less`` scrolled back: the first Ctrl-C stops the tail,
    which then waits for the reader to take what it wrote into the pipe; a second one
    ends that wait: what the reader did not take is given back at once, and tail says so."""
    c = original_cluster
    topic, count = unique("stall2"), 3000
    where = ["--nsqd", c.nsqd_tcp[0]]
    _published(topic, where, count)
    read_end, write_end = os.pipe()
    tail = subprocess.Popen(
        [NSQCTL, "tail", topic, "-c", "keep", *where],
        stdout=write_end,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    os.close(write_end)
    try:
        eventually(stalled(read_end), 30, "the tail waiting on the full pipe")
        tail.send_signal(signal.SIGINT)
        # RDY 0, which tail sends as it stops, just before it waits for the reader
        eventually(lambda: [cl.ready_count for cl in _keep(c, topic).clients] == [0], 30, "RDY 0")
        tail.send_signal(signal.SIGINT)
        _, err = tail.communicate(timeout=30)
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
        os.close(read_end)
    stderr = err.decode()
    assert tail.returncode == 0 and "Traceback" not in stderr, stderr[-3000:]
    assert "still unread in the pipe when interrupted again" in stderr, stderr[-3000:]
    eventually(lambda: _keep(c, topic).in_flight_count == 0, 10, "all given back")


def _keep(c: Cluster, topic: str) -> ChannelStats:
    found = read_nsqd_stats(c.nsqd_http[0], topic=topic).channel(topic, "keep")
    assert found is not None
    return found
