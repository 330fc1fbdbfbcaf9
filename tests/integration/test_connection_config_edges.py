"""ConnectionConfig at the edges of nsqd's IDENTIFY ranges, against a REAL original nsqd:
what the config accepts there, nsqd must accept too (no late ``E_BAD_BODY``)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from nsqctl import protocol as p
from nsqctl.connection import Connection, ConnectionConfig
from nsqctl.protocol.errors import BadBodyError
from nsqctl.servers import cluster

pytestmark = pytest.mark.original


def test_nsqds_edge_values_still_connect_and_publish(original_cluster: cluster.Cluster) -> None:
    config = ConnectionConfig(
        client_id="edges",
        heartbeat_interval_ms=-1,
        msg_timeout_ms=1000,
        output_buffer_size=64,
        output_buffer_timeout_ms=-1,
        sample_rate=99,
    )
    topic = f"edges_{uuid.uuid4().hex[:12]}"

    async def run() -> tuple[int, int, bytes]:
        conn = await Connection.open(original_cluster.nsqd_tcp[0], config)
        try:
            reply = await conn.request(p.pub(topic, b"edge"), "PUB")
            identify = conn.identify
            assert identify is not None
            return identify.msg_timeout, identify.sample_rate, reply
        finally:
            await conn.close()

    msg_timeout, sample_rate, reply = asyncio.run(run())
    assert (msg_timeout, sample_rate, reply) == (1000, 99, b"OK")


#: Just outside each of nsqd's IDENTIFY ranges: ConnectionConfig refuses these itself; sent
#: anyway (through ``extra_identify``, which no check reads), nsqd refuses them too, so the
#: declared bounds are nsqd's and not narrower or wider.
OUTSIDE = [
    ("heartbeat_interval", -2),
    ("heartbeat_interval", 999),
    ("msg_timeout", 999),
    ("output_buffer_size", 63),
    ("output_buffer_timeout", -2),
    ("sample_rate", 100),
]


def test_nsqd_refuses_what_the_config_refuses(original_cluster: cluster.Cluster) -> None:
    async def refused(field: str, value: int) -> BaseException | None:
        config = ConnectionConfig(client_id="outside", extra_identify={field: value})
        try:
            conn = await Connection.open(original_cluster.nsqd_tcp[0], config)
        except BadBodyError as err:
            return err
        await conn.close()
        return None

    async def run() -> list[BaseException | None]:
        return [await refused(field, value) for field, value in OUTSIDE]

    outcomes = dict(zip(OUTSIDE, asyncio.run(run()), strict=True))
    assert [where for where, err in outcomes.items() if err is None] == []
