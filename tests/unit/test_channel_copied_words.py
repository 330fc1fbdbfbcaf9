"""What ``channel create`` says its new channel reached: the topic's partitions, or the
ones a create narrowed to (``--partition``), never the count of those as the topic's."""

from __future__ import annotations

from nsqctl.admin.partitions.channel_copies import ChannelCopies, copied_words

A, B = "127.0.0.1:4151", "127.0.0.1:4251"


def _copies(*partitions: int) -> dict[int, ChannelCopies]:
    return {p: ChannelCopies(p, (A, B), ()) for p in partitions}


def test_a_create_on_one_partition_names_that_partition() -> None:
    assert copied_words(_copies(0), narrowed=True) == "every copy of partition 0 (2 copies)"
    assert copied_words(_copies(0, 2), narrowed=True) == (
        "every copy of partitions 0, 2 (2 copies each)"
    )


def test_a_create_on_every_partition_counts_the_topics() -> None:
    assert copied_words(_copies(0, 1, 2, 3), narrowed=False) == (
        "every copy of the topic's 4 partition(s) (2 copies each)"
    )
