"""A running consumer outlives TLS files caught mid-rotation.

Each reconnect loads the TLS files again. A consumer that has subscribed once with them
must not end for good because a reconnect found them half-replaced (a non-atomic cert
rotation while an nsqd restarts): it logs the failure and retries the nsqd, and reads
again once the files load.

A private original cluster (its one nsqd, TLS offered, is stopped and started); the
consumer is given that nsqd's address without a lookupd, so only its own retry can bring
the nsqd back.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest

from nsqctl import Consumer, ConsumerOptions, Producer
from nsqctl.connection import ConnectionConfig, TLSSettings
from nsqctl.message import Message
from nsqctl.servers import process
from tests.conftest import StartCluster
from tests.helpers.certs import make_tls_files, nsqd_tls_args
from tests.helpers.names import unique
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.original


async def test_a_subscribed_consumer_retries_tls_files_that_cannot_load_for_a_while(
    start_cluster: StartCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nsqctl")
    files = make_tls_files(tmp_path / "tls")
    c = start_cluster("original", nsqd=1, lookupd=1, nsqd_args=nsqd_tls_args(files))
    node = c.nsqds[0]
    # the consumer's own copies: the ones "rotated"
    live = tmp_path / "live"
    live.mkdir()
    originals = {
        live / "ca.pem": files.ca_cert,
        live / "client.pem": files.client_cert,
        live / "client.key": files.client_key,
    }
    for copy, original in originals.items():
        shutil.copyfile(original, copy)
    key_text = files.client_key.read_text()
    tls = TLSSettings(
        ca_file=str(live / "ca.pem"),
        cert_file=str(live / "client.pem"),
        key_file=str(live / "client.key"),
    )
    topic = unique("tlsrot")
    got: list[bytes] = []

    def handle(msg: Message) -> None:
        got.append(msg.body)

    consumer = Consumer(
        topic,
        "c",
        handle,
        nsqd_tcp=c.nsqd_tcp,
        config=ConnectionConfig(tls=tls, connect_timeout=5.0),
        options=ConsumerOptions(reconnect_initial=0.1, reconnect_max=0.5),
    )
    async with Producer(nsqd_tcp=c.nsqd_tcp) as producer:
        await producer.publish(topic, b"before")
        await consumer.start()
        running = asyncio.create_task(consumer.run_forever())
        try:
            await wait_for(lambda: got == [b"before"], 30, "the first message")
            for copy in originals:  # mid-rotation: nothing loads
                copy.write_bytes(b"-----BEGIN GARBAGE-----\nnot a pem\n")
            await asyncio.to_thread(process.stop, node)
            await asyncio.to_thread(c.restart, node)
            await wait_for(
                lambda: _load_failures(caplog) >= 2 or running.done(),
                30,
                "reconnects failing to load the TLS files",
            )
            assert not running.done(), running.result()  # raised, or ended: neither may
            assert consumer.error is None
            for copy, original in originals.items():  # the rotation completes
                shutil.copyfile(original, copy)
            await producer.publish(topic, b"after")
            await wait_for(lambda: b"after" in got or running.done(), 30, "the next message")
            assert got == [b"before", b"after"]
            assert not running.done()
        finally:
            running.cancel()
            await consumer.close()
    texts = "\n".join(r.getMessage() for r in caplog.records)
    assert "BEGIN" not in texts and key_text not in texts  # no key content logged


def _load_failures(caplog: pytest.LogCaptureFixture) -> int:
    """Reconnects logged at ERROR for TLS files that would not load."""
    return sum(
        1
        for r in caplog.records
        if r.levelno == logging.ERROR and "TLS" in r.getMessage() and "retrying" in r.getMessage()
    )
