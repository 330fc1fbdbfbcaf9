"""A producer's close() cancelled by its caller's deadline while a publish attempt is in
progress (close waits for it): the close must run on and close the pooled connections
once that attempt ended. Cut short, they stayed open until close() was called again.

The attempt held in progress is a connect to a port whose listener never accepts: the
kernel completes the TCP handshake and nothing answers the IDENTIFY, which is what a
hung nsqd looks like from the client (the session cluster's nsqds are shared: none may
be stopped). Closing that listener resets the connection, which ends the attempt. The
pooled connection is one to the session's original cluster, and whether it is still
open is read from this process's sockets.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

import nsqctl
from nsqctl.addresses import HostPort
from nsqctl.connection import ConnectionConfig
from nsqctl.servers import cluster
from nsqctl.sharding import pick_node_for_key
from tests.helpers.names import unique
from tests.helpers.sockets import connections_to
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.original


def _key_for(node: str, nodes: list[str]) -> str:
    return next(f"k{i}" for i in range(1000) if pick_node_for_key(f"k{i}", nodes) == node)


async def test_a_close_cut_short_by_its_callers_deadline_still_closes_the_pool(
    original_cluster: cluster.Cluster,
) -> None:
    nsqd = original_cluster.nsqd_tcp[0]
    nsqd_port = HostPort.parse(nsqd).port
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        silent_port = silent.getsockname()[1]
        nodes = [nsqd, f"127.0.0.1:{silent_port}"]
        before = connections_to(nsqd_port)
        topic = unique("closecut")
        config = ConnectionConfig(connect_timeout=120.0)  # only the reset ends the attempt
        producer = nsqctl.Producer(nsqd_tcp=nodes, config=config)
        publishing: asyncio.Task[None] | None = None
        try:
            await producer.publish(topic, b"pooled", shard_key=_key_for(nodes[0], nodes))
            assert connections_to(nsqd_port) == before + 1
            publishing = asyncio.create_task(
                producer.publish(topic, b"held", shard_key=_key_for(nodes[1], nodes))
            )
            await wait_for(
                lambda: connections_to(silent_port) == 1, 10.0, "the held attempt to connect"
            )
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):  # the attempt is held: the close waits
                    await producer.close()
            assert connections_to(nsqd_port) == before + 1  # the close waits for the attempt
            silent.close()  # resets the held connection: the attempt ends
            async with asyncio.timeout(20):  # a hang guard, far above the reset's effect
                with pytest.raises(nsqctl.PublishError):
                    await publishing
            await wait_for(
                lambda: connections_to(nsqd_port) == before,
                10.0,
                lambda: f"the pooled connection closed: {connections_to(nsqd_port) - before} open",
            )
        finally:
            if publishing is not None:
                publishing.cancel()
            silent.close()
            async with asyncio.timeout(20):
                await producer.close()
