"""Pieces of youzan nsqlookupd's answers, for the scripted loopback clusters of the admin
unit tests (tests/helpers/scripted_lookupd.py)."""

from __future__ import annotations

from typing import Any


def lookupd_leader(address: str) -> dict[str, Any]:
    """The nsqlookupd leader at HTTP ``address`` as ``/listlookup`` names it."""
    host, port = address.rsplit(":", 1)
    return {"ID": "l1", "NodeIP": host, "HttpPort": int(port), "TcpPort": 4160, "Epoch": 1}


def redesign_peer(n: int, address: str, version: str = "0.3.7-HA.1.12.7") -> dict[str, Any]:
    """nsqd ``n`` (HTTP ``address``, TCP ``4150 + n``: nodes share the loopback host, and
    nsqd identities are host:TCP port) as a producer in a lookup answer."""
    host, port = address.rsplit(":", 1)
    return {
        "broadcast_address": host,
        "tcp_port": 4150 + n,
        "http_port": int(port),
        "hostname": f"n{n}",
        "version": version,
        "id": f"n{n}",
    }
