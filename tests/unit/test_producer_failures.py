"""A publish that cannot be made fails by its kind, with its cause: no server is needed
to be refused (a loopback port nobody listens on, a name that cannot resolve), and a
body of the wrong type is refused before anything is sent."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Callable

import pytest

import nsqctl
from tests.helpers.cli import assert_one_line_error, run_main
from tests.helpers.wait import wait_for

QUICK = nsqctl.ProducerOptions(max_attempts=2, backoff=0.01, max_backoff=0.01)


def nowhere() -> str:
    """A loopback address nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


# The closed port is found when the test runs, not at collection: parameters must be the
# same in every pytest-xdist worker.
@pytest.mark.parametrize(
    "where", [nowhere, lambda: "no-such-host.invalid:4150"], ids=["closed-port", "unresolvable"]
)
async def test_a_refused_publish_is_a_connect_error_with_its_cause(
    where: Callable[[], str],
) -> None:
    address = where()
    async with nsqctl.Producer(nsqd_tcp=[address], options=QUICK) as producer:
        with pytest.raises(nsqctl.TransportError) as caught:
            await producer.publish("t", b"x")
    err = caught.value
    assert isinstance(err, nsqctl.ConnectError)
    assert isinstance(err, nsqctl.PublishError)  # a publish's failure, as before
    assert isinstance(err, nsqctl.PublishConnectError)
    assert err.setting == "nsqd_tcp"  # the address given is what to fix
    assert "after 2 attempt(s)" in str(err) and address in str(err)
    cause = err.__cause__
    assert isinstance(cause, nsqctl.ConnectError) and not isinstance(cause, nsqctl.PublishError)
    assert isinstance(cause.__cause__, OSError)  # and what the socket said, under that
    assert err.unsent is True  # no attempt reached an nsqd: a retry cannot duplicate it
    assert not isinstance(err, nsqctl.NsqctlTimeoutError)  # refused, not a deadline


async def test_a_publish_whose_every_connect_timed_out_is_a_timeout() -> None:
    """A listener whose accept queue is full (a hung server's fills): the kernel drops
    our SYN, so every attempt's TCP connect times out. The publish ends with an
    NsqctlTimeoutError that is still the PublishConnectError it was."""
    with socket.socket() as listener, socket.socket() as queued:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        queued.connect(listener.getsockname())  # fills the accept queue
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        config = nsqctl.ConnectionConfig(connect_timeout=0.2)
        async with nsqctl.Producer(nsqd_tcp=[address], config=config, options=QUICK) as producer:
            with pytest.raises(nsqctl.NsqctlTimeoutError) as caught:
                await producer.publish("t", b"x")
    err = caught.value
    assert isinstance(err, nsqctl.PublishConnectTimeoutError)
    assert isinstance(err, nsqctl.PublishConnectError) and err.setting == "connect_timeout"
    assert isinstance(err.__cause__, nsqctl.ConnectTimeoutError)
    assert "after 2 attempt(s) (each timed out)" in str(err)
    assert err.unsent is True


def test_pub_says_nothing_was_sent_when_no_attempt_connected() -> None:
    """pub's account of its input: not "sent but not confirmed" (which has an operator
    fear duplicates) when every attempt failed to connect."""
    address = nowhere()
    proc = run_main("pub", "t", "a", "b", "--nsqd", address)
    line = assert_one_line_error(proc, 1)
    assert "(no input line was published; nothing was sent)" in line, line


@pytest.mark.parametrize(
    ("call", "setting", "text"),
    [
        (lambda p: p.publish("t", "text"), "body", "body must be bytes"),
        (lambda p: p.publish_deferred("t", "text", 1), "body", "got str: encode it first"),
        (lambda p: p.publish_traced("t", 7, 1), "body", "got int"),  # arguments swapped
        (lambda p: p.publish_many("t", "text"), "bodies", "sequence (e.g. a list)"),
        (lambda p: p.publish_many("t", b"bytes"), "bodies", "got bytes"),
        (lambda p: p.publish_many("t", [b"ok", "text"]), "bodies[1]", "bodies[1] must be"),
        (lambda p: p.publish_traced_many("t", [b"x"]), "items", "(trace id, body) pairs"),
        (lambda p: p.publish_traced_many("t", [(1, "x")]), "items[0][1]", "items[0][1] must be"),
        (lambda p: p.publish_ext("t", b"x", "k=v"), "ext", "ext must be a dict"),
    ],
)
async def test_a_body_of_the_wrong_type_is_refused_at_the_call(
    call: object, setting: str, text: str
) -> None:
    """Refused before connecting: the address is one nobody listens on, so reaching
    the network would raise a ConnectError instead."""
    async with nsqctl.Producer(nsqd_tcp=[nowhere()], options=QUICK) as producer:
        with pytest.raises(nsqctl.ConfigError, match=re.escape(text)) as caught:
            await call(producer)  # type: ignore[operator]
    assert caught.value.setting == setting


async def test_batches_begun_before_close_and_run_after_it_end_as_the_producer_closed() -> None:
    """close() in the same loop turn as a publish_many split into batches, before any batch
    task ran: each batch fails at its start, without connecting, with the error of a
    publish on a closed producer (a UsageError, still a PublishError), saying nothing was
    sent."""
    options = nsqctl.ProducerOptions(max_body_size=64)
    producer = nsqctl.Producer(nsqd_tcp=[nowhere()], options=options)
    bodies = [b"x" * 20 for _ in range(12)]  # several MPUB batches under 64 bytes
    publish = asyncio.create_task(producer.publish_many("t", bodies))
    try:
        await asyncio.create_task(producer.close())
        with pytest.raises(nsqctl.PublishError, match="closed before the publish") as caught:
            await publish
    finally:
        publish.cancel()
    err = caught.value
    assert isinstance(err, nsqctl.ProducerClosedError) and isinstance(err, nsqctl.UsageError)
    assert "nothing was sent" in str(err)
    assert err.unsent is True  # no batch ran, so none can have been stored


async def test_a_split_publish_whose_every_batch_was_refused_is_known_unsent() -> None:
    """publish_many split into batches, to a loopback port nobody listens on: every batch's
    every connect is refused, so none can have been stored, and the error says so (a
    caller may publish the whole batch again without making a copy)."""
    options = nsqctl.ProducerOptions(max_attempts=2, backoff=0.01, max_body_size=64)
    async with nsqctl.Producer(nsqd_tcp=[nowhere()], options=options) as producer:
        with pytest.raises(nsqctl.PublishConnectError) as caught:
            await producer.publish_many("t", [b"x" * 20 for _ in range(12)])
    assert caught.value.unsent is True


async def test_a_publish_waiting_to_retry_when_the_producer_closes_ends_as_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A publish whose connect was refused waits out its backoff when close() comes: it
    ends then as the producer closed (its last failure chained), known unsent since no
    attempt reached an nsqd."""
    caplog.set_level("INFO", logger="nsqctl")
    slow = nsqctl.ProducerOptions(
        max_attempts=5, backoff=60.0, max_backoff=60.0, retry_timeout=600.0
    )
    producer = nsqctl.Producer(nsqd_tcp=[nowhere()], options=slow)
    publish = asyncio.create_task(producer.publish("t", b"x"))
    try:
        await wait_for(
            lambda: any("retry 1 in" in r.getMessage() for r in caplog.records),
            10.0,
            "the publish to wait for its second attempt",
        )
        async with asyncio.timeout(20):  # a hang guard: far below the 60 s backoff
            await producer.close()
        with pytest.raises(nsqctl.ProducerClosedError, match="waited to retry") as caught:
            await publish
    finally:
        publish.cancel()
    err = caught.value
    assert isinstance(err, nsqctl.PublishError) and err.unsent is True
    assert isinstance(err.__cause__, nsqctl.ConnectError)


async def test_a_split_publish_raises_the_error_of_its_first_failed_batch() -> None:
    """publish_many split into batches spread over two nsqd addresses: batch 0 goes to a
    listener whose accept queue is full (its connect times out), batch 1 to a port nobody
    listens on (refused at once). The error raised is batch 0's, the first in batch
    order, not batch 1's, which came first in time: the same failures raise the same
    error every time."""
    with socket.socket() as listener, socket.socket() as queued:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        queued.connect(listener.getsockname())  # fills the accept queue
        hung = f"127.0.0.1:{listener.getsockname()[1]}"
        options = nsqctl.ProducerOptions(max_attempts=1, max_body_size=64)
        config = nsqctl.ConnectionConfig(connect_timeout=0.3)
        producer = nsqctl.Producer(nsqd_tcp=[hung, nowhere()], config=config, options=options)
        async with producer:
            with pytest.raises(nsqctl.PublishConnectError) as caught:
                await producer.publish_many("t", [b"x" * 20 for _ in range(4)])
    err = caught.value
    assert isinstance(err, nsqctl.PublishConnectTimeoutError), repr(err)  # batch 0's
    assert hung in str(err)
    assert err.unsent is True
