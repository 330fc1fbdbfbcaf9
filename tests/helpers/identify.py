"""nsqd's answer to IDENTIFY, for the scripted fake servers of tests (what a real server
sends when nothing is negotiated: no TLS, compression or AUTH)."""

from __future__ import annotations

from typing import Any


def identify_reply(**changes: Any) -> dict[str, Any]:
    """nsqd v1.3.0's IDENTIFY answer with ``changes`` (e.g. ``version`` of youzan's)."""
    reply: dict[str, Any] = {
        "max_rdy_count": 2500,
        "version": "1.3.0",
        "max_msg_timeout": 900000,
        "msg_timeout": 60000,
        "tls_v1": False,
        "deflate": False,
        "deflate_level": 0,
        "max_deflate_level": 6,
        "snappy": False,
        "sample_rate": 0,
        "auth_required": False,
        "output_buffer_size": 16384,
        "output_buffer_timeout": 250,
    }
    reply.update(changes)
    return reply
