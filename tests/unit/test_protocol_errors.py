"""Error frames → typed errors: codes, fatality, retry policy, messages."""

from __future__ import annotations

import pytest

from nsqctl import protocol as p
from nsqctl.errors import NsqctlError
from nsqctl.protocol import errors as e
from nsqctl.protocol.errors import ServerError, error_from_frame


@pytest.mark.parametrize(
    ("payload", "cls", "code", "fatal"),
    [
        (b"E_INVALID cannot SUB in current state", e.InvalidError, "E_INVALID", True),
        (b'E_BAD_TOPIC SUB topic name "x y" is not valid', e.BadTopicError, "E_BAD_TOPIC", True),
        (b"E_BAD_CHANNEL bad", e.BadChannelError, "E_BAD_CHANNEL", True),
        (b"E_BAD_MESSAGE message too big 5 > 4", e.BadMessageError, "E_BAD_MESSAGE", True),
        (b"E_BAD_BODY invalid body size 0", e.BadBodyError, "E_BAD_BODY", True),
        (b"E_BAD_PARTITION x", e.BadPartitionError, "E_BAD_PARTITION", True),
        (b"E_IDENTIFY_FAILED x", e.IdentifyFailedError, "E_IDENTIFY_FAILED", True),
        (b"E_AUTH_FAILED AUTH failed", e.AuthFailedError, "E_AUTH_FAILED", True),
        (b"E_AUTH_FIRST AUTH required before SUB", e.AuthFailedError, "E_AUTH_FIRST", True),
        (b"E_UNAUTHORIZED AUTH failed for SUB", e.UnauthorizedError, "E_UNAUTHORIZED", True),
        (b"E_TOPIC_NOT_EXIST ", e.TopicNotExistError, "E_TOPIC_NOT_EXIST", True),
        (b"E_SUB_ORDER_IS_MUST only ordered", e.SubOrderIsMustError, "E_SUB_ORDER_IS_MUST", True),
        (b"E_SUB_EXTEND_NEED x", e.SubExtendNeedError, "E_SUB_EXTEND_NEED", True),
        (b"E_SUB_EXTEND_FORBIDDON x", e.SubExtendForbiddenError, "E_SUB_EXTEND_FORBIDDON", True),
        (b"E_PUB_TOO_MUCH_WAITING 9", e.PubTooMuchWaitingError, "E_PUB_TOO_MUCH_WAITING", True),
        (b"E_FIN_FAILED FIN x failed", e.FinFailedError, "E_FIN_FAILED", False),
        (b"E_REQ_FAILED x", e.ReqFailedError, "E_REQ_FAILED", False),
        (b"E_TOUCH_FAILED x", e.TouchFailedError, "E_TOUCH_FAILED", False),
        (b"E_PUB_FAILED disk", e.PubFailedError, "E_PUB_FAILED", False),
        (b"E_MPUB_FAILED disk", e.MPubFailedError, "E_MPUB_FAILED", False),
        (b"E_DPUB_FAILED x", e.DPubFailedError, "E_DPUB_FAILED", False),
        (b"E_EXT_NOT_SUPPORT x", e.ExtNotSupportError, "E_EXT_NOT_SUPPORT", False),
        (b"E_INVALID_JSON_HEADER bad", e.InvalidJsonHeaderError, "E_INVALID_JSON_HEADER", False),
        (b"INVALID_TRACE_ID invalid trace id", e.InvalidTraceIdError, "INVALID_TRACE_ID", False),
    ],
)
def test_codes(payload: bytes, cls: type[ServerError], code: str, fatal: bool) -> None:
    err = error_from_frame(payload)
    assert type(err) is cls
    assert err.code == code
    assert err.fatal is fatal
    assert isinstance(err, NsqctlError)


def test_json_header_code_is_not_mistaken_for_e_invalid() -> None:
    assert type(error_from_frame(b"E_INVALID_JSON_HEADER x")) is e.InvalidJsonHeaderError
    assert type(error_from_frame(b"E_INVALID x")) is e.InvalidError


def test_prefix_match_of_glued_code() -> None:
    err = error_from_frame(b"E_FIN_FAILEDsomething")
    assert type(err) is e.FinFailedError
    assert (err.code, err.description) == ("E_FIN_FAILED", "something")


@pytest.mark.parametrize("payload", [b"E_FAILED_ON_NOT_LEADER ", b"E_FAILED_ON_NOT_LEADER"])
def test_empty_description(payload: bytes) -> None:
    err = error_from_frame(payload, "pub")
    assert type(err) is e.NotLeaderError
    assert err.description == ""
    assert "E_FAILED_ON_NOT_LEADER" in str(err)
    assert "refresh the lookup" in str(err)


@pytest.mark.parametrize(
    ("context", "fatal"),
    [
        ("pub", False),
        ("mpub", False),
        ("pub_trace", False),
        ("mpub_ext", False),
        ("sub", True),
        ("fin", True),
        (None, True),
    ],
)
def test_mixed_fatality(context: str | None, fatal: bool) -> None:
    for payload in (b"E_FAILED_ON_NOT_LEADER ", b"E_FAILED_ON_NOT_WRITABLE "):
        err = error_from_frame(payload, context)
        assert err.fatal is fatal
        assert err.needs_lookup_refresh
        assert err.retryable_on_publish


@pytest.mark.parametrize(
    ("payload", "retryable", "refresh"),
    [
        (b"E_FAILED_ON_NOT_LEADER ", True, True),
        (b"E_FAILED_ON_NOT_WRITABLE ", True, True),
        (b"E_TOPIC_NOT_EXIST ", True, True),
        (b"E_PUB_FAILED x", True, False),
        (b"E_MPUB_FAILED x", True, False),
        (b"E_PUB_TOO_MUCH_WAITING x", True, False),
        (b"E_BAD_MESSAGE x", False, False),
        (b"E_BAD_BODY x", False, False),
        (b"E_BAD_TOPIC x", False, False),
        (b"E_EXT_NOT_SUPPORT x", False, False),
        (b"E_UNAUTHORIZED x", False, False),
        (b"E_SOMETHING_NEW x", False, False),
    ],
)
def test_publish_retry_policy(payload: bytes, retryable: bool, refresh: bool) -> None:
    err = error_from_frame(payload, "pub")
    assert err.retryable_on_publish is retryable
    assert err.needs_lookup_refresh is refresh


def test_unknown_code_is_generic_and_fatal() -> None:
    err = error_from_frame(b"E_SOMETHING_NEW went wrong")
    assert type(err) is ServerError
    assert (err.code, err.description, err.fatal) == ("E_SOMETHING_NEW", "went wrong", True)
    assert "E_SOMETHING_NEW: went wrong" in str(err)


def test_free_text_error() -> None:
    err = error_from_frame(b"too much client connections")
    assert type(err) is ServerError
    assert err.code == ""
    assert err.description == "too much client connections"
    assert err.fatal


def test_empty_payload_and_bad_utf8() -> None:
    assert error_from_frame(b"").code == ""
    assert "empty error frame" in str(error_from_frame(b""))
    err = error_from_frame(b"E_BAD_TOPIC \xff\xfe")
    assert type(err) is e.BadTopicError
    assert "\ufffd" in err.description


def test_messages_are_actionable_and_keep_server_text() -> None:
    err = error_from_frame(
        b"E_SUB_ORDER_IS_MUST this topic is configured only allow ordered sub",
        "sub",
        topic="orders",
    )
    text = str(err)
    assert "topic 'orders' is ordered" in text
    assert "SUB_ORDERED" in text and err.setting == "ordered" and "--" not in text
    assert "this topic is configured only allow ordered sub" in text
    assert err.topic == "orders"
    anonymous = str(error_from_frame(b"E_SUB_EXTEND_NEED x"))
    assert anonymous.startswith("the topic is an ext topic"), anonymous  # not "topic the topic"
    assert "{topic}" not in anonymous


def test_every_registered_error_formats_without_placeholders() -> None:
    for code, cls in e._REGISTRY.items():
        err = cls(code, "desc", topic="t1")
        assert "{" not in str(err), code
        assert code in str(err)
        # E_INVALID's hint follows nsqd's text ("desc" says nothing it could follow)
        assert err.hint_text() or cls is e.InvalidError, code


def test_e_invalid_tls_required_says_to_connect_with_tls() -> None:
    """Both families answer any command before the TLS upgrade with E_INVALID and "TLS
    required" in the text: that becomes an error that names TLS, not a generic one."""
    err = error_from_frame(b"E_INVALID cannot SUB in current state (TLS required)", "sub")
    assert isinstance(err, e.TLSRequiredError) and isinstance(err, e.InvalidError)
    assert err.setting == "tls" and err.fatal
    assert "requires TLS" in str(err) and "TLS required" in str(err)
    other = error_from_frame(b"E_INVALID cannot SUB in current state", "sub")
    assert type(other) is e.InvalidError and other.setting is None


def test_e_invalid_commit_log_end_of_file_is_an_empty_partition() -> None:
    """youzan answers a SUB_ADVANCED start on a partition with an empty commit log with
    E_INVALID and its ErrCommitLogEOF text: that becomes the type a consumer catches to
    read the partition from its end; any other E_INVALID stays the generic class."""
    err = error_from_frame(b"E_INVALID commit log end of file", "sub", topic="t1")
    assert isinstance(err, p.EmptyPartitionError) and isinstance(err, e.InvalidError)
    assert err.code == "E_INVALID" and err.description == "commit log end of file"
    assert err.fatal and "holds no message yet" in str(err) and "'t1'" in str(err)
    other = error_from_frame(b"E_INVALID cannot SUB in current state", "sub")
    assert type(other) is e.InvalidError


@pytest.mark.parametrize(
    ("frame", "said"),
    [
        (b"E_INVALID cannot SUB in current state", "current state"),
        (b"E_INVALID DPUB timeout 3600001 out of range 0-3600000", "--max-req-timeout"),
        (b"E_INVALID RDY count 3000 out of range 0-2500", "--max-rdy-count"),
        (b"E_INVALID invalid command PUB_TRACE", "other NSQ family"),
    ],
)
def test_an_invalid_frame_is_hinted_by_what_its_text_says(frame: bytes, said: str) -> None:
    """E_INVALID covers many conditions: the hint follows nsqd's text, and only a text
    about the connection's state is told it is about the state."""
    text = str(error_from_frame(frame))
    assert said in text and frame.decode().split(" ", 1)[1] in text, text
    assert ("state" in text) == (said == "current state"), text


def test_an_invalid_frame_of_a_text_without_a_hint_is_nsqds_words_alone() -> None:
    """A specific text no hint is known for (a missing parameter, heartbeats disabled)
    is shown as nsqd said it, without the hint of another condition."""
    err = error_from_frame(b"E_INVALID cannot SUB with heartbeats disabled", "sub")
    assert type(err) is e.InvalidError
    assert str(err) == "server error E_INVALID: cannot SUB with heartbeats disabled"
