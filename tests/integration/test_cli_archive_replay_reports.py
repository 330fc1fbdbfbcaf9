"""``archive --json`` and ``replay --json`` report in their documented shapes, and a
replay shows its progress only when stderr is a terminal (a pseudo-terminal here), on a
real nsqd."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess
import uuid
from pathlib import Path

import pytest

from nsqctl.servers import cluster
from nsqctl.stats import read_nsqd_stats
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env, run_cli, run_main
from tests.helpers.redesign import TopicSpec, create_topics, read_messages

pytestmark = pytest.mark.spark  # archive and replay need the archive extra (pyarrow)


def _stderr_on_a_terminal(args: list[str]) -> tuple[int, bytes, bytes]:
    """Run nsqctl with stderr on a pseudo-terminal; (exit code, stdout, stderr)."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [NSQCTL, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
            env=clean_env(),
        )
        os.close(follower)
        err = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            err += chunk
        out = proc.stdout.read() if proc.stdout else b""
        return proc.wait(timeout=60), out, err
    finally:
        os.close(leader)


def test_archive_and_replay_json_and_terminal_progress(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    topic, target = (f"rep_{uuid.uuid4().hex[:10]}" for _ in range(2))
    nsqd = ["--nsqd", original_cluster.nsqd_tcp[0]]
    assert run_cli(["pub", topic, "a", "b", "c", "d", "e", *nsqd]).returncode == 0
    out = tmp_path / "archive"
    archived = run_cli(
        ["archive", topic, "--out", str(out), "--exit-when-idle", "1", "--json", *nsqd]
    )
    assert archived.returncode == 0, archived.stderr
    report = json.loads(archived.stdout)
    assert (report["topic"], report["archived"], report["out"]) == (topic, 5, str(out))
    assert report["files"] >= 1 and report["duplicates"] == 0

    dry = run_cli(["replay", str(out), "--to-topic", target, "--dry-run", "--json", "-q", *nsqd])
    assert dry.returncode == 0, dry.stderr
    shape = json.loads(dry.stdout)
    assert (shape["mode"], shape["dry_run"], shape["published"]) == ("archive", True, 0)
    assert shape["details"]["to_publish"] == 5

    piped = run_cli(["replay", str(out), "--to-topic", target, "--engine", "local", *nsqd])
    assert piped.returncode == 0, piped.stderr
    assert b"published" not in piped.stderr  # no progress into a pipe or a log

    code, stdout, stderr = _stderr_on_a_terminal(
        ["replay", str(out), "--to-topic", target, "--engine", "local", "--restart", *nsqd]
    )
    assert code == 0, stderr
    assert b"\rreplay: 5 published" in stderr, stderr
    assert b"replayed 5 message(s)" in stdout


@pytest.mark.parametrize("field", ["", "user..id", ".id"])
def test_replay_refuses_a_shard_field_with_an_empty_name_as_pub_does(
    original_cluster: cluster.Cluster, tmp_path: Path, field: str
) -> None:
    """An empty --shard-field is not "no --shard-field": replay refuses it before
    publishing anything (rather than quietly keeping per-partition order), in the very
    line ``pub`` gives for it."""
    source = tmp_path / "orders.log"  # nsq_to_file output: one message per line
    source.write_text('{"": "x", "id": 1, "user": {"id": 7}}\n')
    target = f"rep_{uuid.uuid4().hex[:10]}"
    nsqd = ["--nsqd", original_cluster.nsqd_tcp[0]]
    refused = run_main("replay", str(source), "--to-topic", target, "--shard-field", field, *nsqd)
    line = assert_one_line_error(refused, 2)
    assert line == (
        f"nsqctl: error: bad --shard-field {field!r}: name the JSON field holding each "
        "message's shard key (a dotted path for a nested one, e.g. user.id)"
    )
    pub = run_main("pub", target, "x", "--shard-field", field, *nsqd)
    assert assert_one_line_error(pub, 2) == line
    stats = read_nsqd_stats(original_cluster.nsqd_http[0])
    assert not any(t.topic == target for t in stats.topics)


def test_replay_of_nsq_to_file_text_keeps_order_per_shard_field(
    redesign_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    """``--shard-field`` on nsq_to_file text keys the replay by the field's value (not by
    file): each value's lines, wherever they are, go to one partition of the target in
    file-then-line order."""
    lines = {
        "a.log": [{"k": f"k{i % 3}", "seq": i} for i in range(12)],
        "b.log": [{"k": f"k{i % 3}", "seq": i} for i in range(12, 20)],
    }
    for name, records in lines.items():
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    target = f"rep_{uuid.uuid4().hex[:10]}"
    lookupd = redesign_cluster.lookupd_http
    asyncio.run(create_topics(lookupd, {target: TopicSpec(partitions=2)}, ("c",)))
    args = [str(tmp_path), "--to-topic", target, "--shard-field", "k", "--lookupd", lookupd[0]]
    dry = run_main("replay", *args, "--dry-run", "--json", "-q")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["details"]["keys"] == 3  # one per value, not per file
    done = run_main("replay", *args, "-q", "--checkpoint", str(tmp_path / ".ckpt"))
    assert done.returncode == 0, done.stderr
    got = asyncio.run(read_messages(lookupd, target, "c", 20))
    placed: dict[str, set[int | None]] = {}
    seqs: dict[str, list[int]] = {}
    for msg in got:
        record = json.loads(msg.body)
        placed.setdefault(record["k"], set()).add(msg.partition)
        seqs.setdefault(record["k"], []).append(record["seq"])
    assert all(len(parts) == 1 for parts in placed.values()), placed
    assert seqs == {f"k{j}": [i for i in range(20) if i % 3 == j] for j in range(3)}
