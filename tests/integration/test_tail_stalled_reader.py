"""Ctrl-C ends a plain ``nsqctl tail`` whose reader stalled, in the middle of a batch.

The ordered tail's two paths are tested with the lanes (test_redesign_ordered_lanes.py);
a plain tail writes its messages in batches of up to hundreds, so the stop can land in
the middle of one: the messages whose lines are all out count as written (FINed), the
rest are given back once, and nothing is printed twice or lost.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import run_cli
from tests.helpers.names import unique
from tests.helpers.stalled import interrupted_while_stalled

pytestmark = [pytest.mark.original, pytest.mark.timeout(180)]


def test_ctrl_c_in_the_middle_of_a_batch_to_a_stalled_reader_loses_and_repeats_nothing(
    original_cluster: Cluster, tmp_path: Path
) -> None:
    c = original_cluster
    topic, count = unique("stall"), 5000
    where = ["--nsqd", c.nsqd_tcp[0]]
    bodies = [b"%05d-" % i + b"y" * 90 for i in range(count)]
    pub = run_cli(["pub", topic, *where], input=b"\n".join(bodies) + b"\n")
    assert pub.returncode == 0, pub.stderr.decode()
    tail = ["tail", topic, "-c", "c", *where]
    lines = interrupted_while_stalled(tail)
    assert 0 < len(lines) < count and len(set(lines)) == len(lines), len(lines)
    assert set(lines) <= set(bodies)  # whole lines only
    rest = tmp_path / "rest.txt"
    proc = run_cli([*tail, "-n", str(count - len(lines))], stdout=rest)
    assert proc.returncode == 0, proc.stderr.decode()
    again = rest.read_bytes().splitlines()
    assert sorted(again + lines) == sorted(bodies)  # each once: printed or left
