"""The isr rule, a topic's state and ``lookup`` judge a partition by what the topic needs:
an ISR shorter than its replicas, or (replicas unknown) a copy meant to join the ISR that
has not. A move or drain leaves its source's copy outside both the ISR and the catch-up
list until nsqlookupd tells that nsqd to drop it (youzan's ``prepareUpdateTopicInfo``:
"not a topic related to me"): named, never warned about. Views built from records."""

from __future__ import annotations

from nsqctl.admin.describe import describe_topic
from nsqctl.cli.commands.lookup import render
from nsqctl.health import RuleSet, evaluate
from nsqctl.lookup.topology import Peer, TopicMeta, Topology
from nsqctl.stats.model import ClusterSnapshot, CoordInfo, NodeStats, TopicPartitionStats
from nsqctl.stats.view import ClusterView, build_view
from tests.helpers.stats import topic_stats

A, B, C = "127.0.0.1:4151", "127.0.0.1:4251", "127.0.0.1:4351"


def _view(
    isr: tuple[str, ...], catchup: tuple[str, ...] = (), replicas: int | None = 2
) -> ClusterView:
    """Partition 0 of ``t`` led by A, with copies on B and C."""
    copies: dict[str, TopicPartitionStats] = {
        A: topic_stats(A, "t", partition=0),
        B: topic_stats(B, "t", partition=0, leader=False),
        C: topic_stats(C, "t", partition=0, leader=False),
    }
    nodes = tuple(NodeStats(n, 0.0, "up", is_redesign=True, topics=(s,)) for n, s in copies.items())
    meta = {} if replicas is None else {"t": TopicMeta(partition_num=1, replica=replicas)}
    coord = (CoordInfo("t", 0, A, isr=isr, catchup=catchup),)
    return build_view(ClusterSnapshot(0.0, nodes, coordinator=coord, topic_meta=meta))


def _isr(view: ClusterView) -> tuple[str, str]:
    (found,) = [f for f in evaluate([view], RuleSet.parse(["isr=warn"], defaults=False))]
    return found.status, found.message


def test_an_old_copy_beside_a_full_isr_is_named_not_warned() -> None:
    view = _view(isr=(A, B))
    status, message = _isr(view)
    assert status == "ok", message
    assert message == f"2 in sync; old copy on {C}, removed by nsqlookupd later"
    topic = view.topic("t")
    assert topic is not None and topic.severity == "ok" and topic.out_of_sync == 0


def test_a_copy_catching_up_beside_a_full_isr_is_a_move_under_way() -> None:
    status, message = _isr(_view(isr=(A, B), catchup=(C,)))
    assert (status, message) == ("ok", f"2 in sync; catching up: {C}")


def test_a_short_isr_warns_and_names_the_replicas_outside_it() -> None:
    view = _view(isr=(A,), catchup=(B,), replicas=2)
    status, message = _isr(view)
    assert status == "warn"
    # beside a short ISR no copy is an old one: C is a replica the ISR lacks too
    assert (
        message
        == f"ISR short: 1 of 2 replicas in sync ({A}); catching up: {B}; not in the ISR: {C}"
    )
    topic = view.topic("t")
    assert topic is not None and topic.severity == "warn" and topic.out_of_sync == 1


def test_with_replicas_unknown_a_copy_catching_up_is_behind() -> None:
    status, message = _isr(_view(isr=(A, B), catchup=(C,), replicas=None))
    assert (status, message) == ("warn", f"{C} not in the ISR (2 in sync)")


def test_lookup_lists_the_replicas_and_the_old_copy_apart() -> None:
    view = _view(isr=(A, B))
    topo = Topology(
        "t",
        producers=(Peer.from_address("127.0.0.1:4150"),),
        partitions={0: Peer("127.0.0.1", 4150, http_port=4151)},
        meta=TopicMeta(partition_num=1, replica=2),
        is_redesign=True,
    )
    info = describe_topic(topo, [], view)
    (part,) = info["partitions"]
    assert part["replicas"] == [A, B] and part["old_copies"] == [C]
    assert info["warnings"] == [] and info["complete"]
    (line,) = [x for x in render(info) if x.startswith("     0")]
    assert line.endswith(
        f"replicas {A},{B}  isr {A},{B}  (old copy on {C}, removed by nsqlookupd later)"
    )
