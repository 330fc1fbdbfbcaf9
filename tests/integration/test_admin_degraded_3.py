"""The redesign's partition operations while a partition of another topic has no live copy,
on one private cluster (3 nsqd: a move needs a live nsqd besides the leader).

Topic ``split`` (3 partitions, 1 replica) has a copy on every nsqd; topic ``one`` (1
partition, 1 replica) is led by one of them. The nsqd holding a partition of ``split``
that does not lead ``one`` is killed (-9): that partition has no live copy, and youzan's
nsqlookupd calls the cluster unstable until one is back. It refuses an expand and a move
(of any topic) with "the cluster is unstable" meanwhile, so both are refused at once,
dry run and real run alike, naming the partition, and so is a drain, which moves
leaders; a meta update it takes all the same (its ``ChangeTopicMetaParam`` does not
ask), so ``topic update`` still completes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from nsqctl.servers import process
from tests.conftest import StartCluster
from tests.helpers.cli import invoke, run_main
from tests.helpers.redesign import TopicSpec, create_topics, eventually, unique
from tests.integration.test_degraded_actions import error_line

pytestmark = [pytest.mark.timeout(300)]


def lookup(lookupd: list[str], topic: str) -> dict[str, Any]:
    result = invoke("lookup", topic, "--json", *lookupd)
    assert result.exit_code == 0, result.output
    info: dict[str, Any] = json.loads(result.stdout)
    return info


@pytest.mark.redesign
def test_expand_and_move_are_refused_at_once_and_update_completes(
    start_cluster: StartCluster,
) -> None:
    c = start_cluster("redesign", nsqd=3)
    split, one = unique("split"), unique("one")
    asyncio.run(create_topics(c.lookupd_http, {split: TopicSpec(3, 1), one: TopicSpec(1, 1)}))
    lookupd = ["--lookupd", c.lookupd_http[0]]
    [part] = lookup(lookupd, one)["partitions"]
    led_by = part["leader_http"]
    held = {p["leader_http"]: p["partition"] for p in lookup(lookupd, split)["partitions"]}
    victim = next(n for n in c.nsqds if n.http_address != led_by)
    dead = held[victim.http_address]
    target = next(a for a in c.nsqd_http if a not in (led_by, victim.http_address))
    process.kill_hard(victim)
    eventually(
        lambda: any(not p["live_copy"] for p in lookup(lookupd, split)["partitions"]),
        30,
        "a partition of the split topic without a live copy",
    )

    for args, what in (
        (("topic", "expand", one, "--partitions", "2"), f"topic expand {one}"),
        (("topic", "move", one, "--partition", "0", "--to", target), f"topic move {one}"),
    ):
        dry = run_main(*args, *lookupd, "--dry-run")
        done = run_main(*args, *lookupd, "--yes", "--wait", "5")
        line = error_line(dry, 1, alone=True)
        assert error_line(done, 1, alone=True) == line
        assert f"{what} refused, nothing was changed" in line, line
        assert f"topic {split} partition {dead} has none" in line, line
        assert "no live copy" in line and "bring one of its nsqds back" in line, line
    # nothing was sent: the topic keeps its one partition, led where it was
    [part] = lookup(lookupd, one)["partitions"]
    assert part["leader_http"] == led_by

    # nsqlookupd takes a meta update while the cluster is unstable: not refused
    update = ("topic", "update", one, "--retention-days", "3", *lookupd)
    dry = run_main(*update, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    done = run_main(*update, "--yes", "--wait", "5")
    assert done.returncode == 0, (done.stdout, done.stderr)

    # A drain moves leaders: refused up front too, its dry run alike, naming the
    # partition, nothing moved (it found out one refused move at a time, each move tried
    # three times, and its dry run said the drain would go ahead)
    drain = ("node", "drain", led_by, *lookupd)
    dry = run_main(*drain, "--dry-run")
    done = run_main(*drain, "--timeout", "60")
    for result in (dry, done):
        said = result.stdout + result.stderr
        assert result.returncode == 1, said
        assert f"{split}/{dead}: no leader and no live copy" in said, said
        assert "cannot be drained now" in said and "do not stop it" in said, said
        assert "topic move" not in said, said  # no move was tried
    [part] = lookup(lookupd, one)["partitions"]
    assert part["leader_http"] == led_by
