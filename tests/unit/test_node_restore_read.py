"""``node restore`` on the redesign, reading which moves are undone already, against
scripted loopback servers playing youzan (tests/helpers/scripted_lookupd.py): a real
nsqlookupd cannot be made to fail the lookup of one topic while it answers another's."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from nsqctl.admin.drain.records import DrainRecord, MovedLeader, update_drain
from nsqctl.admin.drain.restore import restore_node
from tests.helpers.scripted_lookupd import Reply, Request, ScriptedLookupds
from tests.helpers.youzan_fake import lookupd_leader, redesign_peer

NOT_FOUND = Reply(status=404, body={"message": "NOT_FOUND"})
META = {"partition_num": 1, "replica": 2, "ordered": False, "multi_part": False}


class Cluster:
    """Two nsqds; nsqd 1 was drained, its copies of ``broken`` and ``back`` moved to nsqd 2.
    ``back`` has nsqd 1 in sync again (youzan put it back); the lookup of ``broken`` fails
    (HTTP 500, as a lookupd in trouble answers)."""

    def __init__(self) -> None:
        self.lookupd = ""
        self.nsqds: list[str] = []

    def peer(self, n: int) -> dict[str, Any]:
        return redesign_peer(n, self.nsqds[n - 1])

    def handle(self, request: Request) -> Reply:
        path, params = request.path, request.params
        if request.address == self.lookupd:
            if path == "/listlookup":
                leader = lookupd_leader(self.lookupd)
                return Reply(body={"lookupdnodes": [leader], "lookupdleader": leader})
            if path == "/nodes":
                return Reply(body={"producers": [self.peer(1), self.peer(2)]})
            if path == "/lookup" and params.get("topic") == "back":
                body = {
                    "channels": [],
                    "producers": [self.peer(1), self.peer(2)],
                    "partitions": {"0": self.peer(2)},
                    "meta": META,
                }
                return Reply(body=body)
            if path == "/lookup":
                return Reply(status=500, body={"message": "INTERNAL_ERROR"})
            return NOT_FOUND
        n = self.nsqds.index(request.address) + 1
        if path == "/config/rpc_port":
            return Reply(body="4250")
        if path == "/config/id":
            return Reply(body=str(n))
        if path == "/coordinator/stats" and n == 2 and params.get("topic") == "back":
            isr = [{"node_id": f"127.0.0.1:4250:{4150 + i}:{i}"} for i in (2, 1)]
            stat = {"name": "back", "partition": 0, "isr_stats": isr, "catchup_stats": None}
            return Reply(body={"topic_coord_stats": [stat]})
        return NOT_FOUND


async def test_a_topic_that_cannot_be_read_does_not_stop_the_check_of_the_others(
    tmp_path: Path,
) -> None:
    """One failed read ended the check for every later move: ``back``, restored already,
    was moved again, refused, and the restore failed for it."""
    fake = Cluster()
    async with ScriptedLookupds(fake.handle) as servers:
        fake.lookupd, *fake.nsqds = await servers.start(3)
        node, target = fake.nsqds
        moved = tuple(MovedLeader(t, 0, node, target, copy=True) for t in ("broken", "back"))
        now = time.time()
        record = DrainRecord(
            node, "redesign", "drained", now, now, (fake.lookupd,), ("broken", "back"), moved
        )
        update_drain(node, lambda _old: record, tmp_path)
        result = await restore_node([fake.lookupd], node, wait=2, state_dir=tmp_path)
    assert f"back partition 0: in sync on {node} again already, nothing to move" in result.notes
    assert [f.split(":", 1)[0] for f in result.failed] == ["broken partition 0"], result.failed
    assert not result.ok  # what could not be read is not called restored
