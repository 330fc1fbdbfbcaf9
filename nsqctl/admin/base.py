"""What every admin module shares: the v1 ``Accept`` header, the timeout, the admin
errors and the response unwrapping, at the bottom of the layering so
any module may import them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nsqctl.errors import AdminError, ConfigError, TopicNotFoundError
from nsqctl.lookup.model import unwrap_payload

NSQ_V1 = {"Accept": "application/vnd.nsq; version=1.0"}
TIMEOUT = 10.0


def unwrap_response(body: object) -> dict[str, Any]:
    """Both response shapes (``{"status_code", "data"}``-wrapped or bare) as a dict."""
    data = unwrap_payload(body)[0]
    return data if isinstance(data, dict) else {}


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
