"""Small things an operator's input deserves, checked through the real console script on
a real nsqd: ``dash`` refuses to run without a terminal, a secret file open to other users
is used with one warning (as ssh warns of a key file), and blank input lines are counted
as skipped in ``pub --json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsqctl.servers import cluster
from nsqctl.stats import read_nsqd_stats
from tests.helpers.cli import assert_one_line_error, run_cli
from tests.helpers.names import unique


@pytest.mark.original
def test_dash_without_a_terminal_is_refused(original_cluster: cluster.Cluster) -> None:
    """stdout a pipe: the dashboard used to write its escape codes there and never end."""
    proc = run_cli(["dash", "--nsqd-http", original_cluster.nsqd_http[0]], timeout=30)
    line = assert_one_line_error(proc, 2)
    assert "needs a terminal" in line and "stdout" in line, line
    assert proc.stdout == b""


@pytest.mark.original
def test_a_secret_file_others_can_read_is_used_with_one_warning(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    secret = tmp_path / "auth.secret"
    secret.write_text("NSQCTLTOPSECRETVALUE\n")
    secret.chmod(0o644)
    args = ["pub", unique("secret"), "x", "--nsqd", original_cluster.nsqd_tcp[0], "-q"]
    proc = run_cli([*args, "--auth-secret-file", str(secret)])
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert err.splitlines() == [
        f"nsqctl: warning: the auth secret file {secret} can be read by other users "
        f"(mode 0644): chmod 600 {secret}"
    ]
    assert "NSQCTLTOPSECRETVALUE" not in err
    secret.chmod(0o600)
    quiet = run_cli([*args, "--auth-secret-file", str(secret)])
    assert quiet.returncode == 0 and quiet.stderr == b"", quiet.stderr


@pytest.mark.original
def test_blank_lines_are_counted_as_skipped(original_cluster: cluster.Cluster) -> None:
    c = original_cluster
    topic = unique("blank")
    proc = run_cli(["pub", topic, "--nsqd", c.nsqd_tcp[0], "--json"], input=b"a\n\nb\n\n\nc\n")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert (summary["published"], summary["unpublished"], summary["skipped"]) == (3, 0, 3)
    node = read_nsqd_stats(c.nsqd_http[0], topic=topic)
    assert sum(t.message_count for t in node.topics if t.topic == topic) == 3
