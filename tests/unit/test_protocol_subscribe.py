"""The classification of a refused subscription: every error code either nsqd family
answers SUB / SUB_ORDERED / SUB_ADVANCED with, and the errors raised before one is sent."""

from __future__ import annotations

import pytest

from nsqctl.errors import ConfigError, ConnectionClosedError, NsqctlError
from nsqctl.protocol import InvalidCommandError, SubscribeRefusal, error_from_frame
from nsqctl.protocol.subscribe import classify_subscribe_error

R = SubscribeRefusal

# (error frame payload, the subscribe command it answered, expected refusal). The texts
# are the servers' own (youzan nsqdserver/protocol_v2.go, nsqio nsqd/protocol_v2.go).
FRAMES = [
    (b"E_FAILED_ON_NOT_LEADER", "sub", R.NOT_LEADER),
    (b"E_FAILED_ON_NOT_LEADER", "sub_ordered", R.NOT_LEADER),
    (b"E_FAILED_ON_NOT_WRITABLE", "sub_advanced", R.NOT_LEADER),
    (b"E_TOPIC_NOT_EXIST", "sub", R.TOPIC_NOT_FOUND),
    (b"E_TOPIC_NOT_EXIST", "sub_advanced", R.TOPIC_NOT_FOUND),
    (b"E_BAD_PARTITION SUB topic partition is not valid: 9", "sub", R.PARTITION_MISSING),
    (b"E_INVALID commit log end of file", "sub_advanced", R.PARTITION_EMPTY),
    (
        b"E_SUB_ORDER_IS_MUST this topic is configured only allow ordered sub",
        "sub",
        R.ORDER_REQUIRED,
    ),
    (b"E_BAD_TOPIC SUB topic name 'a b' is not valid", "sub", R.BAD_NAME),
    (b"E_BAD_CHANNEL SUB channel name 'a b' is not valid", "sub_ordered", R.BAD_NAME),
    (
        b"E_SUB_EXTEND_NEED this topic is extended and should identify as extend support.",
        "sub",
        R.EXT_MISMATCH,
    ),
    (
        b"E_SUB_EXTEND_FORBIDDON this topic is not extended and should not identify as extend",
        "sub",
        R.EXT_MISMATCH,
    ),
    (b"E_INVALID cannot SUB, TLS required", "sub", R.TLS_REQUIRED),
    (b"E_AUTH_FIRST AUTH required before SUB", "sub", R.AUTH),
    (b"E_AUTH_FAILED AUTH failed", "sub", R.AUTH),
    (b"E_UNAUTHORIZED SUB Insufficient Permissions", "sub", R.AUTH),
    (
        b"E_SUB_CHANNEL_NOT_REGISTERED channel is not registered under topic.",
        "sub",
        R.CHANNEL_NOT_REGISTERED,
    ),
    (b"E_INVALID cannot SUB in current state", "sub", R.RETRY),
    (b"E_INVALID cannot SUB with heartbeats disabled", "sub", R.RETRY),
    (b"E_INVALID SUB insufficient number of parameters", "sub", R.RETRY),
    (b"E_INVALID ordered channel can not set sample rate", "sub_ordered", R.RETRY),
    (b"E_TOO_MANY_CHANNEL_CONSUMERS channel consumer limit 10 reached", "sub", R.RETRY),
    (b"E_SOMETHING_NEW", "sub", R.RETRY),
    (b"too much client connections", "sub", R.RETRY),
]

FATAL = {R.ORDER_REQUIRED, R.BAD_NAME, R.EXT_MISMATCH, R.TLS_REQUIRED, R.CONFIG}


@pytest.mark.parametrize(("frame", "context", "expected"), FRAMES)
def test_server_answer(frame: bytes, context: str, expected: SubscribeRefusal) -> None:
    err = error_from_frame(frame, context=context, topic="t")
    refusal = classify_subscribe_error(err)
    assert refusal is expected
    assert refusal.fatal is (expected in FATAL)


def test_every_refusal_has_a_case() -> None:
    """The table covers each kind the consumer acts on."""
    covered = {expected for _f, _c, expected in FRAMES} | {R.CONFIG}
    assert covered == set(SubscribeRefusal)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ConfigError("an ordered subscription needs the redesign", setting="ordered"), R.CONFIG),
        (InvalidCommandError("bad channel name"), R.CONFIG),
        (ConnectionClosedError("127.0.0.1:4150", "server closed the socket"), R.RETRY),
        (NsqctlError("anything else"), R.RETRY),
    ],
)
def test_raised_before_or_instead_of_an_answer(
    error: NsqctlError, expected: SubscribeRefusal
) -> None:
    refusal = classify_subscribe_error(error)
    assert refusal is expected
    assert refusal.fatal is (expected in FATAL)
