"""The producer's routing rules on hand-made topologies: no servers, no event loop."""

from __future__ import annotations

import pytest

import nsqctl
from nsqctl.addresses import HostPort
from nsqctl.errors import (
    ConfigError,
    NoSuchPartitionError,
    PartitionUnavailableError,
    PublishError,
)
from nsqctl.lookup.topology import Peer, TopicMeta, Topology
from nsqctl.producer.routing import Router, Target, check_keyed_send, check_partition
from nsqctl.sharding import murmur3_partition, partition_for_key, pick_node_for_key

A = Peer("127.0.0.1", 4150)
B = Peer("127.0.0.1", 4250)
C = Peer("127.0.0.1", 10050)


def redesign(partitions: dict[int, Peer], num: int) -> Topology:
    return Topology(
        topic="t", partitions=partitions, meta=TopicMeta(partition_num=num), is_redesign=True
    )


def original(*peers: Peer) -> Topology:
    return Topology(topic="t", producers=peers)


def test_unkeyed_publishes_go_round_robin_over_partitions_per_topic() -> None:
    router = Router()
    topo = redesign({0: A, 1: B}, 2)
    chosen = [router.choose("t", topo, None, None) for _ in range(4)]
    assert chosen == [Target(A, 0), Target(B, 1), Target(A, 0), Target(B, 1)]
    assert router.choose("other", topo, None, None) == Target(A, 0)  # its own position


def test_unkeyed_publishes_go_round_robin_over_original_nodes() -> None:
    router = Router()
    topo = original(A, B)
    assert [router.choose("t", topo, None, None).peer for _ in range(3)] == [A, B, A]
    assert router.choose("t", topo, None, None).partition is None


def test_a_retry_goes_to_an_untried_nsqd_then_to_the_one_that_failed_longest_ago() -> None:
    """An unkeyed retry skips the nsqds its call failed on, whatever the round-robin
    position (shared with other calls) says; when it failed on all of them, it goes to
    the oldest failure. A keyed publish has one place and ignores ``avoid``."""
    router = Router()
    topo = original(A, B, C)
    a, b, c = (peer.tcp_address for peer in (A, B, C))
    assert {router.choose("t", topo, None, None, [a]).peer for _ in range(3)} == {B, C}
    assert router.choose("t", topo, None, None, [a, b]).peer == C
    assert {router.choose("t", topo, None, None, [b, c, a]).peer for _ in range(3)} == {B}
    spread = redesign({0: A, 1: B, 2: A}, 3)
    assert {router.choose("t", spread, None, None, [a]) for _ in range(3)} == {Target(B, 1)}
    assert router.choose("t", spread, 0, None, [a]) == Target(A, 0)
    key = next(f"k{i}" for i in range(100) if pick_node_for_key(f"k{i}", [a, b, c]) == a)
    assert router.choose("t", topo, None, key, [a]).peer == A


def test_pinned_partition_goes_to_its_leader() -> None:
    target = Router().choose("t", redesign({0: A, 1: B}, 2), 1, None)
    assert target == Target(B, 1)
    assert target.key == ("127.0.0.1:4250", 1) and target.route == 1


def test_pinned_partition_on_given_nsqds_moves_on_when_one_does_not_lead_it() -> None:
    """Given nsqd addresses only (no lookupd), nothing says which leads a partition: it is
    pinned on the first, and moved on once per refusal of the nsqd it is pinned on (a
    second publish refused by that same nsqd, still in flight then, moves it no further)."""
    router = Router(direct=True)
    topo = Topology.from_nsqd_addresses(["127.0.0.1:4150", "127.0.0.1:4250"], topic="t")
    first = router.choose("t", topo, 1, None)
    assert first == Target(A, 1)
    router.not_led_by("t", topo, first)
    router.not_led_by("t", topo, first)
    assert router.choose("t", topo, 1, None) == Target(B, 1)
    assert router.choose("t", topo, 0, None) == Target(A, 0)  # each partition its own pin
    router.not_led_by("t", topo, Target(B, 1))
    assert router.choose("t", topo, 1, None) == Target(A, 1)  # round again: a leader moves
    with pytest.raises(ConfigError, match="no partitions"):
        Router().choose("t", topo, 1, None)  # from lookupds: an original cluster


def test_pinned_partition_beyond_the_count_cannot_appear_by_waiting() -> None:
    with pytest.raises(NoSuchPartitionError, match="numbered 0-1") as err:
        Router().choose("t", redesign({0: A, 1: B}, 2), 2, None)
    assert err.value.partition == 2 and err.value.setting == "partition"


def test_pinned_partition_without_a_leader_may_get_one() -> None:
    with pytest.raises(PartitionUnavailableError, match="no writable leader") as err:
        Router().choose("t", redesign({0: A}, 2), 1, None)
    assert err.value.partition == 1 and not isinstance(err.value, NoSuchPartitionError)


def test_partition_on_the_original_family_is_bad_input() -> None:
    with pytest.raises(ConfigError, match="no partitions") as err:
        Router().choose("t", original(A), 0, None)
    assert err.value.setting == "partition"
    assert "--partition" not in str(err.value)  # a library message: no CLI flags


def test_a_shard_key_without_a_partition_count_is_refused_only_on_the_redesign() -> None:
    """Direct nsqd addresses give no partition count: the key was routed to a node."""
    target = Router().choose("t", original(A, B), None, "user-1")
    assert target.partition is None
    check_keyed_send("t", target, "user-1", is_redesign=False)  # original: a node per key
    check_keyed_send("t", target, None, is_redesign=True)  # unkeyed: nsqd picks
    check_keyed_send("t", Target(A, 1), "user-1", is_redesign=True)  # routed by the meta
    with pytest.raises(ConfigError, match="publish through the lookupds") as err:
        check_keyed_send("t", target, "user-1", is_redesign=True)
    assert err.value.setting == "lookupd_http"
    assert "--lookupd" not in str(err.value)  # a library message: no CLI flags


@pytest.mark.parametrize("bad", [-1, True, 1.0])
def test_a_partition_no_topic_can_have_is_rejected_before_any_lookup(bad: object) -> None:
    with pytest.raises(ConfigError, match="numbered from 0") as err:
        check_partition(bad)  # type: ignore[arg-type]
    assert err.value.setting == "partition"
    check_partition(None)
    check_partition(0)


def test_shard_key_picks_the_official_clients_partition() -> None:
    topo = redesign({0: A, 1: B, 2: C}, 3)
    for key in ("user-1", "user-2", "order-77", b"raw", 12345):
        part = murmur3_partition(key, 3)
        assert Router().choose("t", topo, None, key) == Target(topo.partitions[part], part)
    java = Router(hash="java")
    assert java.choose("t", topo, None, "hello").partition == partition_for_key("hello", 3, "java")


def test_shard_key_never_reroutes_when_its_partition_has_no_leader() -> None:
    key = "user-1"
    part = murmur3_partition(key, 2)
    topo = redesign({1 - part: A}, 2)
    with pytest.raises(PartitionUnavailableError, match="not rerouting") as err:
        Router().choose("t", topo, None, key)
    assert err.value.partition == part


def test_shard_key_without_a_partition_count_cannot_shard() -> None:
    topo = Topology(topic="t", is_redesign=True)
    with pytest.raises(PartitionUnavailableError, match="no partition count") as err:
        Router().choose("t", topo, None, "k")
    assert err.value.partition is None


def test_shard_key_on_the_original_picks_one_node_whatever_the_list_order() -> None:
    keys = [f"user-{i}" for i in range(20)]
    forward = [Router().choose("t", original(A, B, C), None, k).peer for k in keys]
    backward = [Router().choose("t", original(C, B, A), None, k).peer for k in keys]
    assert forward == backward and set(forward) == {A, B, C}
    nodes = [A.tcp_address, B.tcp_address, C.tcp_address]
    assert forward[0].tcp_address == pick_node_for_key(keys[0], nodes)
    assert isinstance(pick_node_for_key(keys[0], nodes), HostPort)


def test_nothing_to_publish_to_says_whether_the_topic_exists() -> None:
    with pytest.raises(nsqctl.NotFoundError, match="does not exist on any lookupd") as caught:
        Router().choose("t", Topology(topic="t", topic_not_found=True), None, None)
    assert isinstance(caught.value, nsqctl.TopicNotFoundError)
    assert caught.value.topic == "t"
    with pytest.raises(PublishError, match="no writable nsqd"):
        Router().choose("t", Topology(topic="t"), None, None)
    with pytest.raises(PublishError, match="no writable nsqd"):
        Router().choose("t", Topology(topic="t"), None, "k")


def test_a_redesign_topic_with_no_writable_partition_says_why_and_what_to_do() -> None:
    """nsqlookupd names no writable leader: electing one, or an ISR below quorum (more
    than half the replicas must be in sync); the error names the quorum and what to do."""
    replicated = Topology(topic="t", meta=TopicMeta(partition_num=2, replica=3), is_redesign=True)
    with pytest.raises(PartitionUnavailableError) as caught:
        Router().choose("t", replicated, None, None)
    text = str(caught.value)
    assert "none of its 2" in text and "fewer than 2 of its 3 replicas" in text, text
    assert "wait for the ISR" in text and "`lookup(t)`" in text, text
    with pytest.raises(PartitionUnavailableError, match="fewer than 2 of its 3") as pinned:
        Router().choose("t", replicated, 1, None)
    assert pinned.value.partition == 1
    single = redesign({}, 1)  # one replica: no ISR to wait for, only its leader
    with pytest.raises(PartitionUnavailableError, match="leader's nsqd is down") as caught:
        Router().choose("t", single, None, None)
    assert "ISR" not in str(caught.value)
