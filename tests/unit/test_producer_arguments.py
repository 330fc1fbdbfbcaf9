"""Producer arguments refused before any IO: no server is needed, and none is contacted
(the nsqd address given is a closed port)."""

from __future__ import annotations

import asyncio
import math

import pytest

from nsqctl.errors import ConfigError
from nsqctl.producer import Producer, ProducerOptions

NOWHERE = "127.0.0.1:1"


def test_no_cluster_names_the_library_settings() -> None:
    with pytest.raises(ConfigError, match="lookupd_http") as err:
        Producer()
    assert err.value.setting == "lookupd_http"
    assert "--" not in str(err.value)  # a library message: no CLI flags


@pytest.mark.parametrize("delay", [-0.001, math.nan, math.inf, True, "1"])
def test_deferred_publish_takes_a_delay_in_seconds_from_zero(delay: object) -> None:
    async def run() -> None:
        async with Producer(nsqd_tcp=NOWHERE) as producer:
            await producer.publish_deferred("t", b"x", delay)  # type: ignore[arg-type]

    with pytest.raises(ConfigError, match="bad delay") as err:
        asyncio.run(run())
    assert err.value.setting == "delay"


def test_negative_partition_is_refused_at_once() -> None:
    async def run() -> None:
        async with Producer(nsqd_tcp=NOWHERE) as producer:
            await producer.publish_many("t", [b"x"], partition=-1)

    with pytest.raises(ConfigError, match="numbered from 0") as err:
        asyncio.run(run())
    assert err.value.setting == "partition"


def test_retry_options_at_their_edges_are_accepted() -> None:
    """(Values outside are refused: tests/unit/test_client_options.py.)"""
    edge = ProducerOptions(
        max_attempts=1, retry_timeout=0, backoff=0, max_backoff=0, failover_window=0
    )
    assert (edge.max_attempts, edge.failover_window) == (1, 0)
