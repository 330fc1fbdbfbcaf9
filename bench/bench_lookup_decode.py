"""CPU cost of decoding one nsqlookupd ``/lookup`` answer, as the lookup client does it.

    python -m bench.bench_lookup_decode

The answers are the size of a big cluster's: a redesign topic of 64 partitions led by 16
nsqds with 20 channels and its meta, and an original topic on 50 nsqds; every peer carries
the fields real servers send. Timed: the bytes-to-answer path the client takes
(``parse_lookup_body`` where the tree has it, else ``json.loads`` then
``parse_lookup_response``, the path before the msgspec decoding), and the values-to-answer
path (``parse_lookup_response`` on a body ``json.loads`` gave). Run it on two trees
(``PYTHONPATH=TREE``) to compare them; compare runs on the same machine only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from nsqctl.lookup import model


def _peer(n: int) -> dict[str, Any]:
    return {
        "remote_address": f"10.0.{n // 250}.{n % 250}:51234",
        "hostname": f"nsqd-{n}.example.internal",
        "broadcast_address": f"10.0.{n // 250}.{n % 250}",
        "tcp_port": 4150,
        "http_port": 4151,
        "version": "0.3.7-HA.1.12.7",
        "distributed_id": f"10.0.{n // 250}.{n % 250}:4250:4150:{n}",
    }


def redesign_answer() -> bytes:
    nodes = [_peer(n) for n in range(16)]
    return json.dumps(
        {
            "channels": [f"consumer-group-{c}" for c in range(20)],
            "producers": nodes,
            "partitions": {str(p): nodes[p % 16] for p in range(64)},
            "meta": {
                "partition_num": 64,
                "replica": 3,
                "extend_support": False,
                "ordered": False,
                "multi_part": False,
            },
        }
    ).encode()


def original_answer() -> bytes:
    return json.dumps(
        {
            "channels": [f"consumer-group-{c}" for c in range(20)],
            "producers": [_peer(n) for n in range(50)],
        }
    ).encode()


def _time(fn: Callable[[], object], rounds: int) -> float:
    """Best of 5 runs of ``rounds`` calls, in microseconds per call."""
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(rounds):
            fn()
        best = min(best, time.process_time() - start)
    return best / rounds * 1e6


def main() -> None:
    parse_body = getattr(model, "parse_lookup_body", None)
    for name, content in (("redesign", redesign_answer()), ("original", original_answer())):
        values = json.loads(content)

        def client_path(content: bytes = content) -> object:
            if parse_body is not None:
                return parse_body(content, source="b:4161", fetched_at=0.0)
            return model.parse_lookup_response(json.loads(content), source="b:4161", fetched_at=0.0)

        def values_path(values: Any = values) -> object:
            return model.parse_lookup_response(values, source="b:4161", fetched_at=0.0)

        path = "parse_lookup_body" if parse_body is not None else "json.loads+parse_lookup_response"
        print(
            f"{name:9} {len(content):6,} B  client ({path}): {_time(client_path, 2000):7.1f} us"
            f"   values (parse_lookup_response): {_time(values_path, 2000):7.1f} us"
        )


if __name__ == "__main__":
    main()
