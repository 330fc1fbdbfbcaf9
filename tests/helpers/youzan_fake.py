"""Pieces of youzan nsqlookupd's answers, for the in-process fakes of the admin unit tests."""

from __future__ import annotations

from typing import Any

#: The nsqlookupd leader as ``/listlookup`` names it (HTTP 127.0.0.1:4161).
LOOKUPD_LEADER = {"ID": "l1", "NodeIP": "127.0.0.1", "HttpPort": 4161, "TcpPort": 4160, "Epoch": 1}


def redesign_peer(n: int, version: str = "0.3.7-HA.1.12.7") -> dict[str, Any]:
    """nsqd ``10.0.0.n`` (TCP 4150, HTTP 4151) as a producer in a lookup answer."""
    return {
        "broadcast_address": f"10.0.0.{n}",
        "tcp_port": 4150,
        "http_port": 4151,
        "hostname": f"n{n}",
        "version": version,
        "id": f"n{n}",
    }
