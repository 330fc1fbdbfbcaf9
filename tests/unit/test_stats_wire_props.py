"""Decoding nsqd's ``/stats``: any body of any JSON shape gives a result, a
:class:`StatsProtocolError`, or a ``ValueError`` naming the field that does not fit (the
poller reports either as that nsqd's bad answer), never another exception."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nsqctl.stats.parse import StatsProtocolError, parse_nsqd_body
from tests.helpers.json_shapes import json_like, keyed_like

KEYS = [
    "topic_name",
    "channel_name",
    "depth",
    "message_count",
    "partition",
    "is_leader",
    "paused",
    "clients",
    "channels",
    "in_flight_count",
    "client_id",
    "remote_address",
    "topics",
    "health",
    "version",
    "start_time",
    "e2e_processing_latency",
    "skipped",
]
NEAR = keyed_like(KEYS)


def _parsed_or_refused(payload: Any) -> None:
    body = json.dumps(payload)
    try:
        parse_nsqd_body(body, "127.0.0.1:4151", fetched_at=0.0)
    except StatsProtocolError:
        pass
    except ValueError as err:  # msgspec's ValidationError: the field's path is named
        assert " - at `$" in str(err), err


@settings(max_examples=150, deadline=None)
@given(payload=json_like)
def test_any_json_body(payload: Any) -> None:
    _parsed_or_refused(payload)


@settings(max_examples=300, deadline=None)
@given(payload=st.dictionaries(st.sampled_from(["topics", "data", "health", "version"]), NEAR))
def test_bodies_shaped_like_stats(payload: Any) -> None:
    _parsed_or_refused(payload)
