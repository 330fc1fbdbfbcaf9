"""One publish call's record of the nsqds it failed on, on hand-made state: no servers,
no event loop."""

from __future__ import annotations

import nsqctl
from nsqctl.errors import ConnectError, PublishError
from nsqctl.lookup.topology import Peer
from nsqctl.producer.options import ProducerOptions
from nsqctl.producer.retry import PublishCall
from nsqctl.producer.retry_clock import RetryClock
from nsqctl.producer.routing import Target

A = Peer("127.0.0.1", 4150)
B = Peer("127.0.0.1", 4250)
NSQDS = [A.tcp_address, B.tcp_address]


def call(partition: int | None = None, shard_key: str | None = None) -> PublishCall:
    clock = RetryClock(ProducerOptions(), 0.0, may_ride=False)
    return PublishCall("t", partition, shard_key, clock, None)


def refused_by(c: PublishCall, peer: Peer) -> bool:
    c.target = Target(peer, None)
    return c.refused_tls(nsqctl.TLSNotOfferedError(str(peer.tcp_address)), NSQDS)


def test_tls_refused_by_one_nsqd_sends_an_unkeyed_publish_to_another() -> None:
    """One nsqd of a TLS cluster restarted without its certificate: an unkeyed publish
    goes on to an nsqd not yet tried; only when every nsqd of the topic refused TLS
    is it a mismatch of settings to fail with."""
    c = call()
    assert refused_by(c, A) is True
    assert c.untried(NSQDS) is True and c.avoid() == [A.tcp_address]
    assert refused_by(c, B) is False
    assert not c.untried(NSQDS)


def test_tls_refused_after_another_nsqd_failed_otherwise_may_still_retry() -> None:
    """The other nsqd was down, not refusing TLS: it may come back, so the call is not
    over (it retries on its clock), though no nsqd is left untried."""
    c = call()
    c.target = Target(B, None)
    c.failed_on_target(ConnectError("nsqd 127.0.0.1:4250: connection refused"))
    assert refused_by(c, A) is True
    assert not c.untried(NSQDS)


def test_tls_refused_fails_a_keyed_publish_at_once() -> None:
    """A partition or a shard key names one place: no other nsqd may take it."""
    for c in (call(partition=0), call(shard_key="k")):
        assert refused_by(c, A) is False
        assert c.tried == {}


def test_the_final_error_says_the_last_cause_when_no_nsqd_was_chosen_for_it() -> None:
    """Failed on two nsqds, then the last attempt failed before one was chosen (every
    lookupd down, no writable partition): the text ends with that cause, which is the
    error's kind, not only with the nsqds' failures."""
    c = call()
    for peer in (A, B):
        c.target = Target(peer, None)
        c.failed_on_target(ConnectError(f"nsqd {peer.tcp_address}: connection refused"))
    last = PublishError("topic 't' has no writable nsqd right now")
    text = c.what_each_did(last)
    assert text.startswith("on 2 nsqds: ") and text.endswith(f"; then: {last}"), text
    mine = c.tried[B.tcp_address].last
    assert "then:" not in c.what_each_did(mine)  # the last failure was an nsqd's own
