"""What nsqd answers the dashboard's narrower ``/stats`` requests, derived from a full
``/stats`` body (every client listed) the way nsqd builds them (nsqd/stats.go and
nsqd/http.go ``doStats`` of both families). For tests and ``bench/bench_stats_model.py``:
they feed the real parser what a real server would send; tests/integration/test_dash.py
checks the servers against it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nsqctl.stats.offline import load_json


def recorded_body(path: Path) -> dict[str, Any]:
    """A recorded answer of nsqd or nsqlookupd (a JSON object), typed for the tests that
    read its fields."""
    body = load_json(path)
    if not isinstance(body, dict):
        raise TypeError(f"{path}: a recorded answer is a JSON object, not {type(body).__name__}")
    return body


def without_clients(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as asked with ``include_clients=false`` / ``needClients=false``: each
    channel's ``clients`` null, their number still sent (``client_count`` on the original,
    ``client_num`` on the redesign)."""
    topics = [
        {**t, "channels": [{**c, "clients": None} for c in t["channels"]]} for t in body["topics"]
    ]
    return {**body, "topics": topics}


def narrowed(body: dict[str, Any], topic: str, channel: str | None = None) -> dict[str, Any]:
    """``body`` as asked with ``topic=<topic>[&channel=<channel>]&needClients=true``: that
    topic's copies only, each with that channel only (one that has it: youzan's nsqd keeps
    every channel of a copy lacking it), clients listed."""
    topics = [t for t in body["topics"] if t["topic_name"] == topic]
    if channel is not None:
        topics = [
            {**t, "channels": [c for c in t["channels"] if c["channel_name"] == channel]}
            for t in topics
        ]
    return {**body, "topics": topics}
