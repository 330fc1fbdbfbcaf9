"""Connection features against REAL original nsqd v1.3.0 servers on 127.0.0.1.

TLS (server verification, ``insecure``, client certificates, ``--tls-required``),
snappy and deflate (including combined with TLS), and AUTH through a real
``--auth-http-address`` server (tests/helpers/auth_server.py). Every round trip
publishes over one connection and reads the messages back over another with
SUB/RDY/FIN, comparing body bytes exactly; nsqd's own ``/stats`` confirms which
features the server thinks the client negotiated.

Each kind of nsqd is started once per module (same launcher as ``start_cluster``, via
``cluster.start``) and stopped by PID at the end of the module.

Note on ``--tls-required``: with ``true`` (and with a ``--tls-client-auth-policy``,
which implies ``true``) nsqd also refuses plain HTTP, including the ``/ping`` the
launcher waits on. ``tcp-https`` requires TLS on the TCP protocol exactly the same way
(``enforceTLSPolicy`` only checks "not TLSNotRequired"), so these servers use it.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import os
import ssl
import traceback
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

import nsqctl
from nsqctl import Consumer, ConsumerOptions, Producer
from nsqctl import protocol as p
from nsqctl.connection import Connection, ConnectionConfig, TLSSettings
from nsqctl.errors import ConfigError, ConnectError, ConnectionClosedError, NsqctlError
from nsqctl.protocol.raw_message import RawMessage
from nsqctl.secrets import Secret
from nsqctl.servers import cluster
from nsqctl.stats import read_nsqd_stats
from nsqctl.stats.model import ClientStats
from tests.helpers.auth_server import AuthServer
from tests.helpers.certs import TLSFiles, encrypted_key, make_tls_files, nsqd_tls_args
from tests.helpers.cli import clean_env, run_cli
from tests.helpers.names import unique

pytestmark = pytest.mark.original

BIG = 500 * 1024
GOOD_SECRET = f"good-s3cret-{uuid.uuid4().hex}"
BAD_SECRET = f"bad-s3cret-{uuid.uuid4().hex}"


# --------------------------------------------------------------------------- servers


def _start(
    bins: Path, factory: pytest.TempPathFactory, name: str, args: list[str]
) -> Generator[cluster.Cluster, None, None]:
    c = cluster.start(
        "original", factory.mktemp(name), nsqd=1, lookupd=1, bin_dir=bins, nsqd_args=args
    )
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def plain_nsqd(
    original_bins: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[cluster.Cluster]:
    """Defaults: no TLS, no auth, snappy and deflate enabled."""
    yield from _start(original_bins, tmp_path_factory, "plain", [])


@pytest.fixture(scope="module")
def tls_nsqd(
    original_bins: Path, tmp_path_factory: pytest.TempPathFactory, tls_files: TLSFiles
) -> Iterator[cluster.Cluster]:
    """TLS offered (not required), no client certificate policy."""
    yield from _start(original_bins, tmp_path_factory, "tls", nsqd_tls_args(tls_files))


@pytest.fixture(scope="module")
def verify_nsqd(
    original_bins: Path, tmp_path_factory: pytest.TempPathFactory, tls_files: TLSFiles
) -> Iterator[cluster.Cluster]:
    """Client certificates signed by the test CA are required (require-verify)."""
    args = [
        *nsqd_tls_args(tls_files),
        "--tls-client-auth-policy=require-verify",
        "--tls-required=tcp-https",
    ]
    yield from _start(original_bins, tmp_path_factory, "verify", args)


@pytest.fixture(scope="module")
def tls_required_nsqd(
    original_bins: Path, tmp_path_factory: pytest.TempPathFactory, tls_files: TLSFiles
) -> Iterator[cluster.Cluster]:
    args = [*nsqd_tls_args(tls_files), "--tls-required=tcp-https"]
    yield from _start(original_bins, tmp_path_factory, "tlsreq", args)


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    with AuthServer(GOOD_SECRET) as server:
        yield server


@pytest.fixture(scope="module")
def auth_nsqd(
    original_bins: Path,
    tmp_path_factory: pytest.TempPathFactory,
    tls_files: TLSFiles,
    auth_server: AuthServer,
) -> Iterator[cluster.Cluster]:
    """AUTH required; TLS offered too, so the auth query's ``tls`` flag can be checked."""
    args = [*nsqd_tls_args(tls_files), f"--auth-http-address={auth_server.address}"]
    yield from _start(original_bins, tmp_path_factory, "auth", args)


@pytest.fixture(scope="module")
def auth_tls_required_nsqd(
    original_bins: Path,
    tmp_path_factory: pytest.TempPathFactory,
    tls_files: TLSFiles,
    auth_server: AuthServer,
) -> Iterator[cluster.Cluster]:
    """AUTH and TLS both required: nsqd applies its TLS policy to every command after
    IDENTIFY, AUTH included, so a client with a secret and no TLS is refused at AUTH."""
    args = [
        *nsqd_tls_args(tls_files),
        "--tls-required=tcp-https",
        f"--auth-http-address={auth_server.address}",
    ]
    yield from _start(original_bins, tmp_path_factory, "authtls", args)


# --------------------------------------------------------------------------- helpers


def _config(client_id: str, **kwargs: Any) -> ConnectionConfig:
    return ConnectionConfig(
        client_id=client_id, connect_timeout=5.0, request_timeout=30.0, **kwargs
    )


def _channel_client(nsqd: cluster.Cluster, topic: str, client_id: str) -> ClientStats:
    """nsqd's own view (``/stats``) of the subscribed client ``client_id``."""
    node = read_nsqd_stats(nsqd.nsqd_http[0], topic=topic, timeout=5)
    for t in node.topics:
        if t.topic != topic:
            continue
        for ch in t.channels:
            for client in ch.clients:
                if client.client_id == client_id:
                    return client
    raise AssertionError(f"client {client_id} not subscribed to {topic} in /stats: {node}")


def _bodies(count: int) -> list[bytes]:
    """``count`` unique bodies: one 500 KB random, one 500 KB compressible, small ones."""
    big_random = b"R" + os.urandom(BIG - 1)
    big_text = b"C" + (b"nsqctl compressible body " * (BIG // 25 + 1))[: BIG - 1]
    small = [
        f"m{i:05d}:".encode() + os.urandom(i % 97) + b"\x00\n\r\xff" * (i % 5)
        for i in range(count - 2)
    ]
    return [big_random, *small[: len(small) // 2], big_text, *small[len(small) // 2 :]]


async def _round_trip(
    address: str,
    config: ConnectionConfig,
    bodies: list[bytes],
    *,
    nsqd: cluster.Cluster | None = None,
) -> ClientStats | None:
    """Publish ``bodies`` (pipelined PUBs plus one MPUB), read them back, compare bytes.

    Returns nsqd's ``/stats`` entry for the subscriber when ``nsqd`` is given.
    """
    topic = unique("rt")
    received: list[bytes] = []
    done = asyncio.Event()

    def on_message(conn: Connection, msg: RawMessage) -> None:
        received.append(msg.body)
        conn.fin(msg.id)
        if len(received) >= len(bodies):
            done.set()

    sub_cfg = dataclasses.replace(config, client_id=f"{config.client_id}-sub")
    pub_cfg = dataclasses.replace(config, client_id=f"{config.client_id}-pub")
    sub = await Connection.open(address, sub_cfg, on_message=on_message)
    pub = await Connection.open(address, pub_cfg)
    try:
        await sub.subscribe(topic, "ch")
        sub.rdy(min(len(bodies), 200))
        big = [b for b in bodies if len(b) >= BIG]
        small = [b for b in bodies if len(b) < BIG]
        singles, batch = big + small[: len(small) // 2], small[len(small) // 2 :]
        replies = await asyncio.gather(*(pub.request(p.pub(topic, b), "pub") for b in singles))
        assert replies == [p.OK] * len(singles)
        if batch:
            assert await pub.request(p.mpub(topic, batch), "mpub") == p.OK
        await asyncio.wait_for(done.wait(), 60)
        assert len(received) == len(bodies)
        assert collections.Counter(received) == collections.Counter(bodies)
        stats = _channel_client(nsqd, topic, sub_cfg.client_id or "") if nsqd else None
        assert sub.is_open and pub.is_open
        return stats
    finally:
        await pub.close()
        await sub.close()


def _texts_of(exc: BaseException) -> list[str]:
    """Every text an exception can show: str, repr, formatted traceback, chained causes."""
    out = [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    for linked in (exc.__cause__, exc.__context__):
        if linked is not None:
            out += [str(linked), repr(linked)]
    return out


# --------------------------------------------------------------------------- TLS


async def test_tls_with_ca_round_trip(tls_nsqd: cluster.Cluster, tls_files: TLSFiles) -> None:
    cfg = _config("tls-ca", tls=TLSSettings(ca_file=str(tls_files.ca_cert)))
    conn = await Connection.open(tls_nsqd.nsqd_tcp[0], cfg)
    try:
        assert conn.identify is not None and conn.identify.tls_v1
        assert conn.identify.version == "1.3.0"
    finally:
        await conn.close()
    stats = await _round_trip(tls_nsqd.nsqd_tcp[0], cfg, _bodies(50), nsqd=tls_nsqd)
    assert stats is not None
    assert stats.tls is True and stats.tls_version.startswith("TLS")
    assert stats.snappy is False and stats.deflate is False


async def test_tls_without_ca_fails_verification(tls_nsqd: cluster.Cluster) -> None:
    """Verification is on by default: a self-signed test CA is not trusted. A
    certificate not accepted is a TLSCertificateError, naming the settings to change."""
    cfg = _config("tls-noca", tls=TLSSettings())
    with pytest.raises(nsqctl.TLSCertificateError) as info:
        await Connection.open(tls_nsqd.nsqd_tcp[0], cfg)
    assert isinstance(info.value, ConnectError)  # what every TLS failure was before
    assert "`tls_ca`" in str(info.value) and "`tls_insecure`" in str(info.value)
    assert isinstance(info.value.__cause__, ssl.SSLError)  # the TLS library's own failure
    msg = str(info.value)
    assert "TLS" in msg and tls_nsqd.nsqd_tcp[0] in msg
    assert "CERTIFICATE_VERIFY_FAILED" in msg or "certificate" in msg.lower()
    assert info.value.setting == "tls_ca" and "--" not in msg


async def test_tls_wrong_server_hostname_fails(
    tls_nsqd: cluster.Cluster, tls_files: TLSFiles
) -> None:
    """The CA is trusted but the certificate is for 127.0.0.1, not this name."""
    tls = TLSSettings(ca_file=str(tls_files.ca_cert), server_hostname="nsqd.invalid")
    with pytest.raises(nsqctl.TLSError, match="TLS") as info:
        await Connection.open(tls_nsqd.nsqd_tcp[0], _config("tls-host", tls=tls))
    assert isinstance(info.value.__cause__, ssl.SSLError)


async def test_tls_insecure_skips_verification(tls_nsqd: cluster.Cluster) -> None:
    cfg = _config("tls-insecure", tls=TLSSettings(insecure=True))
    stats = await _round_trip(tls_nsqd.nsqd_tcp[0], cfg, _bodies(20), nsqd=tls_nsqd)
    assert stats is not None and stats.tls is True


async def test_tls_missing_ca_file_is_a_config_error(tls_nsqd: cluster.Cluster) -> None:
    tls = TLSSettings(ca_file="/nonexistent/nsqctl-ca.pem")
    with pytest.raises(ConfigError, match="CA file") as info:
        await Connection.open(tls_nsqd.nsqd_tcp[0], _config("tls-nofile", tls=tls))
    assert info.value.setting == "tls_ca" and "--" not in str(info.value)


async def test_a_running_consumer_whose_client_certificate_cannot_load_stops_with_it(
    tls_nsqd: cluster.Cluster, tls_files: TLSFiles, caplog: pytest.LogCaptureFixture
) -> None:
    """A consumer started through lookupd before its topic exists first connects when the
    topic appears. TLS settings that cannot be loaded then (a client certificate given
    without its key, which is in another file) end the consumer with that ConfigError, as
    they fail a start: no connection is made, plaintext or other, and the failure is not
    logged at each lookup while the consumer reads nothing."""
    caplog.set_level(logging.ERROR, logger="nsqctl")
    topic = unique("certonly")
    tls = TLSSettings(ca_file=str(tls_files.ca_cert), cert_file=str(tls_files.client_cert))
    consumer = Consumer(
        topic,
        "c",
        lambda _msg: None,
        lookupd_http=tls_nsqd.lookupd_http,
        config=_config("tls-certonly", tls=tls),
        options=ConsumerOptions(lookup_interval=0.2),
    )
    await consumer.start()
    try:
        async with Producer(nsqd_tcp=tls_nsqd.nsqd_tcp) as producer:
            await producer.publish(topic, b"plain")  # the topic appears
        with pytest.raises(ConfigError, match="client certificate") as caught:
            async with asyncio.timeout(30):  # a hang guard: it ends at the next lookup
                await consumer.run_forever()
    finally:
        await consumer.close()
    assert caught.value.setting == "tls_cert"
    stats = read_nsqd_stats(tls_nsqd.nsqd_http[0], topic=topic)
    assert stats.channel(topic, "c") is None  # nothing subscribed
    assert not [r.getMessage() for r in caplog.records], "the failure was logged as an error"


async def test_tls_requested_from_server_without_tls(
    plain_nsqd: cluster.Cluster, tls_files: TLSFiles
) -> None:
    cfg = _config("tls-plain", tls=TLSSettings(ca_file=str(tls_files.ca_cert)))
    with pytest.raises(nsqctl.TLSError, match="does not offer TLS") as info:
        await Connection.open(plain_nsqd.nsqd_tcp[0], cfg)
    assert info.value.setting == "tls"


async def test_a_publish_with_tls_to_an_nsqd_without_tls_fails_at_once_as_tls(
    plain_nsqd: cluster.Cluster, tls_files: TLSFiles
) -> None:
    """Through the Producer, TLS asked of an nsqd that offers none is what the publish
    raises, at its first attempt: a settings mismatch no retry can fix (as the AUTH an
    nsqd requires without a secret given), not a PublishConnectError after every retry."""
    cfg = _config("tls-plain-pub", tls=TLSSettings(ca_file=str(tls_files.ca_cert)))
    async with Producer(nsqd_tcp=plain_nsqd.nsqd_tcp, config=cfg) as producer:
        with pytest.raises(nsqctl.TLSError) as info:
            await producer.publish(unique("tlsplainpub"), b"never sent")
    err = info.value
    assert isinstance(err, nsqctl.TLSNotOfferedError), repr(err)
    assert "does not offer TLS" in str(err) and "attempt" not in str(err), err
    assert err.setting == "tls" and err.unsent is True


async def test_a_publish_not_trusting_nsqds_certificate_fails_at_once_as_tls(
    tls_nsqd: cluster.Cluster,
) -> None:
    """A certificate that does not verify (no CA given for a self-signed test server) is
    what the publish raises, at its first attempt, known unsent: no retry makes nsqd's
    certificate trusted. It was a PublishConnectError after every retry."""
    cfg = _config("tls-untrusted-pub", tls=TLSSettings())
    async with Producer(nsqd_tcp=tls_nsqd.nsqd_tcp, config=cfg) as producer:
        with pytest.raises(nsqctl.TLSCertificateError) as info:
            await producer.publish(unique("tlsuntrusted"), b"never sent")
    err = info.value
    assert "attempt" not in str(err) and err.setting == "tls_ca" and err.unsent is True, err


async def test_an_unkeyed_publish_refused_tls_by_one_nsqd_goes_to_one_that_offers_it(
    plain_nsqd: cluster.Cluster, tls_nsqd: cluster.Cluster, tls_files: TLSFiles
) -> None:
    """One nsqd of a TLS cluster restarted without its certificate: the unkeyed
    publishes that would land on it go to the nsqd offering TLS instead of failing
    (only when every nsqd refuses TLS does a publish fail with it, as above)."""
    cfg = _config("tls-mixed-pub", tls=TLSSettings(ca_file=str(tls_files.ca_cert)))
    topic = unique("tlsmixedpub")
    given = [plain_nsqd.nsqd_tcp[0], tls_nsqd.nsqd_tcp[0]]
    async with Producer(nsqd_tcp=given, config=cfg) as producer:
        for i in range(4):  # round-robin sends some of them to the plain nsqd first
            await producer.publish(topic, b"m%d" % i)
    node = read_nsqd_stats(tls_nsqd.nsqd_http[0], topic=topic, timeout=5)
    assert [t.message_count for t in node.topics if t.topic == topic] == [4], node


async def test_tls_client_certificate_require_verify(
    verify_nsqd: cluster.Cluster, tls_files: TLSFiles
) -> None:
    tls = TLSSettings(
        ca_file=str(tls_files.ca_cert),
        cert_file=str(tls_files.client_cert),
        key_file=str(tls_files.client_key),
    )
    stats = await _round_trip(
        verify_nsqd.nsqd_tcp[0], _config("tls-cert", tls=tls), _bodies(30), nsqd=verify_nsqd
    )
    assert stats is not None and stats.tls is True


@pytest.mark.parametrize("which", ["none", "rogue"])
async def test_tls_require_verify_rejects_missing_or_untrusted_client_cert(
    verify_nsqd: cluster.Cluster, tls_files: TLSFiles, which: str, tmp_path: Path
) -> None:
    """A TLSError with the TLS library's failure chained; the untrusted client's key is
    an encrypted one, and neither the key nor its passphrase shows in the error."""
    passphrase = "rogue pass " + uuid.uuid4().hex
    if which == "none":
        tls = TLSSettings(ca_file=str(tls_files.ca_cert))
    else:
        key = encrypted_key(
            tls_files.rogue_client_key, passphrase.encode(), tmp_path / "rogue-enc.key"
        )
        tls = TLSSettings(
            ca_file=str(tls_files.ca_cert),
            cert_file=str(tls_files.rogue_client_cert),
            key_file=str(key),
            key_password=Secret(passphrase),
        )
    with pytest.raises(nsqctl.TLSError) as info:
        conn = await Connection.open(verify_nsqd.nsqd_tcp[0], _config(f"tls-{which}", tls=tls))
        await conn.close()  # pragma: no cover - only reached if the server let us in
    msg = str(info.value)
    assert verify_nsqd.nsqd_tcp[0] in msg and "TLS" in msg
    assert info.value.__cause__ is not None
    key_lines = [
        line
        for key_file in (tls_files.rogue_client_key, tmp_path / "rogue-enc.key")
        if key_file.exists()
        for line in key_file.read_text().splitlines()
        if line and not line.startswith("-----")
    ]
    for text in _texts_of(info.value):
        assert passphrase not in text
        assert not any(line in text for line in key_lines), text


async def test_tls_client_cert_rejection_hint_names_client_cert(
    verify_nsqd: cluster.Cluster, tls_files: TLSFiles
) -> None:
    tls = TLSSettings(ca_file=str(tls_files.ca_cert))
    with pytest.raises(nsqctl.TLSCertificateError) as info:
        await Connection.open(verify_nsqd.nsqd_tcp[0], _config("tls-hint", tls=tls))
    assert info.value.setting == "tls_cert"
    assert "client certificate" in str(info.value) and "--" not in str(info.value)


async def test_tls_required_server_rejects_plain_client(
    tls_required_nsqd: cluster.Cluster, tls_files: TLSFiles
) -> None:
    """nsqd does not say "TLS required" in its IDENTIFY reply, so the first command after
    the handshake is where the client learns it: a fatal E_INVALID naming TLS."""
    address = tls_required_nsqd.nsqd_tcp[0]
    closed: list[BaseException | None] = []
    conn = await Connection.open(
        address, _config("tls-req-plain"), on_close=lambda _c, cause: closed.append(cause)
    )
    try:
        with pytest.raises(p.InvalidError) as info:
            await conn.request(p.pub(unique("req"), b"x"), "pub")
        assert "TLS required" in str(info.value)
        # the connection lacks the TLS nsqd requires: a TLS failure, caught as one
        assert isinstance(info.value, nsqctl.TLSError) and info.value.setting == "tls"
        assert info.value.fatal
        assert conn.closed is not None and not conn.is_open
        assert len(closed) == 1 and isinstance(closed[0], ConnectionClosedError)
        with pytest.raises(ConnectionClosedError):
            await conn.request(p.pub(unique("req"), b"x"), "pub")
    finally:
        await conn.close()
    # The same server accepts a TLS client.
    cfg = _config("tls-req-tls", tls=TLSSettings(ca_file=str(tls_files.ca_cert)))
    stats = await _round_trip(address, cfg, _bodies(10), nsqd=tls_required_nsqd)
    assert stats is not None and stats.tls is True


# --------------------------------------------------------------------------- wrong port, errors


async def test_nsqds_http_port_is_named_as_such(plain_nsqd: cluster.Cluster) -> None:
    """nsqd's HTTP listener answers the magic with an HTTP error response."""
    with pytest.raises(ConnectError, match="HTTP port") as info:
        await Connection.open(plain_nsqd.nsqd_http[0], _config("http-port"))
    assert "TCP port" in str(info.value) and info.value.setting == "nsqd_tcp"


async def test_fin_failed_goes_to_on_error_and_the_next_reply_to_its_request(
    plain_nsqd: cluster.Cluster,
) -> None:
    """E_FIN_FAILED answers a FIN, which has no reply of its own: it must not take the
    place of the PUB pipelined behind it, and it does not close the connection."""
    errors: list[p.ServerError] = []
    conn = await Connection.open(
        plain_nsqd.nsqd_tcp[0], _config("fin-failed"), on_error=lambda _c, e: errors.append(e)
    )
    try:
        topic = unique("fin")
        await conn.subscribe(topic, "ch")
        conn.fin(b"0123456789abcdef")  # never delivered: not in flight
        assert await conn.request(p.pub(topic, b"x"), "pub") == p.OK
        assert len(errors) == 1 and isinstance(errors[0], p.FinFailedError)
        assert not errors[0].fatal and conn.is_open
    finally:
        await conn.close()


# --------------------------------------------------------------------------- compression


@pytest.mark.parametrize("compression", ["snappy", "deflate"])
async def test_compression_round_trip_1000_messages(
    plain_nsqd: cluster.Cluster, compression: str
) -> None:
    cfg = _config(f"c-{compression}", compression=compression)
    bodies = _bodies(1000)
    assert len(bodies) == 1000 and max(map(len, bodies)) == BIG
    stats = await _round_trip(plain_nsqd.nsqd_tcp[0], cfg, bodies, nsqd=plain_nsqd)
    assert stats is not None
    assert stats.snappy is (compression == "snappy")
    assert stats.deflate is (compression == "deflate")
    assert stats.tls is False


async def test_deflate_level_is_negotiated(plain_nsqd: cluster.Cluster) -> None:
    cfg = _config("c-level", compression="deflate", deflate_level=3)
    conn = await Connection.open(plain_nsqd.nsqd_tcp[0], cfg)
    try:
        assert conn.identify is not None
        assert conn.identify.deflate and not conn.identify.snappy
        assert conn.identify.deflate_level == 3
        assert await conn.request(p.pub(unique("lvl"), b"x" * 10_000), "pub") == p.OK
    finally:
        await conn.close()


@pytest.mark.parametrize("compression", ["snappy", "deflate"])
async def test_tls_with_compression_round_trip(
    tls_nsqd: cluster.Cluster, tls_files: TLSFiles, compression: str
) -> None:
    cfg = _config(
        f"tc-{compression}",
        tls=TLSSettings(ca_file=str(tls_files.ca_cert)),
        compression=compression,
    )
    stats = await _round_trip(tls_nsqd.nsqd_tcp[0], cfg, _bodies(300), nsqd=tls_nsqd)
    assert stats is not None
    assert stats.tls is True
    assert stats.snappy is (compression == "snappy")
    assert stats.deflate is (compression == "deflate")


async def test_compression_refused_by_server(
    original_bins: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    gen = _start(original_bins, tmp_path_factory, "nocomp", ["--snappy=false", "--deflate=false"])
    nsqd = next(gen)
    try:
        for compression in ("snappy", "deflate"):
            cfg = _config(f"nocomp-{compression}", compression=compression)
            with pytest.raises(ConnectError, match=f"refused {compression}") as info:
                await Connection.open(nsqd.nsqd_tcp[0], cfg)
            assert info.value.setting == "compression"
    finally:
        gen.close()
    assert not any(nsqd.running().values())


# --------------------------------------------------------------------------- AUTH


async def test_auth_required_without_secret(
    auth_nsqd: cluster.Cluster, auth_server: AuthServer
) -> None:
    """No secret for an nsqd that requires AUTH is an AUTH failure (what a caller
    catches for a wrong secret too), still a ConnectError as it always was; the message
    says what the server wants and names the library setting that gives it."""
    before = len(auth_server.queries)
    with pytest.raises(p.AuthFailedError) as info:
        await Connection.open(auth_nsqd.nsqd_tcp[0], _config("auth-none"))
    err = info.value
    assert isinstance(err, ConnectError) and isinstance(err, nsqctl.AuthRequiredError)
    assert "requires AUTH" in str(err) and "`auth_secret`" in str(err)
    assert err.setting == "auth_secret" and "--" not in str(err)
    assert len(auth_server.queries) == before  # nothing was sent to the auth server


async def test_a_publish_without_the_secret_an_nsqd_requires_fails_at_once_as_auth(
    auth_nsqd: cluster.Cluster, auth_server: AuthServer
) -> None:
    """Through the Producer, the AUTH failure is what the publish raises, at its first
    attempt: no retry can bring a secret. Another producer's secret never shows in it."""
    good = Producer(
        nsqd_tcp=auth_nsqd.nsqd_tcp, config=_config("auth-pgood", auth_secret=Secret(GOOD_SECRET))
    )
    bare = Producer(nsqd_tcp=auth_nsqd.nsqd_tcp, config=_config("auth-pnone"))
    topic = unique("authpub")
    try:
        await good.publish(topic, b"with the secret")
        with pytest.raises(nsqctl.AuthFailedError) as info:
            await bare.publish(topic, b"without")
    finally:
        await good.close()
        await bare.close()
    err = info.value
    assert "requires AUTH" in str(err) and err.setting == "auth_secret"
    assert err.unsent is True
    for text in _texts_of(err):
        assert GOOD_SECRET not in text


async def test_a_consumer_refused_at_the_handshake_fails_its_start_with_the_refusal(
    auth_nsqd: cluster.Cluster,
    auth_tls_required_nsqd: cluster.Cluster,
    plain_nsqd: cluster.Cluster,
    tls_nsqd: cluster.Cluster,
) -> None:
    """A consumer without the TLS an nsqd requires (found at AUTH, its secret never sent),
    without the secret it requires, asking TLS of an nsqd that offers none, or not
    trusting nsqd's certificate fails its start with that refusal, before its connect
    timeout: not a NoConnectionError after retrying what no retry can fix."""
    good = _config("refused-consumer", auth_secret=Secret(GOOD_SECRET))
    cases: list[tuple[cluster.Cluster, ConnectionConfig, type[NsqctlError]]] = [
        (auth_tls_required_nsqd, good, p.TLSRequiredError),
        (auth_nsqd, _config("refused-consumer"), nsqctl.AuthRequiredError),
        (plain_nsqd, _config("refused-consumer", tls=TLSSettings()), nsqctl.TLSNotOfferedError),
        (tls_nsqd, _config("refused-consumer", tls=TLSSettings()), nsqctl.TLSCertificateError),
    ]
    for server, config, kind in cases:
        consumer = Consumer(
            unique("refusedsub"),
            "ch",
            lambda msg: None,
            nsqd_tcp=server.nsqd_tcp,
            config=config,
            options=ConsumerOptions(connect_timeout=15.0),
        )
        with pytest.raises(NsqctlError) as info:
            await consumer.start()
        assert isinstance(info.value, kind), repr(info.value)
        assert not isinstance(info.value, nsqctl.NoConnectionError)
        for text in _texts_of(info.value):
            assert GOOD_SECRET not in text


async def test_auth_good_secret(auth_nsqd: cluster.Cluster, auth_server: AuthServer) -> None:
    cfg = _config("auth-good", auth_secret=Secret(GOOD_SECRET))
    conn = await Connection.open(auth_nsqd.nsqd_tcp[0], cfg)
    try:
        assert conn.identify is not None and conn.identify.auth_required
        assert conn.auth is not None
        assert conn.auth.identity == auth_server.identity
        assert conn.auth.identity_url == auth_server.identity_url
        assert conn.auth.permission_count == 1
        assert await conn.request(p.pub(unique("auth"), b"hello"), "pub") == p.OK
    finally:
        await conn.close()
    query = auth_server.queries[-1]
    assert query["secret"] == GOOD_SECRET
    assert query["tls"] == "false"
    assert query["remote_ip"] == "127.0.0.1"
    stats = await _round_trip(auth_nsqd.nsqd_tcp[0], cfg, _bodies(20), nsqd=auth_nsqd)
    assert stats is not None
    assert stats.authed is True and stats.auth_identity == auth_server.identity


@pytest.mark.parametrize("compression", ["none", "snappy", "deflate"])
async def test_auth_over_tls_and_compression(
    auth_nsqd: cluster.Cluster, auth_server: AuthServer, tls_files: TLSFiles, compression: str
) -> None:
    """AUTH goes out after the upgrades, so it travels encrypted and compressed."""
    cfg = _config(
        f"auth-tls-{compression}",
        tls=TLSSettings(ca_file=str(tls_files.ca_cert)),
        compression=compression,
        auth_secret=Secret(GOOD_SECRET),
    )
    stats = await _round_trip(auth_nsqd.nsqd_tcp[0], cfg, _bodies(40), nsqd=auth_nsqd)
    assert stats is not None
    assert stats.authed is True and stats.tls is True
    query = auth_server.queries[-1]
    assert query["tls"] == "true" and query["secret"] == GOOD_SECRET


async def test_auth_bad_secret(auth_nsqd: cluster.Cluster, auth_server: AuthServer) -> None:
    """A secret refused is nsqd's AUTH failure, with its code, and a connection that
    could not be set up (a ConnectError), as a missing secret or a TLS failure is: one
    ``except ConnectError`` catches every setup failure."""
    cfg = _config("auth-bad", auth_secret=Secret(BAD_SECRET))
    with pytest.raises(p.AuthFailedError) as info:
        await Connection.open(auth_nsqd.nsqd_tcp[0], cfg)
    err = info.value
    assert isinstance(err, ConnectError) and isinstance(err, nsqctl.TransportError)
    assert err.code == "E_AUTH_FAILED" and err.fatal
    assert "auth" in str(err).lower()
    assert auth_server.queries[-1]["secret"] == BAD_SECRET  # it did reach the auth server
    for text in _texts_of(err):
        assert BAD_SECRET not in text


async def test_auth_secret_never_leaks(
    auth_nsqd: cluster.Cluster,
    plain_nsqd: cluster.Cluster,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Good, bad and unneeded secrets: none shows in errors, reprs or log records."""
    caplog.set_level(logging.DEBUG, logger="nsqctl")
    texts: list[str] = []

    good_cfg = _config("leak-good", auth_secret=Secret(GOOD_SECRET, "file /x"))
    conn = await Connection.open(auth_nsqd.nsqd_tcp[0], good_cfg)
    texts += [repr(conn), str(conn), repr(conn.config), repr(conn.auth), repr(conn.identify)]
    texts += [repr(good_cfg.auth_secret), str(good_cfg.auth_secret), repr(good_cfg)]
    await conn.close()
    assert conn.closed is not None
    texts += _texts_of(conn.closed)
    with pytest.raises(ConnectionClosedError) as closed_info:
        await conn.request(p.pub("t", b"x"), "pub")
    texts += _texts_of(closed_info.value)

    bad_cfg = _config("leak-bad", auth_secret=Secret(BAD_SECRET))
    with pytest.raises(NsqctlError) as bad_info:
        await Connection.open(auth_nsqd.nsqd_tcp[0], bad_cfg)
    texts += [*_texts_of(bad_info.value), repr(bad_cfg)]

    # A secret for a server without AUTH is not sent, and the notice does not show it.
    extra_cfg = _config("leak-extra", auth_secret=Secret(GOOD_SECRET))
    conn = await Connection.open(plain_nsqd.nsqd_tcp[0], extra_cfg)
    try:
        assert conn.auth is None
        assert await conn.request(p.pub(unique("leak"), b"x"), "pub") == p.OK
    finally:
        await conn.close()
    assert any("does not require AUTH" in r.getMessage() for r in caplog.records)

    for record in caplog.records:
        texts += [record.getMessage(), repr(record.args), str(record.msg)]
        if record.exc_info and record.exc_info[1] is not None:
            texts += _texts_of(record.exc_info[1])
    texts.append(caplog.text)
    assert texts
    for text in texts:
        assert GOOD_SECRET not in text and BAD_SECRET not in text, text


async def test_failed_connect_leaves_connection_closed(auth_nsqd: cluster.Cluster) -> None:
    conn = Connection(auth_nsqd.nsqd_tcp[0], _config("auth-state"))
    with pytest.raises(ConnectError, match="requires AUTH"):
        await conn.connect()
    assert not conn.is_open
    with pytest.raises(ConnectionClosedError):
        conn.request_nowait(p.pub("t", b"x"), "pub")


def test_an_encrypted_client_key_is_opened_with_the_passphrase_file_and_never_prompts(
    verify_nsqd: cluster.Cluster, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """OpenSSL asks for an encrypted key's passphrase on the terminal unless the caller
    answers: a script stalled, or (no terminal) failed with "PEM lib". The CLI takes the
    passphrase from a file and names that file when it is missing or wrong; the
    passphrase itself shows nowhere."""
    passphrase = b"correct horse " + uuid.uuid4().hex.encode()
    key = encrypted_key(tls_files.client_key, passphrase, tmp_path / "client-enc.key")
    good, bad = tmp_path / "good.pass", tmp_path / "bad.pass"
    good.write_bytes(passphrase + b"\n")
    bad.write_bytes(b"not it")
    for f in (good, bad):
        f.chmod(0o600)
    topic = unique("enckey")
    tls = ["--tls-ca", str(tls_files.ca_cert), "--tls-cert", str(tls_files.client_cert)]
    pub = ["pub", topic, "--nsqd", verify_nsqd.nsqd_tcp[0], *tls, "--tls-key", str(key)]

    missing = run_cli(pub, input=b"one\n")
    wrong = run_cli([*pub, "--tls-key-password-file", str(bad)], input=b"one\n")
    for result, words in ((missing, "is encrypted"), (wrong, "does not decrypt")):
        err = result.stderr.decode()
        assert result.returncode == 2, err
        assert words in err and "--tls-key-password-file" in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert "pass phrase" not in err.lower() and passphrase.decode() not in err, err
    assert str(bad) in wrong.stderr.decode()

    env = clean_env({"NSQCTL_TLS_KEY_PASSWORD_FILE": str(good)})
    opened = run_cli(pub, input=b"one\n", env=env)
    assert opened.returncode == 0, opened.stderr
    assert passphrase.decode() not in (opened.stdout + opened.stderr).decode()
    published = read_nsqd_stats(verify_nsqd.nsqd_http[0], topic=topic).topic(topic)
    assert published is not None and published.message_count == 1


def test_a_passphrase_file_without_a_client_certificate_is_refused(
    tls_files: TLSFiles, tmp_path: Path
) -> None:
    """A passphrase with no key to open is a mistake in the settings (a profile that
    lost its tls_cert): said, not ignored while TLS goes out without a client identity."""
    pass_file = tmp_path / "p.pass"
    pass_file.write_bytes(b"secret")
    pass_file.chmod(0o600)
    result = run_cli(
        ["pub", "t", "--nsqd", "127.0.0.1:1", "--tls-key-password-file", str(pass_file)],
        input=b"x\n",
    )
    err = result.stderr.decode()
    assert result.returncode == 2 and "--tls-cert FILE" in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_pub_not_trusting_nsqds_certificate_says_the_flags_at_once(
    tls_nsqd: cluster.Cluster,
) -> None:
    """``pub --tls`` with no CA for a self-signed test server: one line, exit 1, at the
    first attempt, naming the flags that fix it (not the library's setting names)."""
    result = run_cli(["pub", unique("tlscli"), "one", "--nsqd", tls_nsqd.nsqd_tcp[0], "--tls"])
    err = result.stderr.decode()
    assert result.returncode == 1 and len(err.strip().splitlines()) == 1, err
    assert "certificate did not verify" in err and "attempt" not in err, err
    assert "(--tls-ca)" in err and "(--tls-insecure)" in err and "`" not in err, err
