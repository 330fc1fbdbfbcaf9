"""One very long line on stdin to ``pub`` on a real nsqd: split in linear time (a 20 MB
line is split like many short ones) and refused with advice that helps: nsqd's
--max-msg-size limits one message, so split the input; nothing is published."""

from __future__ import annotations

import uuid

from nsqctl.servers import cluster
from tests.helpers.cli import assert_one_line_error, run_cli

LINE = b"x" * (20 << 20)


def test_a_line_longer_than_nsqd_accepts_is_refused_with_advice_that_helps(
    original_cluster: cluster.Cluster,
) -> None:
    topic = f"long_{uuid.uuid4().hex[:10]}"
    nsqd = ["--nsqd", original_cluster.nsqd_tcp[0]]
    proc = run_cli(["pub", topic, *nsqd], input=b"first\n" + LINE + b"\nlast\n", timeout=120)
    line = assert_one_line_error(proc, 2)  # bad input
    assert "--max-msg-size" in line and "split the input" in line, line
    assert "use PUB" not in line and "--max-body-size" not in line, line
