"""What a refused channel action says to do while etcd is down.

nsqlookupd changes no ISR without etcd: it cannot drop a lost copy, replace it, or let a
caught-up one join. So the usual way out of a refusal (wait for nsqlookupd's topic check
to drop the lost copy, or for a copy to catch up) would never come: the refusal says to
bring etcd back instead.
"""

from __future__ import annotations

from nsqctl.admin.partitions.state import NsqdNode, PartitionState, RegisteredNsqds, TopicState
from nsqctl.admin.preflight import in_sync_refusals
from nsqctl.lookup.topology import TopicMeta

LEADER, OTHER = "127.0.0.1:4151", "127.0.0.1:4351"
LOST_ID, LOST_TCP = "127.0.0.1:4252:4250:2", "127.0.0.1:4250"  # ip:rpc_port:tcp_port:n
HUNG_HTTP, HUNG_TCP, HUNG_ID = "127.0.0.1:4451", "127.0.0.1:4450", "127.0.0.1:4452:4450:4"


def cluster(replicas: int, *isr: str) -> tuple[TopicState, RegisteredNsqds]:
    """Partition 0 led by LEADER with ``isr``; LEADER and OTHER answer, HUNG is listed by
    nsqlookupd but silent, LOST is listed by no one."""
    nodes = RegisteredNsqds(
        {
            LEADER: NsqdNode(LEADER, "127.0.0.1:4150", "127.0.0.1:4152:4150:1"),
            OTHER: NsqdNode(OTHER, "127.0.0.1:4350", "127.0.0.1:4352:4350:3"),
        }
    )
    nodes.silent = ((HUNG_HTTP, HUNG_TCP),)
    meta = TopicMeta.from_json({"partition_num": 1, "replica": replicas})
    return TopicState("T", meta, {0: PartitionState(0, LEADER, isr)}), nodes


def test_a_lost_isr_member_cannot_be_dropped_while_etcd_is_down() -> None:
    state, nodes = cluster(3, LEADER, OTHER, LOST_ID)
    [said] = in_sync_refusals(state, 0, nodes, etcd_down=True)
    assert said == (
        f"partition 0's ISR still lists {LOST_TCP}, which is down: its leader would apply "
        "the change and fail to pass it on, and nsqlookupd cannot drop it from the ISR while "
        "etcd is down: bring etcd back, then run it again once nsqlookupd's topic check has "
        "dropped it"
    )
    # with etcd up the drop comes by itself
    [said] = in_sync_refusals(state, 0, nodes)
    assert said.endswith(
        "nsqlookupd drops a lost copy from the ISR in its topic check, run it again then"
    )


def test_a_hung_isr_member_is_to_be_resumed_not_waited_out_while_etcd_is_down() -> None:
    state, nodes = cluster(3, LEADER, OTHER, HUNG_ID)
    [said] = in_sync_refusals(state, 0, nodes, etcd_down=True)
    assert said.endswith(
        "resume it (or bring it back if it crashed) and run it again: nsqlookupd cannot drop "
        "it from the ISR while etcd is down"
    ), said
    assert "stop it for good" not in said


def test_too_few_in_sync_copies_wait_for_etcd_first() -> None:
    state, nodes = cluster(2, LEADER, LOST_ID)
    [said] = in_sync_refusals(state, 0, nodes, etcd_down=True)
    assert said == (
        f"partition 0 has 1 in-sync copy up of an ISR of 2 ({LOST_TCP} in its ISR is down) "
        f"and youzan needs 2 of 2 to apply a change: bring etcd back and bring {LOST_TCP} back "
        "first: nsqlookupd can change no ISR while etcd is down (neither drop a lost copy nor "
        "let a caught-up one join)"
    )
    # a copy catching up cannot join the ISR without etcd: not "wait for it to catch up"
    catching = TopicState(
        "T", state.meta, {0: PartitionState(0, LEADER, (LEADER,), catchup=(OTHER,))}
    )
    [said] = in_sync_refusals(catching, 0, nodes, etcd_down=True)
    assert "wait for" not in said and said.endswith(
        "youzan needs 2 of 2 to apply a change: bring etcd back first: nsqlookupd can change "
        "no ISR while etcd is down (neither drop a lost copy nor let a caught-up one join)"
    ), said
    [said] = in_sync_refusals(catching, 0, nodes)
    assert f"wait for {nodes[OTHER].tcp} to catch up" in said


def test_a_partition_whose_isr_is_unread_is_refused_while_etcd_is_down() -> None:
    """nsqlookupd's cache goes stale for a topic changed just before etcd went away: its
    lookup then names no leader for any partition, and no ISR can be read. A leader keeps
    a channel change its ISR failed, so with etcd down nothing may go unchecked; with
    etcd up, nsqlookupd would name the leader, and the rule stays as it was."""
    _, nodes = cluster(2, LEADER, OTHER)
    meta = TopicMeta.from_json({"partition_num": 1, "replica": 2})
    unread = TopicState("T", meta, {})
    [said] = in_sync_refusals(unread, 0, nodes, etcd_down=True)
    assert said.startswith("partition 0's ISR could not be read (etcd is down")
    assert said.endswith("bring etcd back and run it again")
    assert in_sync_refusals(unread, 0, nodes) == []
