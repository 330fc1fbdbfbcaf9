"""TLS, AUTH, snappy and deflate against REAL youzan nsqd (the redesign) on 127.0.0.1,
for every client that opens nsqd connections: ``pub``, ``tail``, ``tail --ordered``, the
library ``Consumer`` and ``archive`` (the last in the spark step, which has pyarrow).

youzan's nsqd takes the original's TLS, compression and AUTH flags (its nsqd/options.go:
``--tls-cert``/``--tls-key``/``--tls-root-ca-file``/``--tls-client-auth-policy``/
``--tls-required``, ``--snappy``/``--deflate`` on by default, ``--auth-http-address``),
so each cluster here is a redesign sandbox whose nsqd gets those flags:

* ``verify``: TLS required on TCP (``tcp-https``, so the launcher's plain HTTP health
  check still works) and client certificates signed by the test CA required
  (``require-verify``);
* ``optional``: TLS offered but not required, no client certificate policy, AUTH against
  the test auth server (tests/helpers/auth_server.py: nsqauthd's HTTP protocol), snappy
  and deflate available.

Every command publishes and reads back through the secured connections and compares the
bodies; nsqd's ``/stats`` says what it negotiated. Secrets are checked absent from debug
logs, the process's command line and error messages.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import nsqctl
from nsqctl.servers import cluster
from tests.helpers.auth_server import AuthServer
from tests.helpers.certs import TLSFiles, make_tls_files, nsqd_tls_args
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env, run_cli
from tests.helpers.redesign import TopicSpec, create_topics
from tests.helpers.wait import eventually

pytestmark = pytest.mark.redesign

GOOD_SECRET = f"yz-good-s3cret-{uuid.uuid4().hex}"
BAD_SECRET = f"yz-bad-s3cret-{uuid.uuid4().hex}"
#: topics made once per cluster, each with channel "c" before anything is published
TOPICS = {
    "plain": TopicSpec(partitions=2),
    "ordered": TopicSpec(partitions=2, ordered=True),
    "lib": TopicSpec(partitions=2),
    "snappy": TopicSpec(partitions=1),
    "deflate": TopicSpec(partitions=1),
    "archive": TopicSpec(partitions=2),
}


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls_files(tmp_path_factory.mktemp("yz-tls"))


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    with AuthServer(GOOD_SECRET) as server:
        yield server


Secured = tuple[cluster.Cluster, dict[str, str]]


def _nsqd_args(name: str, tls_files: TLSFiles, auth_server: AuthServer) -> list[str]:
    if name == "verify":
        return [
            *nsqd_tls_args(tls_files),
            "--tls-client-auth-policy=require-verify",
            "--tls-required=tcp-https",
        ]
    return [*nsqd_tls_args(tls_files), f"--auth-http-address={auth_server.address}"]


@pytest.fixture(scope="module")
def secured(
    request: pytest.FixtureRequest,
    redesign_bins: Path,
    tmp_path_factory: pytest.TempPathFactory,
    tls_files: TLSFiles,
    auth_server: AuthServer,
) -> Iterator[dict[str, Secured]]:
    """The clusters (``verify``, ``optional``) that this run's tests of the module use:
    the core step runs both kinds, the spark step only ``optional``. Their servers start
    one cluster after the other (each takes its ports when it starts), then every topic of
    both is made at once: a new topic waits for nsqlookupd's periodic check, which
    dominates a start, and the two clusters' checks overlap."""
    names = [
        name
        for name in ("verify", "optional")
        if any(
            name in item.fixturenames
            for item in request.session.items
            if isinstance(item, pytest.Function) and item.module is request.module
        )
    ]
    started: dict[str, Secured] = {}
    try:
        for name in names:
            c = cluster.start(
                "redesign",
                tmp_path_factory.mktemp(name),
                nsqd=2,
                lookupd=1,
                bin_dir=redesign_bins,
                nsqd_args=_nsqd_args(name, tls_files, auth_server),
            )
            started[name] = c, {kind: f"{name}_{kind}_{uuid.uuid4().hex[:8]}" for kind in TOPICS}

        async def make_topics() -> None:
            await asyncio.gather(
                *(
                    create_topics(c.lookupd_http, {topics[k]: s for k, s in TOPICS.items()})
                    for c, topics in started.values()
                )
            )

        asyncio.run(make_topics())
        yield started
    finally:
        for c, _ in started.values():
            c.kill()  # thrown away: no node need leave gracefully


@pytest.fixture(scope="module")
def verify(secured: dict[str, Secured]) -> Secured:
    """TLS required on TCP, client certificates signed by the test CA required."""
    return secured["verify"]


@pytest.fixture(scope="module")
def optional(secured: dict[str, Secured]) -> Secured:
    """TLS offered, not required; AUTH against the test auth server."""
    return secured["optional"]


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("secret") / "auth-secret"
    path.write_text(GOOD_SECRET + "\n")
    path.chmod(0o600)
    return path


def _verify_flags(files: TLSFiles) -> list[str]:
    return [
        "--tls-ca",
        str(files.ca_cert),
        "--tls-cert",
        str(files.client_cert),
        "--tls-key",
        str(files.client_key),
    ]


def _optional_flags(files: TLSFiles, secret: Path) -> list[str]:
    return ["--tls-ca", str(files.ca_cert), "--auth-secret-file", str(secret)]


def _bodies(tag: str, count: int) -> list[bytes]:
    return [f"{tag}-{i:04d}-{os.urandom(6).hex()}".encode() for i in range(count)]


def _pub_and_tail(
    c: cluster.Cluster,
    topic: str,
    flags: Sequence[str],
    bodies: list[bytes],
    *tail_args: str,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[bytes], subprocess.CompletedProcess[bytes]]:
    lookupd = ["--lookupd", c.lookupd_http[0]]
    pub = run_cli(["pub", topic, *lookupd, *flags], input=b"\n".join(bodies) + b"\n", env=env)
    assert pub.returncode == 0, pub.stderr.decode()
    tail = run_cli(
        ["tail", topic, "-c", "c", "-n", str(len(bodies)), *lookupd, *flags, *tail_args], env=env
    )
    assert tail.returncode == 0, tail.stderr.decode()
    return pub, tail


# --------------------------------------------------------------------------- TLS, verified


def test_pub_and_tail_over_tls_with_a_client_certificate(
    verify: tuple[cluster.Cluster, dict[str, str]], tls_files: TLSFiles
) -> None:
    c, topics = verify
    bodies = _bodies("tls", 40)
    _pub, tail = _pub_and_tail(c, topics["plain"], _verify_flags(tls_files), bodies)
    assert sorted(tail.stdout.splitlines()) == sorted(bodies)


def test_ordered_tail_over_tls_keeps_partition_order(
    verify: tuple[cluster.Cluster, dict[str, str]], tls_files: TLSFiles
) -> None:
    c, topics = verify
    bodies = _bodies("ord", 30)
    _pub, tail = _pub_and_tail(
        c, topics["ordered"], [*_verify_flags(tls_files), "--partition", "0"], bodies, "--ordered"
    )
    assert tail.stdout.splitlines() == bodies  # one partition: exactly the published order


def test_tls_server_refuses_a_client_without_certificate_in_one_line(
    verify: tuple[cluster.Cluster, dict[str, str]], tls_files: TLSFiles
) -> None:
    c, topics = verify
    for flags in (["--tls-ca", str(tls_files.ca_cert)], []):  # no client cert; no TLS at all
        out = run_cli(
            ["tail", topics["plain"], "-n", "1", "--lookupd", c.lookupd_http[0], *flags],
            timeout=60,
        )
        assert_one_line_error(out, 1)


async def test_library_consumer_over_tls(
    verify: tuple[cluster.Cluster, dict[str, str]], tls_files: TLSFiles
) -> None:
    c, topics = verify
    topic = topics["lib"]
    tls = nsqctl.TLSSettings(
        ca_file=str(tls_files.ca_cert),
        cert_file=str(tls_files.client_cert),
        key_file=str(tls_files.client_key),
    )
    config = nsqctl.ConnectionConfig(tls=tls)
    bodies = _bodies("lib", 50)
    async with nsqctl.Producer(lookupd_http=c.lookupd_http, config=config) as producer:
        await producer.publish_many(topic, bodies)
    got: list[bytes] = []
    done = asyncio.Event()

    def handle(msg: nsqctl.Message) -> None:
        got.append(msg.body)
        if len(got) >= len(bodies):
            done.set()

    consumer = nsqctl.Consumer(
        topic,
        "c",
        handle,
        lookupd_http=c.lookupd_http,
        config=config,
        options=nsqctl.ConsumerOptions(max_in_flight=10),
    )
    await consumer.start()
    try:
        conns = list(consumer.connections.values())
        assert conns and all(conn.is_redesign and conn.identify for conn in conns)
        assert all(conn.identify.tls_v1 for conn in conns if conn.identify)
        await asyncio.wait_for(done.wait(), 30)
    except TimeoutError:
        raise AssertionError(f"{len(got)} of {len(bodies)} consumed: {consumer.stats}") from None
    finally:
        await consumer.stop()
    assert sorted(got) == sorted(bodies)


# --------------------------------------------------------------------------- AUTH, TLS optional


def test_pub_and_tail_with_auth_over_optional_tls_leak_no_secret(
    optional: tuple[cluster.Cluster, dict[str, str]],
    tls_files: TLSFiles,
    secret_file: Path,
    auth_server: AuthServer,
) -> None:
    c, topics = optional
    env = clean_env({"NSQCTL_LOG": "debug"})
    bodies = _bodies("auth", 25)
    pub, tail = _pub_and_tail(
        c, topics["plain"], _optional_flags(tls_files, secret_file), bodies, env=env
    )
    assert sorted(tail.stdout.splitlines()) == sorted(bodies)
    assert auth_server.queries, "nsqd never asked the auth server"
    assert auth_server.queries[-1]["secret"] == GOOD_SECRET
    assert auth_server.queries[-1]["tls"] == "true"
    for proc in (pub, tail):
        assert GOOD_SECRET.encode() not in proc.stderr + proc.stdout


def test_auth_secret_is_not_in_the_process_command_line(
    optional: tuple[cluster.Cluster, dict[str, str]], tls_files: TLSFiles, secret_file: Path
) -> None:
    c, topics = optional
    args = [NSQCTL, "tail", topics["plain"], "--lookupd", c.lookupd_http[0]]
    args += _optional_flags(tls_files, secret_file)
    proc = subprocess.Popen(
        args, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        cmdline = Path(f"/proc/{proc.pid}/cmdline")
        seen = b""

        def tail_ran() -> bool:  # or it exited: the assertion below says so
            nonlocal seen
            if proc.poll() is not None:
                return True
            seen = cmdline.read_bytes()
            return b"tail" in seen

        eventually(tail_ran, 20, "the tail process to run", step=0.01)
        assert b"tail" in seen, "the tail process never ran"
        assert GOOD_SECRET.encode() not in seen
        assert GOOD_SECRET.encode() not in Path(f"/proc/{proc.pid}/environ").read_bytes()
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert GOOD_SECRET.encode() not in err


def test_a_wrong_or_missing_secret_is_one_line_without_the_secret(
    optional: tuple[cluster.Cluster, dict[str, str]],
    tls_files: TLSFiles,
    tmp_path: Path,
) -> None:
    c, topics = optional
    bad = tmp_path / "bad-secret"
    bad.write_text(BAD_SECRET)
    bad.chmod(0o600)
    lookupd = ["--lookupd", c.lookupd_http[0], "--tls-ca", str(tls_files.ca_cert)]
    for extra in (["--auth-secret-file", str(bad)], []):
        out = run_cli(["pub", topics["plain"], "x", *lookupd, *extra], timeout=60)
        line = assert_one_line_error(out, 1)
        assert BAD_SECRET not in line


@pytest.mark.parametrize("codec", ["snappy", "deflate"])
def test_compression_with_tls_and_auth(
    optional: tuple[cluster.Cluster, dict[str, str]],
    tls_files: TLSFiles,
    secret_file: Path,
    codec: str,
) -> None:
    c, topics = optional
    flags = [*_optional_flags(tls_files, secret_file), "--compression", codec]
    bodies = [b"C" + b"compressible nsqctl body " * 400 + os.urandom(4).hex().encode()]
    bodies += _bodies(codec, 30)
    _pub, tail = _pub_and_tail(c, topics[codec], flags, bodies)
    assert sorted(tail.stdout.splitlines()) == sorted(bodies)


@pytest.mark.spark
def test_archive_over_tls_and_auth(
    optional: tuple[cluster.Cluster, dict[str, str]],
    tls_files: TLSFiles,
    secret_file: Path,
    tmp_path: Path,
) -> None:
    import pyarrow.parquet as pq

    c, topics = optional
    topic = topics["archive"]
    flags = _optional_flags(tls_files, secret_file)
    bodies = _bodies("arc", 40)
    lookupd = ["--lookupd", c.lookupd_http[0]]
    pub = run_cli(["pub", topic, *lookupd, *flags], input=b"\n".join(bodies) + b"\n")
    assert pub.returncode == 0, pub.stderr.decode()
    out_dir = tmp_path / "archive"
    arc = run_cli(
        [
            "archive",
            topic,
            "-o",
            str(out_dir),
            "-c",
            "c",
            "--exit-when-idle",
            "2",
            *lookupd,
            *flags,
        ],
        timeout=120,
    )
    assert arc.returncode == 0, arc.stderr.decode()
    files = sorted(out_dir.rglob("*.parquet"))
    assert files, f"no parquet file under {out_dir}"
    archived = [row for f in files for row in pq.read_table(f).column("body").to_pylist()]
    assert sorted(archived) == sorted(bodies)
