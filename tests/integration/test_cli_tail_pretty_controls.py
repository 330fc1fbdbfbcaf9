"""``tail --format pretty`` on a real nsqd: terminal control sequences in a body (ESC, an
OSC window-title set, BEL, clear screen, an 8-bit CSI) are shown escaped, never sent to the
terminal; raw and JSON output keep the body exact."""

from __future__ import annotations

import json
import uuid

from nsqctl.message import body_from_json
from nsqctl.servers import cluster
from tests.helpers.cli import run_cli

BODY = "title\x1b]0;pwned\x07 clear\x1b[2J\x1b[H bell\x07 csi\u009b31m tab\tend".encode()


def test_pretty_escapes_terminal_controls_and_json_stays_exact(
    original_cluster: cluster.Cluster,
) -> None:
    topic = f"ctl_{uuid.uuid4().hex[:10]}"
    nsqd = ["--nsqd", original_cluster.nsqd_tcp[0]]
    published = run_cli(["pub", topic, "--binary", *nsqd], input=BODY)
    assert published.returncode == 0, published.stderr

    # the topic's first channel gets what the topic kept; a second gets only what follows
    pretty = run_cli(["tail", topic, "-c", "p", "-n", "1", "--format", "pretty", *nsqd])
    assert pretty.returncode == 0, pretty.stderr
    out = pretty.stdout.decode()
    assert not any(ch in out for ch in "\x1b\x07\x9b"), out
    assert "title\\x1b]0;pwned\\x07 clear\\x1b[2J\\x1b[H bell\\x07 csi\\x9b31m tab\tend" in out

    published = run_cli(["pub", topic, "--binary", *nsqd], input=BODY)
    assert published.returncode == 0, published.stderr
    exact = run_cli(["tail", topic, "-c", "p", "-n", "1", "--format", "json", *nsqd])
    assert exact.returncode == 0, exact.stderr
    assert body_from_json(json.loads(exact.stdout)) == BODY
