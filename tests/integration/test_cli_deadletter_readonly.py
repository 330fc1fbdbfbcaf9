"""``dead-letter`` in a state dir the user cannot write or read: one line, and a replay that
could not move its file aside afterwards publishes nothing (a rerun would publish it all
again).

Tests run as root, which ignores permission bits, so the commands run as the unprivileged
user ``nobody`` (``setpriv``): a real user with a read-only state dir, the case reported.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsqctl.servers import cluster
from nsqctl.stats import read_nsqd_stats
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env

NOBODY = 65534


def _as_nobody(args: list[str], state: Path) -> subprocess.CompletedProcess[bytes]:
    env = clean_env({"NSQCTL_STATE_DIR": str(state), "HOME": str(state)})
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", NSQCTL]
    return subprocess.run(
        [*argv, *args], input=b"", capture_output=True, env=env, timeout=60, check=False
    )


@pytest.fixture
def state() -> Iterator[Path]:
    """A state dir ``nobody`` can reach (pytest's tmp_path is root's alone)."""
    base = Path(tempfile.mkdtemp(prefix="nsqctl-readonly-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        for d in base.rglob("*"):
            if d.is_dir():
                d.chmod(0o755)
        shutil.rmtree(base)


def _depth(nsqd_http: str, topic: str) -> int:
    node = read_nsqd_stats(nsqd_http, topic=topic)
    return sum(t.message_count for t in node.topics if t.topic == topic)


def test_replay_in_a_read_only_dir_publishes_nothing_and_says_so(
    original_cluster: cluster.Cluster, state: Path
) -> None:
    topic = f"dlro_{uuid.uuid4().hex[:10]}"
    letters = state / "dead-letter"
    letters.mkdir()
    path = letters / f"{topic}.work.jsonl"
    path.write_text("".join(json.dumps({"topic": topic, "body": f"m{i}"}) + "\n" for i in range(3)))
    path.chmod(0o644)
    letters.chmod(0o555)  # readable, not writable, by nobody
    nsqd = original_cluster.nsqd_tcp[0]

    for _ in range(2):  # a rerun does not publish either
        proc = _as_nobody(["dead-letter", "replay", f"{topic}.work", "--nsqd", nsqd], state)
        line = assert_one_line_error(proc, 2)
        assert "not writable" in line and "nothing published" in line and "--keep" in line, line
        assert _depth(original_cluster.nsqd_http[0], topic) == 0
        assert path.exists()

    kept = _as_nobody(["dead-letter", "replay", f"{topic}.work", "--keep", "--nsqd", nsqd], state)
    assert kept.returncode == 0, kept.stderr
    assert b"replayed 3 to " in kept.stdout and b"kept in place" in kept.stdout
    assert _depth(original_cluster.nsqd_http[0], topic) == 3
    assert path.exists()


def test_list_of_an_unreadable_dir_is_one_line(state: Path) -> None:
    letters = state / "dead-letter"
    letters.mkdir()
    (letters / "t.c.jsonl").write_text('{"topic": "t", "body": "x"}\n')
    letters.chmod(0o000)
    for args in (["dead-letter", "list"], ["dead-letter", "list", "--json"]):
        line = assert_one_line_error(_as_nobody(args, state), 2)
        assert str(letters) in line and "Permission denied" in line, line
    replay = _as_nobody(["dead-letter", "replay", "t.c"], state)
    assert "Permission denied" in assert_one_line_error(replay, 2)
