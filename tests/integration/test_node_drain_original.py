"""``nsqctl node drain|restore`` on real original-NSQ servers (2 nsqd, one nsqlookupd).

A private cluster: a drain tombstones every topic of the node, which would hide the
session cluster's nsqds from other tests. Node A holds the drained topic with a consumer
attached to it; node B holds the same topic (publishers move there) and, in the time-out
test, a channel nobody consumes. Every restore is checked by nsqlookupd's own ``/lookup``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message
from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env, run_cli
from tests.helpers.clusters import running_cluster
from tests.helpers.redesign import unique
from tests.helpers.wait import wait_for

pytestmark = [pytest.mark.original, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from running_cluster("original", tmp_path_factory.mktemp("drain"), nsqd=2)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return clean_env({"NSQCTL_STATE_DIR": str(tmp_path / "state")})


def _post(url: str, body: bytes = b"") -> None:
    resp = httpx.post(url, content=body, timeout=10)
    assert resp.status_code == 200, (url, resp.status_code, resp.text)


def _topic(node_http: str, topic: str, channel: str | None = None, messages: int = 0) -> None:
    """Make ``topic`` (and ``channel``) on one nsqd, then publish ``messages`` to it."""
    _post(f"http://{node_http}/topic/create?topic={topic}")
    if channel:
        _post(f"http://{node_http}/channel/create?topic={topic}&channel={channel}")
    if messages:
        _post(
            f"http://{node_http}/mpub?topic={topic}",
            b"\n".join(b"m%d" % i for i in range(messages)),
        )


def _listed(c: Cluster, topic: str) -> set[str]:
    """HTTP addresses of the nsqds nsqlookupd ``/lookup`` gives for ``topic``."""
    resp = httpx.get(f"http://{c.lookupd_http[0]}/lookup", params={"topic": topic}, timeout=10)
    producers = resp.json().get("producers") or [] if resp.status_code == 200 else []
    return {f"{p['broadcast_address']}:{p['http_port']}" for p in producers}


def _state(env: dict[str, str], node: str) -> str | None:
    """The node's drain state in the state file (None: no record)."""
    path = Path(env["NSQCTL_STATE_DIR"]) / "drains.json"
    if not path.exists():
        return None
    record = json.loads(path.read_text())["drains"].get(node)
    return record["state"] if record else None


def _drain(c: Cluster, env: dict[str, str], node: str, *args: str) -> tuple[int, str, str]:
    proc = run_cli(
        ["node", "drain", node, "--lookupd", c.lookupd_http[0], "--interval", "0.2", *args],
        env=env,
        timeout=120,
    )
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def _restore(c: Cluster, env: dict[str, str], node: str) -> dict[str, object]:
    proc = run_cli(
        ["node", "restore", node, "--lookupd", c.lookupd_http[0], "--json", "--wait", "30"],
        env=env,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    restored: dict[str, object] = json.loads(proc.stdout)
    return restored


def test_dry_run_shows_the_tombstones_and_changes_nothing(
    two: Cluster, env: dict[str, str]
) -> None:
    a = two.nsqd_http[0]
    topic = unique("dry")
    _topic(a, topic, "c", messages=3)
    asyncio.run(wait_for(lambda: a in _listed(two, topic), 10, "nsqlookupd to list A"))
    code, out, err = _drain(two, env, a, "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["dry_run"] is True and plan["family"] == "original"
    assert topic in plan["topics"] and plan["remaining"] == 3
    assert any(f"topic={topic}" in step and "/topic/tombstone" in step for step in plan["steps"])
    assert a in _listed(two, topic)  # nothing was tombstoned
    assert not (Path(env["NSQCTL_STATE_DIR"]) / "drains.json").exists()
    _post(f"http://{a}/topic/delete?topic={topic}")  # not in the way of the next drains


def test_a_drain_it_cannot_record_is_refused_before_any_tombstone(
    two: Cluster, tmp_path: Path
) -> None:
    """A state directory that cannot be made (a file is in its place): `node restore`
    could not find such a drain, so it is refused with nothing changed, in one line."""
    a = two.nsqd_http[0]
    topic = unique("unrecorded")
    _topic(a, topic, "c", messages=1)
    asyncio.run(wait_for(lambda: a in _listed(two, topic), 10, "nsqlookupd to list A"))
    blocked = tmp_path / "state"
    blocked.write_text("")
    code, _, err = _drain(two, clean_env({"NSQCTL_STATE_DIR": str(blocked)}), a)
    line = assert_one_line_error(subprocess.CompletedProcess([], code, "", err), 2)
    assert f"cannot record the drain of {a} in {blocked / 'drains.json'}" in line, line
    assert "nothing was changed" in line and "NSQCTL_STATE_DIR" in line, line
    assert a in _listed(two, topic)  # nothing was tombstoned
    _post(f"http://{a}/topic/delete?topic={topic}")  # not in the way of the next drains


def test_a_drain_that_would_leave_a_lookupd_listing_the_node_is_refused(
    two: Cluster, env: dict[str, str]
) -> None:
    """The nsqd registers with one more nsqlookupd than given (a dead address: nsqd keeps
    trying it, harmlessly): publishers asking that one would still be sent to the node."""
    a = two.nsqd_http[0]
    url = f"http://{a}/config/nsqlookupd_tcp_addresses"
    own = httpx.get(url, timeout=10).json()
    resp = httpx.put(url, content=json.dumps([*own, "127.0.0.1:1"]).encode(), timeout=10)
    assert resp.status_code == 200, resp.text
    try:
        proc = run_cli(["node", "drain", a, "--lookupd", two.lookupd_http[0]], env=env)
    finally:
        httpx.put(url, content=json.dumps(own).encode(), timeout=10)
    line = assert_one_line_error(proc, 2)
    assert "registers with 2 nsqlookupds" in line and "--lookupd" in line


def test_timeout_names_the_channel_nobody_consumes_and_restore_stops_a_running_drain(
    two: Cluster, env: dict[str, str]
) -> None:
    b = two.nsqd_http[1]
    topic = unique("idle")
    _topic(b, topic, "archive", messages=7)
    asyncio.run(wait_for(lambda: b in _listed(two, topic), 10, "nsqlookupd to list B"))
    code, out, err = _drain(two, env, b, "--timeout", "1", "--json")
    assert code == 1, err
    assert f"no consumer drains {topic}/archive: 7 messages" in err.splitlines()[-1]
    doc = json.loads(out)
    assert doc["outcome"] == "timeout" and doc["progress"]["remaining"] == 7
    assert b not in _listed(two, topic)  # tombstoned for nsqlookupd's lifetime (45 s)
    assert _state(env, b) == "stopped"

    async def undo_while_draining() -> tuple[tuple[int, str, str], dict[str, object]]:
        drain = asyncio.create_task(asyncio.to_thread(_drain, two, env, b))  # never empties
        await wait_for(lambda: _state(env, b) == "draining", 30, "the drain to start")
        restored = await asyncio.to_thread(_restore, two, env, b)
        return await asyncio.wait_for(drain, 30), restored

    (code, _, err), restored = asyncio.run(undo_while_draining())
    assert code == 1 and "undone by `nsqctl node restore`" in err.splitlines()[-1], err
    assert restored["ok"] is True and _state(env, b) == "restored"
    assert b in _listed(two, topic)  # at once, not after the lifetime
    _post(f"http://{b}/topic/delete?topic={topic}")


def test_a_second_drain_is_refused_and_sigterm_is_recorded_as_given_up(
    two: Cluster, env: dict[str, str]
) -> None:
    """While one drain runs, a second of the same node is refused; SIGTERM ends the first
    with its end recorded, which `node list` shows under a header as "gave up"."""
    b = two.nsqd_http[1]
    topic = unique("held")
    _topic(b, topic, "archive", messages=3)  # no consumer: the drain never ends by itself
    asyncio.run(wait_for(lambda: b in _listed(two, topic), 10, "nsqlookupd to list B"))
    first = subprocess.Popen(
        [NSQCTL, "node", "drain", b, "--lookupd", two.lookupd_http[0], "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        asyncio.run(wait_for(lambda: _state(env, b) == "draining", 30, "the drain to start"))
        code, _, err = _drain(two, env, b, "--timeout", "30")
        assert code == 1, err
        assert f"{b} is being drained already, by process {first.pid}" in err.splitlines()[-1]
        first.send_signal(signal.SIGTERM)
        _, first_err = first.communicate(timeout=30)
    finally:
        first.kill()
    assert first.returncode == 1
    assert f"the drain of {b} was interrupted" in first_err.decode().splitlines()[-1]
    assert _state(env, b) == "stopped"
    listing = run_cli(["node", "list", "--lookupd", two.lookupd_http[0]], env=env)
    lines = listing.stdout.decode().splitlines()
    assert lines[0].split() == ["HTTP", "TCP", "STATE", "DRAIN"]
    row = next(line for line in lines if line.startswith(f"{b} "))
    assert " gave up: interrupted after " in row and f"no consumer drains {topic}/archive" in row
    _restore(two, env, b)
    _post(f"http://{b}/topic/delete?topic={topic}")


class _LookupCounter(logging.Handler):
    """Counts the consumer's ``/lookup`` requests for ``topic`` (the lookup client logs
    each request at debug level)."""

    def __init__(self, topic: str) -> None:
        super().__init__(logging.DEBUG)
        self.topic = topic
        self.count = 0
        logger = logging.getLogger("nsqctl.lookup")
        logger.setLevel(logging.DEBUG)
        logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if f"/lookup?topic={self.topic}" in record.getMessage():
            self.count += 1


def test_drain_with_a_consumer_exits_0_once_a_is_empty_and_unlisted(
    two: Cluster, env: dict[str, str]
) -> None:
    a, b = two.nsqd_http
    topic = unique("orders")
    _topic(a, topic, "c", messages=50)
    _topic(b, topic)
    asyncio.run(wait_for(lambda: _listed(two, topic) == {a, b}, 10, "both nsqds listed"))

    lookups = _LookupCounter(topic)

    async def scenario() -> tuple[tuple[int | None, str, str, Any], list[Message]]:
        # The usual consumer: nsqds found through nsqlookupd, connected to both before the
        # drain and holding back (max in flight 0) until A is tombstoned and it has looked
        # up again, so that it must keep A although nsqlookupd no longer lists it.
        got: list[Message] = []
        consumer = Consumer(
            topic,
            "c",
            got.append,
            lookupd_http=two.lookupd_http,
            options=ConsumerOptions(lookup_interval=0.2, max_in_flight=0),
        )
        await consumer.start()
        try:
            await wait_for(lambda: len(consumer.connections) == 2, 30, "connected to A and B")
            # --json-progress: a script follows the drain line by line while it runs
            drain = await asyncio.create_subprocess_exec(
                *(NSQCTL, "node", "drain", a, "--lookupd", two.lookupd_http[0]),
                *("--interval", "0.2", "--json-progress"),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
            try:
                assert drain.stdout is not None
                first = json.loads(await asyncio.wait_for(drain.stdout.readline(), 30))
                await wait_for(lambda: _listed(two, topic) == {b}, 30, "A tombstoned")
                seen = lookups.count
                await wait_for(
                    lambda: lookups.count >= seen + 2, 30, "the consumer to look up again"
                )
                assert drain.returncode is None  # 50 messages still on A: not drained yet
                consumer.set_max_in_flight(10)
                rest, err = await asyncio.wait_for(drain.communicate(), 60)
            finally:
                if drain.returncode is None:
                    drain.kill()
                    await drain.wait()
            result = (drain.returncode, rest.decode(), err.decode(), first)
        finally:
            await consumer.stop()
        return result, got

    (code, out, err, first), got = asyncio.run(scenario())
    assert code == 0, err
    assert len(got) == 50
    # the first poll, read while the drain ran: all 50 on A, and what keeps it from done
    assert (first["event"], first["remaining"], first["depth"], first["done"]) == (
        "progress",
        50,
        50,
        False,
    )
    assert first["in_flight"] == first["deferred"] == 0
    assert "50 messages (depth 50, in flight 0, deferred 0)" in first["left"]
    *steps, last = [json.loads(line) for line in out.splitlines()]
    assert [s["event"] for s in steps] == ["progress"] * len(steps) and steps
    assert [s["remaining"] for s in steps] == sorted((s["remaining"] for s in steps), reverse=True)
    assert steps[-1]["done"] and steps[-1]["left"] == [] and steps[-1]["eta"] == 0
    assert any(s["rate"] and s["rate"] > 0 for s in steps)  # the consumer's pace was seen
    doc = last  # the result, as --json gives it, on the last line
    assert doc["event"] == "result"
    assert doc["outcome"] == "drained" and doc["progress"]["remaining"] == 0
    assert doc["progress"]["listed_for"] == []
    assert _listed(two, topic) == {b}  # nsqlookupd no longer lists A for the topic
    assert _state(env, a) == "drained"
    listing = run_cli(["node", "list", "--json", "--lookupd", two.lookupd_http[0]], env=env)
    rows = {row["http"]: row["drain"] for row in json.loads(listing.stdout)["nodes"]}
    assert rows == {a: "drained", b: None}  # nsqlookupd's /nodes still has both
    assert _restore(two, env, a)["ok"] is True
    assert _listed(two, topic) == {a, b}
    assert _state(env, a) == "restored"
