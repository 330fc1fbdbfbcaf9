"""The sans-IO session: replies matched to pipelined requests in order, heartbeats,
error routing and fatality, CLOSE_WAIT, corrupt streams - frames in, events out, no
socket. The test plays nsqd by encoding the frames it would send."""

from __future__ import annotations

import struct

import pytest

from nsqctl import protocol as p
from nsqctl.protocol.compression import SnappyCodec
from nsqctl.protocol.frames import CLOSE_WAIT, HEARTBEAT, OK, FrameType, encode_frame
from nsqctl.protocol.raw_message import MessageLayout, RawMessage, encode_message
from nsqctl.protocol.session import (
    CLOSE_WAIT_RECEIVED,
    SEND_NOP,
    Fatal,
    ServerNotice,
    Session,
    UnsolicitedReply,
    idle_timeout,
)


class Waiter:
    """A pending request's stand-in for the transport's future."""

    def __init__(self, cancelled: bool = False) -> None:
        self.result: bytes | None = None
        self.error: BaseException | None = None
        self.cancelled = cancelled

    def done(self) -> bool:
        return self.cancelled or self.result is not None or self.error is not None

    def set_result(self, result: bytes) -> None:
        assert not self.done()
        self.result = result

    def set_exception(self, exception: BaseException) -> None:
        assert not self.done()
        self.error = exception


def _session(*contexts: str) -> tuple[Session[Waiter], list[Waiter]]:
    session: Session[Waiter] = Session()
    waiters = [Waiter() for _ in contexts]
    for waiter, context in zip(waiters, contexts, strict=True):
        assert session.request(b"CMD\n", waiter, context) == b"CMD\n"
    return session, waiters


def _msg(n: int, body: bytes = b"body") -> RawMessage:
    return RawMessage(1_700_000_000_000_000_000 + n, 1, b"%016x" % n, body)


def _message_frame(n: int, body: bytes = b"body") -> bytes:
    return encode_frame(FrameType.MESSAGE, encode_message(_msg(n, body)))


def _response(data: bytes) -> bytes:
    return encode_frame(FrameType.RESPONSE, data)


def _error(data: bytes) -> bytes:
    return encode_frame(FrameType.ERROR, data)


# --------------------------------------------------------------------------- messages


def test_a_read_of_messages_is_the_decoders_own_batch() -> None:
    session, _ = _session()
    events = session.receive_data(_message_frame(1) + _message_frame(2))
    assert events == [[_msg(1), _msg(2)]]


def test_messages_and_replies_keep_stream_order() -> None:
    session, (w1,) = _session("pub")
    data = _message_frame(1) + _response(OK) + _message_frame(2)
    assert session.receive_data(data) == [[_msg(1)], [_msg(2)]]
    assert w1.result == OK and not session.awaiting


def test_frames_split_into_single_bytes_are_reassembled() -> None:
    session, (w_sub, w_pub) = _session("sub", "pub")
    msg = _msg(7, bytes(range(256)) * 3)
    stream = (
        _response(OK) + encode_frame(FrameType.MESSAGE, encode_message(msg)) + _response(b"OK-pub")
    )
    events = []
    for i in range(len(stream)):
        events += session.receive_data(stream[i : i + 1])
    assert events == [[msg]]
    assert w_sub.result == OK and w_pub.result == b"OK-pub"


def test_layout_decides_how_messages_decode() -> None:
    session, _ = _session()
    session.layout = MessageLayout("redesign", ordered=True)
    raw = RawMessage(5, 1, b"", b"ordered", internal_id=9, trace_id=3, offset=100, size=7)
    frame = encode_frame(FrameType.MESSAGE, encode_message(raw, session.layout))
    [batch] = session.receive_data(frame)
    assert isinstance(batch, list)
    [got] = batch
    assert (got.internal_id, got.offset, got.size, got.body) == (9, 100, 7, b"ordered")


def test_compressed_reads_and_already_decoded_bytes() -> None:
    server = SnappyCodec()
    session: Session[Waiter] = Session(SnappyCodec())
    assert session.receive_data(_message_frame(1), decoded=True) == [[_msg(1)]]
    assert session.receive_data(server.compress(_message_frame(2))) == [[_msg(2)]]


# --------------------------------------------------------------------------- replies


def test_pipelined_replies_match_in_order() -> None:
    session, waiters = _session("pub", "pub", "mpub")
    assert session.receive_data(_response(b"a") + _response(b"b")) == []
    assert [w.result for w in waiters] == [b"a", b"b", None]
    session.receive_data(_response(b"c"))
    assert waiters[2].result == b"c" and not session.awaiting


def test_a_reply_for_a_caller_that_gave_up_is_still_its_own() -> None:
    """A cancelled request keeps its place: its reply is dropped, not given to the next."""
    session: Session[Waiter] = Session()
    gone, waiting = Waiter(cancelled=True), Waiter()
    session.request(b"PUB\n", gone, "pub")
    session.request(b"PUB\n", waiting, "pub")
    session.receive_data(_response(b"first") + _response(b"second"))
    assert gone.result is None and waiting.result == b"second"


def test_heartbeat_wants_a_nop_and_leaves_pending_alone() -> None:
    session, (w,) = _session("pub")
    heartbeat = _response(HEARTBEAT)
    assert session.receive_data(heartbeat + heartbeat) == [SEND_NOP, SEND_NOP]
    assert SEND_NOP.data == b"NOP\n"
    assert w.result is None and session.awaiting == 1


def test_unsolicited_reply() -> None:
    session, _ = _session()
    assert session.receive_data(_response(b"what")) == [UnsolicitedReply(b"what")]


def test_close_wait_settles_the_cls() -> None:
    session, (w,) = _session("cls")
    assert session.receive_data(_response(CLOSE_WAIT)) == [CLOSE_WAIT_RECEIVED]
    assert w.result == CLOSE_WAIT
    idle, _ = _session()
    assert idle.receive_data(_response(CLOSE_WAIT)) == [CLOSE_WAIT_RECEIVED]


def test_fail_pending() -> None:
    session, waiters = _session("pub", "sub")
    err = RuntimeError("closed")
    session.fail_pending(err)
    assert [w.error for w in waiters] == [err, err] and not session.awaiting


# --------------------------------------------------------------------------- error frames


def test_not_leader_on_pub_fails_that_publish_only() -> None:
    session, waiters = _session("pub", "pub", "pub")
    data = (
        _response(OK) + _error(b"E_FAILED_ON_NOT_LEADER not leader for partition 0") + _response(OK)
    )
    assert session.receive_data(data) == []  # nothing fatal, nothing to report
    assert waiters[0].result == OK and waiters[2].result == OK
    err = waiters[1].error
    assert isinstance(err, p.NotLeaderError)
    assert err.context == "pub" and not err.fatal and err.retryable_on_publish


def test_not_leader_on_sub_is_fatal_and_stops_the_read() -> None:
    session, (w_sub, w_pub) = _session("sub", "pub")
    data = _error(b"E_FAILED_ON_NOT_LEADER") + _response(OK) + _message_frame(1)
    events = session.receive_data(data)
    assert isinstance(w_sub.error, p.NotLeaderError) and w_sub.error.fatal
    assert w_sub.error.context == "sub"
    assert events == [Fatal(str(w_sub.error))]
    assert w_pub.result is None  # left for the transport to fail as it closes


def test_fatal_invalid_answering_a_publish() -> None:
    session, (first, second) = _session("pub", "pub")
    events = session.receive_data(_error(b"E_INVALID cannot PUB in current state"))
    assert isinstance(first.error, p.InvalidError) and first.error.context == "pub"
    assert events == [Fatal(str(first.error))] and "E_INVALID" in str(first.error)
    assert second.error is None and session.awaiting == 1


def test_fin_failed_never_takes_a_pending_reply() -> None:
    session, (pub,) = _session("pub")
    data = _error(b"E_FIN_FAILED FIN 0123456789abcdef failed") + _response(OK)
    events = session.receive_data(data)
    assert pub.result == OK
    (notice,) = events
    assert isinstance(notice, ServerNotice) and isinstance(notice.error, p.FinFailedError)
    assert notice.error.context == "fin" and not notice.error.fatal


@pytest.mark.parametrize(
    ("frame", "kind"),
    [(b"E_REQ_FAILED x", p.ReqFailedError), (b"E_TOUCH_FAILED x", p.TouchFailedError)],
)
def test_req_and_touch_failures_are_notices(frame: bytes, kind: type) -> None:
    session, (pub,) = _session("pub")
    (notice,) = session.receive_data(_error(frame))
    assert isinstance(notice, ServerNotice) and isinstance(notice.error, kind)
    assert pub.error is None and session.awaiting == 1


def test_unsolicited_fatal_error_is_a_notice_then_fatal() -> None:
    session, _ = _session()
    events = session.receive_data(_error(b"E_INVALID invalid command FOO"))
    assert len(events) == 2
    notice, fatal = events
    assert isinstance(notice, ServerNotice) and isinstance(notice.error, p.InvalidError)
    assert fatal == Fatal(str(notice.error))


def test_pub_failed_is_not_fatal() -> None:
    session, (w,) = _session("pub")
    assert session.receive_data(_error(b"E_PUB_FAILED PUB failed exiting")) == []
    assert isinstance(w.error, p.PubFailedError) and w.error.retryable_on_publish


# --------------------------------------------------------------------------- corrupt streams


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (struct.pack(">II", 2, 0), "invalid frame size 2"),
        (struct.pack(">II", 10, 7) + b"xxxxxx", "unknown frame type 7"),
    ],
)
def test_corrupt_frames_poison_the_stream(data: bytes, needle: str) -> None:
    session, _ = _session("pub")
    with pytest.raises(p.FrameDecodeError, match=needle):
        session.receive_data(data)
    with pytest.raises(p.FrameDecodeError, match=needle):
        session.receive_data(_response(OK))  # nothing after it is trusted


def test_truncated_message_frame() -> None:
    session, _ = _session()
    with pytest.raises(p.MessageDecodeError, match="too short"):
        session.receive_data(encode_frame(FrameType.MESSAGE, encode_message(_msg(1))[:10]))


def test_a_frame_cut_off_yields_nothing() -> None:
    session, (w,) = _session("pub")
    assert session.receive_data(_message_frame(1, b"body" * 10)[:30]) == []
    assert w.result is None


def test_idle_timeout_is_two_heartbeats_and_slack_never_under_10s() -> None:
    assert idle_timeout(30_000) == 65.0
    assert idle_timeout(1_000) == 10.0
