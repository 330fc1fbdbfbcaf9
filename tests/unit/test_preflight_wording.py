"""How a refused admin action names the nsqds that did not answer: one form, "nsqd
ADDRESS (why)", whether the reason came from the /ping asked before the plan or from
the /stats read that found the topic (whose reasons name the nsqd themselves)."""

from __future__ import annotations

import asyncio

import pytest

from nsqctl.admin.partitions.state import (
    NsqdNode,
    PartitionState,
    RegisteredNsqds,
    TopicState,
)
from nsqctl.admin.preflight import check_nsqds_answer, in_sync_refusals
from nsqctl.admin.requests import admin_client
from nsqctl.errors import AdminError
from nsqctl.lookup.topology import TopicMeta


async def _refusal(unreadable: list[tuple[str, str]]) -> str:
    async with admin_client() as client:
        with pytest.raises(AdminError) as caught:
            await check_nsqds_answer(client, "topic pause t", [], unreadable)
    return str(caught.value)


def test_an_nsqd_the_stats_read_could_not_reach_is_named_once_with_its_reason() -> None:
    reason = "nsqd 127.0.0.1:4151 /stats: connection refused or host unreachable"
    text = asyncio.run(_refusal([("127.0.0.1:4151", reason)]))
    assert text == (
        "topic pause t refused, nothing was changed: nsqd 127.0.0.1:4151 (/stats: "
        "connection refused or host unreachable) did not answer, so it would change on "
        "the other nsqds only; run it again once every nsqd answers"
    )


def test_a_hung_isr_member_is_said_to_hang_not_to_be_down() -> None:
    """An ISR member nsqlookupd lists that does not answer (SIGSTOPped) was said to be
    down, and to be brought back: it is there, stopped, and is to be resumed."""
    leader, hung_http, hung_tcp = "127.0.0.1:4151", "127.0.0.1:4251", "127.0.0.1:4250"
    hung_id = "127.0.0.1:4252:4250:2"  # youzan's node id: ip:rpc_port:tcp_port:n
    nodes = RegisteredNsqds(
        {
            leader: NsqdNode(leader, "127.0.0.1:4150", "127.0.0.1:4152:4150:1"),
            "127.0.0.1:4351": NsqdNode("127.0.0.1:4351", "127.0.0.1:4350", "127.0.0.1:4352:4350:3"),
        }
    )
    nodes.silent = ((hung_http, hung_tcp),)
    meta = TopicMeta.from_json({"partition_num": 2, "replica": 3})
    state = TopicState(
        "T",
        meta,
        {
            0: PartitionState(0, leader, (leader, "127.0.0.1:4351", hung_id)),
            1: PartitionState(1, leader, (leader, hung_id)),
        },
    )
    # still writable with 2 of 3: the ISR still lists it
    assert in_sync_refusals(state, 0, nodes) == [
        f"partition 0's ISR still lists {hung_tcp}, registered but not answering (stopped, or "
        "crashed and not yet dropped): its leader would apply the change and fail to pass it "
        "on; resume it (or bring it back if it crashed) and run it again, or stop it for good "
        "and run it again once nsqlookupd's topic check has dropped it from the ISR"
    ]
    # 1 of 3 up: short of in-sync copies
    assert in_sync_refusals(state, 1, nodes) == [
        f"partition 1 has 1 in-sync copy up of an ISR of 2 ({hung_tcp} in its ISR is "
        "registered but not answering (stopped, or crashed and not yet dropped)) and youzan "
        f"needs 2 of 3 to apply a change: resume {hung_tcp} (or bring it back if crashed) "
        "first (or stop it for good, or wait for nsqlookupd to drop it: it then repairs the "
        "partition without it)"
    ]
