"""Dead letters end to end on a real nsqd: a consumer gives up on messages (the default hook
writes them), ``nsqctl dead-letter list`` shows them, ``replay`` re-publishes the exact
bytes (binary too) and moves the file aside; bad files give one-line errors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from nsqctl.consumer import Consumer, ConsumerOptions, DeadLetterFile, dead_letter_path
from nsqctl.deadletter import read_dead_letters
from nsqctl.message import Message
from nsqctl.producer import Producer
from nsqctl.servers import cluster
from tests.helpers.cli import assert_one_line_error, clean_env, run_cli
from tests.helpers.names import unique
from tests.helpers.wait import wait_for

BODIES = [b"plain text", b"\xff\x00binary\x80", "ünïcode".encode()]


async def _give_up_on_everything(nsqd: str, topic: str) -> None:
    async with Producer(nsqd_tcp=[nsqd]) as producer:
        await producer.publish_many(topic, BODIES)
    given_up: list[bytes] = []

    def fail(_msg: Message) -> None:
        raise RuntimeError("always fails")

    def count(msg: Message) -> None:
        given_up.append(msg.body)

    default_hook = DeadLetterFile(dead_letter_path(topic, "work"))  # what a consumer uses
    async with Consumer(
        topic,
        "work",
        fail,
        nsqd_tcp=[nsqd],
        options=ConsumerOptions(
            max_in_flight=10, max_attempts=1, default_requeue_delay=0, backoff_multiplier=0.01
        ),
        giving_up=_Tee(default_hook, count),
    ):
        await wait_for(lambda: len(given_up) == len(BODIES), 20.0, "every message given up")
        await asyncio.sleep(0.2)


class _Tee:
    def __init__(self, first: object, second: object) -> None:
        self.first, self.second = first, second

    def __call__(self, msg: Message) -> None:
        self.first(msg)  # type: ignore[operator]
        self.second(msg)  # type: ignore[operator]


async def _drain(nsqd: str, topic: str, count: int) -> list[bytes]:
    got: list[bytes] = []
    async with Consumer(topic, "check", lambda m: got.append(m.body), nsqd_tcp=[nsqd]):
        await wait_for(lambda: len(got) >= count, 15.0, f"{count} replayed messages")
        await asyncio.sleep(0.2)
    return got


async def test_given_up_messages_are_listed_and_replayed_byte_for_byte(
    original_cluster: cluster.Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NSQCTL_STATE_DIR", str(tmp_path))
    nsqd = original_cluster.nsqd_tcp[0]
    topic, target = unique("src"), unique("dst")
    await _give_up_on_everything(nsqd, topic)
    env = clean_env({"NSQCTL_STATE_DIR": str(tmp_path)})

    listed = run_cli(["dead-letter", "list", "--json"], env=env)
    assert listed.returncode == 0, listed.stderr
    files = json.loads(listed.stdout)["files"]
    assert [(f["name"], f["messages"], f["topics"]) for f in files] == [
        (f"{topic}.work", 3, [topic])
    ]
    path = Path(files[0]["file"])
    assert sorted(d.body for d in read_dead_letters(path)) == sorted(BODIES)

    dry = run_cli(["dead-letter", "replay", f"{topic}.work", "--dry-run"], env=env)
    assert dry.returncode == 0 and b"would publish 3 to " + topic.encode() in dry.stdout
    assert path.exists()

    replay = run_cli(
        ["dead-letter", "replay", f"{topic}.work", "--to-topic", target, "--nsqd", nsqd],
        env=env,
    )
    assert replay.returncode == 0, replay.stderr
    assert f"replayed 3 to {target}".encode() in replay.stdout
    assert not path.exists()
    moved = list(tmp_path.glob("dead-letter/*.replayed-*"))
    assert len(moved) == 1
    assert sorted(await _drain(nsqd, target, 3)) == sorted(BODIES)

    again = run_cli(["dead-letter", "list", "--json"], env=env)
    assert json.loads(again.stdout)["files"] == []  # a replayed file is not offered again


def test_bad_dead_letter_files_give_one_line_errors(tmp_path: Path) -> None:
    env = clean_env({"NSQCTL_STATE_DIR": str(tmp_path)})
    missing = run_cli(["dead-letter", "replay", "nope"], env=env)
    assert "see `nsqctl dead-letter list`" in assert_one_line_error(missing, 2)
    bad = tmp_path / "dead-letter" / "t.c.jsonl"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        '{"topic": "t", "body": "ok"}\n{"topic": "t", "body": "%%", "body_encoding": "base64"}\n'
    )
    line = assert_one_line_error(run_cli(["dead-letter", "replay", "t.c"], env=env), 2)
    assert f"{bad}:2: not a dead-letter record" in line
    assert bad.exists()  # nothing published, nothing moved
    (bad.parent / "u.c.jsonl").write_text('{"topic": "u", "body": "fine"}\n')
    listed = run_cli(["dead-letter", "list", "--json"], env=env)
    assert listed.returncode == 0, listed.stderr  # one bad file does not hide the others
    files = {f["name"]: f for f in json.loads(listed.stdout)["files"]}
    assert files["u.c"]["messages"] == 1 and files["u.c"]["error"] is None
    assert "t.c.jsonl:2: not a dead-letter record" in files["t.c"]["error"]
