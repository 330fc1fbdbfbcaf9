"""``nsqctl tail`` on the redesign (real session cluster): what it refuses up front
rather than waiting in silence, and the ``%r`` token of an untraced message. Both tests
read one 1-partition topic, created once (creating a topic is the slow part)."""

from __future__ import annotations

import asyncio

import pytest

from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import NSQCTL, assert_one_line_error
from tests.helpers.redesign import TopicSpec, create_topics, nsqctl, run_process, unique

pytestmark = pytest.mark.redesign


@pytest.fixture(scope="module")
def one_partition(redesign_cluster: Cluster) -> tuple[str, list[str]]:
    """A topic of one partition with channel ``c``, and the lookupd flags to reach it."""
    lookupd = redesign_cluster.lookupd_http[0]
    topic = unique("tail_one")
    asyncio.run(create_topics([lookupd], {topic: TopicSpec(partitions=1)}))
    return topic, ["--lookupd", lookupd]


def test_a_partition_the_topic_lacks_is_refused(one_partition: tuple[str, list[str]]) -> None:
    """pub refuses `--partition 99999` from the lookup's topology; tail waited in silence."""
    topic, where = one_partition
    proc = run_process([NSQCTL, "tail", topic, "--partition", "99999", "-n", "1", *where])
    line = assert_one_line_error(proc, 2)
    assert "99999" in line and "1 partition(s)" in line, line


def test_r_is_empty_for_an_untraced_message(one_partition: tuple[str, list[str]]) -> None:
    """The redesign sends trace id 0 for an untraced publish: `%r` prints nothing there."""
    topic, where = one_partition
    nsqctl("pub", topic, "plain", *where)
    nsqctl("pub", topic, "--trace", "77", "traced", *where)
    out = nsqctl("tail", topic, "-n", "2", "-c", "c", "--format", "%r|%s\\n", *where)
    assert sorted(out.splitlines()) == [b"77|traced", b"|plain"]
