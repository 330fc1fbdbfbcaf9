"""What every admin module shares: the v1 ``Accept`` header, the timeout and the admin
errors, at the bottom of the layering so any module may import them. (The pre-v1
envelope is unwrapped where every answer is decoded: :func:`nsqctl.answers.unwrapped`.)"""

from __future__ import annotations

from collections.abc import Sequence

from nsqctl.errors import AdminError, ConfigError, TopicNotFoundError

NSQ_V1 = {"Accept": "application/vnd.nsq; version=1.0"}
TIMEOUT = 10.0


def topic_not_found(topic: str, where: Sequence[str]) -> TopicNotFoundError:
    """The one-line unknown-topic error every command uses."""
    return TopicNotFoundError(
        topic=topic,
        message=f"topic {topic!r} not found (asked {', '.join(where) or 'nobody'}): list "
        f"topics with `topic_list()`, or create it with `topic_create({topic})`",
    )


class FamilyUnsupportedError(ConfigError, AdminError):
    """The cluster's family has no such action (a topic pause on the redesign, a partition
    operation on the original NSQ). Asking for it is bad input for that cluster, found
    before anything is sent, so front ends treat it as they treat any bad input (the CLI:
    exit 2), whichever family and command."""
