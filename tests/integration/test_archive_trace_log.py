"""``archive --trace-log`` on a file that cannot be written (``/dev/full``: ENOSPC).

The archive stops with one line naming the file and the cause, exit 1; what it had
received is still written to Parquet and acknowledged, so a rerun does not archive it
again. Real original-NSQ session cluster.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from nsqctl.servers import cluster
from nsqctl.stats import read_nsqd_stats
from tests.helpers.cli import assert_one_line_error, run_cli

pytestmark = [pytest.mark.original, pytest.mark.spark]  # archive needs pyarrow


def test_a_full_trace_log_stops_the_archive_after_acknowledging_what_it_wrote(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    topic = f"arch_trace_{uuid.uuid4().hex[:8]}"
    nsqd = ["--nsqd", original_cluster.nsqd_tcp[0]]
    http = original_cluster.nsqd_http[0]
    assert run_cli(["pub", topic, *nsqd], input=b"a\nb\nc").returncode == 0
    out = tmp_path / "out"
    args = ["archive", topic, "--out", str(out), "--exit-when-idle", "0.5", *nsqd]
    proc = run_cli([*args, "--trace-log", "/dev/full"])
    line = assert_one_line_error(proc, 1)
    assert "/dev/full" in line and "No space left on device" in line, line
    assert list(out.rglob("*.parquet"))
    ch = read_nsqd_stats(http, topic=topic).channel(topic, "nsqctl_archive")
    assert ch is not None
    assert (ch.depth, ch.in_flight_count, ch.requeue_count) == (0, 0, 0)
    again = run_cli([*args, "--json"])
    assert again.returncode == 0, again.stderr
    assert b'"archived": 0' in again.stdout
