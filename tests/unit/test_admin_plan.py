"""Request construction for both families, as pure functions (no servers).

The redesign servers cannot be built here, so these pin its URLs to what the youzan
handlers read: lookupd leader ``/topic/create?partition_num&replicator[&orderedmulti][&extend]``,
``/topic/delete?partition=**``, nsqd channel ops with ``partition=``, setoffset bodies.
"""

from __future__ import annotations

from typing import Any

import pytest

from nsqctl import admin
from nsqctl.admin import AdminRequest, Node, Placement
from nsqctl.errors import ConfigError
from nsqctl.lookup.topology import Peer, TopicMeta, Topology
from nsqctl.stats.parse import parse_nsqd_stats


def urls(stages: list[list[AdminRequest]]) -> list[list[str]]:
    return [[r.url for r in stage] for stage in stages]


ORIGINAL = Placement(
    "t",
    "original",
    (Node("127.0.0.1:4151", "nsqd"), Node("127.0.0.1:4251", "nsqd")),
    ("127.0.0.1:4161", "127.0.0.1:4261"),
)
REDESIGN = Placement(
    "t",
    "redesign",
    (Node("10.0.0.1:4151", "nsqd", 0), Node("10.0.0.2:4151", "nsqd", 1)),
    ("10.0.0.9:4161",),
    TopicMeta(partition_num=2, replica=2),
)


# ----------------------------------------------------------------- topic create


def test_original_create_registers_on_every_lookupd_then_every_nsqd() -> None:
    stages = admin.plan_topic_create(
        "original", "t", lookupds=["a:4161", "b:4161"], nsqds=["n1:4151"]
    )
    assert urls(stages) == [
        ["http://a:4161/topic/create?topic=t", "http://b:4161/topic/create?topic=t"],
        ["http://n1:4151/topic/create?topic=t"],
    ]


def test_redesign_create_goes_to_the_leader_with_partition_options() -> None:
    stages = admin.plan_topic_create(
        "redesign", "t", leader="l:4161", partitions=4, replicas=2, ordered=True, ext=True
    )
    assert urls(stages) == [
        [
            "http://l:4161/topic/create?topic=t&partition_num=4&replicator=2"
            "&orderedmulti=true&extend=true"
        ]
    ]


def test_redesign_create_omits_flags_that_are_off() -> None:
    (stage,) = admin.plan_topic_create("redesign", "t", leader="l:4161")
    assert stage[0].target == "/topic/create?topic=t&partition_num=1&replicator=1"


@pytest.mark.parametrize(
    "kwargs",
    [{"partitions": 2}, {"replicas": 3}, {"ordered": True}, {"ext": True}],
)
def test_original_rejects_redesign_only_create_options(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="original NSQ has no partitions"):
        admin.plan_topic_create("original", "t", lookupds=["a:1"], **kwargs)


@pytest.mark.parametrize("kwargs", [{"partitions": 0}, {"partitions": 256}, {"replicas": 6}])
def test_redesign_rejects_out_of_range_create_options(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="must be between"):
        admin.plan_topic_create("redesign", "t", leader="l:1", **kwargs)


def test_redesign_create_without_leader_is_an_error() -> None:
    with pytest.raises(admin.AdminError, match="lookupd leader"):
        admin.plan_topic_create("redesign", "t")


# ----------------------------------------------------------------- topic delete / actions


def test_original_delete_hits_lookupds_before_the_producers() -> None:
    assert urls(admin.plan_topic_delete(ORIGINAL)) == [
        [
            "http://127.0.0.1:4161/topic/delete?topic=t",
            "http://127.0.0.1:4261/topic/delete?topic=t",
        ],
        [
            "http://127.0.0.1:4151/topic/delete?topic=t",
            "http://127.0.0.1:4251/topic/delete?topic=t",
        ],
    ]


def test_redesign_delete_removes_every_partition_on_the_leader() -> None:
    assert urls(admin.plan_topic_delete(REDESIGN, "10.0.0.9:4161")) == [
        ["http://10.0.0.9:4161/topic/delete?topic=t&partition=**"]
    ]


@pytest.mark.parametrize("action", ["pause", "unpause", "empty"])
def test_original_topic_actions_go_to_every_nsqd(action: str) -> None:
    assert urls(admin.plan_topic_action(action, ORIGINAL)) == [
        [
            f"http://127.0.0.1:4151/topic/{action}?topic=t",
            f"http://127.0.0.1:4251/topic/{action}?topic=t",
        ]
    ]


@pytest.mark.parametrize("action", ["pause", "empty"])
def test_redesign_has_no_topic_pause_or_empty(action: str) -> None:
    with pytest.raises(admin.AdminError, match=rf"`channel_{action}\(t, CHANNEL\)`"):
        admin.plan_topic_action(action, REDESIGN)


def test_topic_action_on_a_topic_without_nsqds_explains() -> None:
    bare = Placement("t", "original", (), ("a:4161",))
    with pytest.raises(admin.AdminError, match="no nsqd has it yet"):
        admin.plan_topic_action("pause", bare)


# ----------------------------------------------------------------- channel actions


def test_original_channel_create_registers_on_lookupds_and_nsqds() -> None:
    assert urls(admin.plan_channel_action("create", ORIGINAL, "c")) == [
        [
            "http://127.0.0.1:4161/channel/create?topic=t&channel=c",
            "http://127.0.0.1:4261/channel/create?topic=t&channel=c",
        ],
        [
            "http://127.0.0.1:4151/channel/create?topic=t&channel=c",
            "http://127.0.0.1:4251/channel/create?topic=t&channel=c",
        ],
    ]


def test_original_channel_pause_only_touches_nsqds() -> None:
    assert urls(admin.plan_channel_action("pause", ORIGINAL, "c")) == [
        [
            "http://127.0.0.1:4151/channel/pause?topic=t&channel=c",
            "http://127.0.0.1:4251/channel/pause?topic=t&channel=c",
        ]
    ]


@pytest.mark.parametrize("action", ["pause", "unpause", "empty", "delete", "skip", "unskip"])
def test_redesign_channel_ops_go_to_each_partition_leader(action: str) -> None:
    assert urls(admin.plan_channel_action(action, REDESIGN, "c")) == [
        [
            f"http://10.0.0.1:4151/channel/{action}?topic=t&channel=c&partition=0",
            f"http://10.0.0.2:4151/channel/{action}?topic=t&channel=c&partition=1",
        ]
    ]


def test_redesign_partition_option_narrows_to_one_leader() -> None:
    (stage,) = admin.plan_channel_action("empty", REDESIGN, "c", partition=1)
    assert [r.url for r in stage] == [
        "http://10.0.0.2:4151/channel/empty?topic=t&channel=c&partition=1"
    ]


def test_unknown_partition_names_the_existing_ones() -> None:
    with pytest.raises(ConfigError, match=r"no partition 7 \(partitions: \[0, 1\]\)"):
        admin.plan_channel_action("empty", REDESIGN, "c", partition=7)


def test_partition_option_is_refused_on_the_original() -> None:
    with pytest.raises(ConfigError, match="only on the redesign"):
        admin.plan_channel_action("empty", ORIGINAL, "c", partition=0)


@pytest.mark.parametrize("action", ["skip", "unskip", "setoffset"])
def test_redesign_only_channel_ops_are_refused_on_the_original(action: str) -> None:
    with pytest.raises(ConfigError, match="only on the redesign"):
        admin.plan_channel_action(action, ORIGINAL, "c", offset="special:-1")


def test_setoffset_sends_the_offset_as_the_body() -> None:
    (stage,) = admin.plan_channel_action("setoffset", REDESIGN, "c", offset="timestamp:1700000000")
    assert [r.body for r in stage] == [b"timestamp:1700000000"] * 2
    assert stage[0].describe() == (
        "POST /channel/setoffset?topic=t&channel=c&partition=0 body='timestamp:1700000000'"
    )


def test_per_partition_offsets_need_a_partition_when_there_are_several() -> None:
    with pytest.raises(ConfigError, match="give `partition`"):
        admin.plan_channel_action("setoffset", REDESIGN, "c", offset="virtual_queue:100")
    (stage,) = admin.plan_channel_action(
        "setoffset", REDESIGN, "c", offset="msgcount:5", partition=0
    )
    assert stage[0].body == b"msgcount:5"


def test_registered_channels_go_through_the_lookupd_leader() -> None:
    locked = Placement(
        "t",
        "redesign",
        REDESIGN.nsqds,
        REDESIGN.lookupds,
        TopicMeta(partition_num=2, disable_channel_auto_create=True),
    )
    # only registered: the nsqds refuse a local create on such a topic (HTTP 403)
    assert urls(admin.plan_channel_action("create", locked, "c", leader="l:4161")) == [
        ["http://l:4161/channel/create?topic=t&channel=c"]
    ]
    assert urls(admin.plan_channel_action("delete", locked, "c", leader="l:4161")) == [
        ["http://l:4161/channel/delete?topic=t&channel=c"]
    ]


def test_names_are_url_encoded() -> None:
    req = AdminRequest(Node("h:1", "nsqd"), "/topic/pause", (("topic", "a#ephemeral"),))
    assert req.url == "http://h:1/topic/pause?topic=a%23ephemeral"


# ----------------------------------------------------------------- offsets


@pytest.mark.parametrize(
    ("kwargs", "body"),
    [
        ({"timestamp": 1700000000}, "timestamp:1700000000"),
        ({"virtual_offset": 4096}, "virtual_queue:4096"),
        ({"msgcount": 10}, "msgcount:10"),
        ({"end": True}, "special:-1"),
    ],
)
def test_parse_offset_bodies(kwargs: dict[str, Any], body: str) -> None:
    assert admin.parse_offset(**kwargs) == body


@pytest.mark.parametrize("kwargs", [{}, {"timestamp": 1, "end": True}, {"msgcount": -1}])
def test_parse_offset_needs_exactly_one_valid_choice(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        admin.parse_offset(**kwargs)


# ----------------------------------------------------------------- placement


def test_placement_from_redesign_topology_uses_partition_leaders() -> None:
    leader = Peer("10.0.0.1", 4150, http_port=4151)
    other = Peer("10.0.0.2", 4150, http_port=4151)
    topo = Topology(
        "t",
        producers=(leader, other),
        partitions={0: leader, 1: other},
        meta=TopicMeta(partition_num=2),
        is_redesign=True,
    )
    placement = admin.placement_from_topology(topo, ["l:4161"])
    assert placement.family == "redesign"
    assert placement.nsqds == (Node("10.0.0.1:4151", "nsqd", 0), Node("10.0.0.2:4151", "nsqd", 1))


def test_placement_from_original_topology_uses_every_producer() -> None:
    topo = Topology("t", producers=(Peer("a", 4150, http_port=4151), Peer("b", 4150, 4151)))
    placement = admin.placement_from_topology(topo, ["l:4161"])
    assert placement.family == "original"
    assert [n.address for n in placement.nsqds] == ["a:4151", "b:4151"]
    assert all(n.partition is None for n in placement.nsqds)


def _stats(bodies: dict[str, dict[str, Any] | str]) -> admin.NsqdStats:
    """What :func:`nsqctl.admin.placement.fetch_stats` gives for these ``/stats`` bodies
    (a string: the reason that nsqd could not be read), parsed by the one parser."""
    return admin.NsqdStats(
        {
            a: parse_nsqd_stats(b, a, fetched_at=0.0)
            for a, b in bodies.items()
            if isinstance(b, dict)
        },
        {a: b for a, b in bodies.items() if isinstance(b, str)},
    )


def test_placement_from_stats_keeps_leaders_and_unreachable_nodes() -> None:
    stats = _stats(
        {
            "a:4151": {
                "topics": [
                    {
                        "topic_name": "t",
                        "topic_partition": 0,
                        "is_leader": True,
                        "channels": [{"channel_name": "c1"}],
                    },
                    {"topic_name": "t", "topic_partition": 1, "is_leader": False, "channels": []},
                    {"topic_name": "other", "topic_partition": 0, "is_leader": True},
                ]
            },
            "b:4151": "connection refused",
        }
    )
    placement = admin.placement_from_stats("t", stats)
    assert placement.family == "redesign"
    assert placement.nsqds == (Node("a:4151", "nsqd", 0),)
    assert placement.channels == ("c1",)
    assert placement.unreachable == (("b:4151", "connection refused"),)


def test_placement_from_original_stats() -> None:
    stats = _stats({"a:4151": {"topics": [{"topic_name": "t", "channels": []}]}, "b:4151": {}})
    placement = admin.placement_from_stats("t", stats)
    assert placement.family == "original"
    assert placement.nsqds == (Node("a:4151", "nsqd"),)


# ----------------------------------------------------------------- misc


@pytest.mark.parametrize(
    ("info", "family"),
    [
        ({"version": "1.3.0"}, "original"),
        ({"version": "0.3.7-HA.1.13.0"}, "redesign"),
        ({"version": "x", "ha_support": False}, "redesign"),
    ],
)
def test_family_of(info: dict[str, Any], family: str) -> None:
    assert admin.family_of(info) == family


def test_report_failure_names_every_failed_node() -> None:
    good = AdminRequest(Node("a:1", "nsqd"), "/topic/pause", (("topic", "t"),))
    bad = AdminRequest(Node("b:1", "nsqd", 3), "/topic/pause", (("topic", "t"),))
    report = admin.AdminReport("topic pause", "t", "original")
    report.results = [
        admin.NodeResult(good, "ok", 200),
        admin.NodeResult(bad, "failed", 500, "HTTP 500 boom"),
    ]
    assert not report.ok
    with pytest.raises(admin.AdminError) as err:
        report.raise_for_failures()
    assert str(err.value) == (
        "topic pause failed on 1 of 2 request(s): nsqd b:1 (partition 3) (HTTP 500 boom)"
    )
    assert report.to_json()["results"][1]["partition"] == 3


def test_describe_topic_reports_meta_and_partition_leaders() -> None:
    leader = Peer("10.0.0.1", 4150, http_port=4151, version="0.3.7-HA.1.13.0")
    topo = Topology(
        "t",
        producers=(leader,),
        partitions={0: leader, 1: leader},
        meta=TopicMeta(partition_num=2, replica=3, ordered=True, extend_support=True),
        channels=("b",),
        is_redesign=True,
    )
    info = admin.describe_topic(topo, ["a", "b"])
    assert info["family"] == "redesign"
    assert info["meta"] == {
        "partition_num": 2,
        "replicas": 3,
        "ordered": True,
        "ext": True,
        "multi_part": False,
        "disable_channel_auto_create": False,
    }
    assert [p["partition"] for p in info["partitions"]] == [0, 1]
    assert info["partitions"][0]["leader_http"] == "10.0.0.1:4151"
    assert info["channels"] == ["a", "b"]


# ----------------------------------------------------------------- a placement already known


def test_a_known_placement_plans_the_same_requests_as_a_found_one() -> None:
    """The dashboard sends what its last poll showed: each partition's leader, planned as
    the CLI plans a placement it looked up (no lookupd asked, none written to)."""
    known = admin.placement_from_leaders(
        "t", "redesign", [("10.0.0.1:4151", 0), ("10.0.0.2:4151", 1)]
    )
    assert known.nsqds == REDESIGN.nsqds and not known.lookupds
    assert urls(admin.plan_channel_action("pause", known, "c")) == urls(
        admin.plan_channel_action("pause", REDESIGN, "c")
    )
    original = admin.placement_from_leaders("t", "original", [("127.0.0.1:4151", None)])
    assert urls(admin.plan_topic_action("unpause", original)) == [
        ["http://127.0.0.1:4151/topic/unpause?topic=t"]
    ]
