"""Producer arguments refused before any IO: no server is needed, and none is contacted
(the nsqd address given is a closed port)."""

from __future__ import annotations

import asyncio
import math

import pytest

from nsqctl.errors import ConfigError
from nsqctl.producer import Producer, RetryPolicy

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


#: Each RetryPolicy field just outside what a publish's retry clock can work with.
REFUSED_RETRY = [
    ("attempts", 0, "1 or more"),
    ("attempts", -1, "1 or more"),
    ("attempts", 2.5, "whole number"),
    ("attempts", None, "whole number"),
    ("timeout", -0.001, "0 seconds or more"),
    ("timeout", math.nan, "finite"),
    ("timeout", math.inf, "finite"),
    ("backoff", -1, "0 seconds or more"),
    ("backoff", math.nan, "finite"),
    ("max_backoff", -1, "0 seconds or more"),
    ("max_backoff", math.inf, "finite"),
    ("max_backoff", 0.05, "at least backoff"),  # below the default backoff, 0.1
    ("failover_window", -1, "0 seconds or more"),
    ("failover_window", math.inf, "finite"),
    ("failover_window", True, "finite"),
]


@pytest.mark.parametrize(("setting", "value", "named"), REFUSED_RETRY)
def test_a_retry_policy_that_cannot_work_is_refused_at_construction(
    setting: str, value: object, named: str
) -> None:
    with pytest.raises(ConfigError, match=f"bad {setting}") as err:
        RetryPolicy(**{setting: value})  # type: ignore[arg-type]
    assert err.value.setting == setting
    assert named in str(err.value) and "--" not in str(err.value)


def test_a_retry_policy_at_its_edges_is_accepted() -> None:
    edge = RetryPolicy(attempts=1, timeout=0, backoff=0, max_backoff=0, failover_window=0)
    assert (edge.attempts, edge.failover_window) == (1, 0)
