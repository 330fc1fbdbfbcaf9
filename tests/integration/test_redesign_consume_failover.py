"""`nsqctl tail` rides through a partition leader's kill -9 on real youzan servers.

3 nsqd, topics of replicas 3, so youzan elects a new leader without the killed node
(~22 s here). Both tails run at once across one kill: an unordered tail of a 1-partition
topic (unordered needs partitions x replicas <= nodes) and ``tail --ordered`` of an
ordered 2-partition topic (channels made before publishing: a youzan channel made later
starts at the end). Half the lines are published before the kill, half after (``nsqctl
pub`` waits for the new leader). Each tail must print every line at least once, report
exactly the copies it printed twice (by message id), and the ordered one must keep each
partition's offsets rising apart from those reported resends. The last test gives a
partition no leader at all (2 nsqd, replicas 2: youzan never re-enables it without the
killed node) and a short --failover-window.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from nsqctl.servers.cluster import Cluster
from tests.conftest import StartCluster
from tests.helpers.cli import NSQCTL, clean_env
from tests.helpers.failover import kill_leader, leader_of
from tests.helpers.redesign import TopicSpec, create_topics, unique
from tests.helpers.wait import eventually

pytestmark = [pytest.mark.redesign, pytest.mark.timeout(300)]

_SUMMARY = re.compile(r"(\d+) message\(s\) printed again")


def _pub(c: Cluster, topic: str, lines: list[bytes], tmp: Path, *args: str) -> None:
    source = tmp / f"{topic}-{len(lines)}-{time.monotonic_ns()}.txt"
    source.write_bytes(b"\n".join(lines) + b"\n")
    with source.open("rb") as stdin:
        done = subprocess.run(
            [NSQCTL, "pub", topic, "--lookupd", c.lookupd_http[0], *args],
            stdin=stdin,
            capture_output=True,
            env=clean_env(),
            timeout=200,
        )
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def _tail(c: Cluster, topic: str, out: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            NSQCTL,
            "tail",
            topic,
            "-c",
            "c",
            "--format",
            "json",
            "--lookupd",
            c.lookupd_http[0],
            "--failover-window",
            "150",
            *args,
        ],
        stdout=out.open("wb"),
        stderr=subprocess.PIPE,
        env=clean_env(),
    )


def _records(out: Path) -> list[dict[str, object]]:
    text = out.read_text()
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def _wait_bodies(out: Path, want: set[str], timeout: float) -> None:

    def missing() -> set[str]:
        return want - {str(r["body"]) for r in _records(out)}

    def said() -> str:
        left = missing()
        return f"{len(left)} more line(s) printed, e.g. {sorted(left)[:3]}"

    eventually(lambda: not missing(), timeout, said, step=0.5)


def _stop(proc: subprocess.Popen[bytes]) -> str:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    stderr = err.decode()
    assert proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    return stderr


def _reported(stderr: str) -> int:
    found = _SUMMARY.findall(stderr)
    return int(found[-1]) if found else 0


def test_tail_and_ordered_tail_ride_through_a_leader_kill(
    start_cluster: StartCluster, tmp_path: Path
) -> None:
    c = start_cluster("redesign", nsqd=3)
    plain, ordered = unique("cfo"), unique("cfoord")
    asyncio.run(
        create_topics(
            c.lookupd_http,
            {
                plain: TopicSpec(partitions=1, replicas=3),
                ordered: TopicSpec(partitions=2, replicas=3, ordered=True),
            },
        )
    )
    before = [f"m{i:05d}" for i in range(3000)]
    after = [f"m{i:05d}" for i in range(3000, 6000)]
    keyed = [json.dumps({"k": f"k{i % 8}", "seq": i}) for i in range(6000)]
    _pub(c, plain, [s.encode() for s in before], tmp_path)
    _pub(c, ordered, [s.encode() for s in keyed[:3000]], tmp_path, "--shard-field", "k")
    out_plain, out_ord = tmp_path / "plain.jsonl", tmp_path / "ordered.jsonl"
    tail_plain = _tail(c, plain, out_plain, "--max-in-flight", "50")
    tail_ord = _tail(c, ordered, out_ord, "--ordered")
    _wait_bodies(out_plain, set(before), 60)
    time.sleep(1.0)  # the ordered tail is still reading its first half
    killed = kill_leader(c, plain, 0)
    _pub(c, plain, [s.encode() for s in after], tmp_path)
    _pub(c, ordered, [s.encode() for s in keyed[3000:]], tmp_path, "--shard-field", "k")
    assert leader_of(c, plain, 0).tcp_port != killed.tcp_port
    _wait_bodies(out_plain, set(before + after), 150)
    _wait_bodies(out_ord, set(keyed), 150)
    err_plain, err_ord = _stop(tail_plain), _stop(tail_ord)
    print(err_plain, err_ord, sep="\n")

    for out, stderr in ((out_plain, err_plain), (out_ord, err_ord)):
        ids = Counter(str(r["id"]) for r in _records(out))
        printed_twice = sum(n - 1 for n in ids.values())
        assert _reported(stderr) == printed_twice, (stderr, printed_twice)
    assert "waiting for a leader for " in err_plain or "consuming again on" in err_plain

    assert "order regression" not in err_ord
    seen: set[str] = set()
    offsets: dict[object, list[int]] = defaultdict(list)
    for r in _records(out_ord):
        if str(r["id"]) in seen:
            continue  # a resend, counted above
        seen.add(str(r["id"]))
        offsets[r["partition"]].append(int(r["offset"]))  # type: ignore[call-overload]
    for part, offs in offsets.items():
        assert offs == sorted(offs), f"partition {part} out of order"


def test_tail_gives_up_after_the_failover_window_in_one_line(
    start_cluster: StartCluster, tmp_path: Path
) -> None:
    c = start_cluster("redesign", nsqd=2)
    topic = unique("cfonone")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=2)}))
    _pub(c, topic, [b"one", b"two"], tmp_path)
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(
        [
            NSQCTL,
            "tail",
            topic,
            "-c",
            "c",
            "--lookupd",
            c.lookupd_http[0],
            "--failover-window",
            "6",
        ],
        stdout=out.open("wb"),
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    eventually(lambda: out.read_bytes().count(b"\n") >= 2, 30, "tail to print both", step=0.2)
    assert out.read_bytes() == b"one\ntwo\n"
    kill_leader(c, topic, 0)
    _, err = proc.communicate(timeout=60)
    stderr = err.decode()
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("nsqctl: error:")]
    assert errors == [
        f"nsqctl: error: no leader for {topic}/0 within the failover window of 6s: the cluster "
        "elected none (check its nsqlookupd and nsqd), or the window is shorter than an "
        "election (flag: --failover-window SECONDS)"
    ], stderr
