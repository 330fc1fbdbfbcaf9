"""The sans-IO handshake machine, every path without a socket: the test plays nsqd by
encoding the frames a server sends (through the server side of the same codecs)."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from nsqctl import protocol as p
from nsqctl.errors import (
    ConnectError,
    NsqctlTimeoutError,
    ProtocolError,
    TLSError,
    UsageError,
)
from nsqctl.protocol.compression import Codec, DeflateCodec, SnappyCodec
from nsqctl.protocol.frames import HEARTBEAT, OK, FrameType, encode_frame
from nsqctl.protocol.handshake import (
    Authenticated,
    Handshake,
    HandshakeEvent,
    HandshakeState,
    HandshakeTimeoutError,
    Identified,
    Ready,
    SendData,
    StartTLS,
    SwitchCodec,
)
from nsqctl.secrets import Secret

PEER = "127.0.0.1:4150"
SECRET = "s3cret-value-never-shown"
BODY = {"client_id": "unit", "feature_negotiation": True, "tls_v1": False}


def _reply(**fields: Any) -> bytes:
    """An IDENTIFY reply frame as nsqd v1.3.0 sends it."""
    reply = {"max_rdy_count": 2500, "version": "1.3.0", "msg_timeout": 60000, **fields}
    return encode_frame(FrameType.RESPONSE, json.dumps(reply).encode())


def _ok() -> bytes:
    return encode_frame(FrameType.RESPONSE, OK)


def _started(**kwargs: Any) -> Handshake:
    hs = Handshake(BODY, peer=PEER, **kwargs)
    hs.start()
    return hs


def _kinds(events: list[HandshakeEvent]) -> list[type]:
    return [type(e) for e in events]


# --------------------------------------------------------------------------- plain


def test_start_sends_magic_then_identify_with_the_body() -> None:
    hs = Handshake(BODY, peer=PEER)
    initial = hs.state  # read once: the assertions below read the state start() moved on
    assert initial is HandshakeState.START
    (event,) = hs.start()
    assert isinstance(event, SendData)
    data = event.data
    assert data.startswith(p.MAGIC_V2 + b"IDENTIFY\n")
    (size,) = struct.unpack(">I", data[13:17])
    assert json.loads(data[17:]) == BODY and size == len(data) - 17
    assert hs.state is HandshakeState.AWAIT_IDENTIFY
    with pytest.raises(UsageError, match="out of order"):
        hs.start()


def test_plain_identify_reply_finishes() -> None:
    hs = _started()
    events = hs.receive_data(_reply())
    assert _kinds(events) == [Identified, Ready]
    assert isinstance(events[0], Identified) and events[0].response.version == "1.3.0"
    assert events[1] == Ready(b"")
    assert hs.state is HandshakeState.DONE and hs.identify is not None
    assert hs.codec.name == "none" and hs.auth is None


def test_a_server_without_negotiation_answers_plain_ok() -> None:
    hs = _started()
    events = hs.receive_data(_ok())
    assert isinstance(events[0], Identified) and not events[0].response.negotiated
    assert events[-1] == Ready(b"")


def test_reply_byte_by_byte_and_what_follows_is_handed_on() -> None:
    """The reply arrives one byte at a time, with a heartbeat behind it: the machine
    stops exactly after the reply and hands the heartbeat to the session."""
    hs = _started()
    heartbeat = encode_frame(FrameType.RESPONSE, HEARTBEAT)
    stream = _reply() + heartbeat
    events: list[HandshakeEvent] = []
    for i in range(len(_reply()) - 1):
        assert hs.receive_data(stream[i : i + 1]) == []
    events = hs.receive_data(stream[len(_reply()) - 1 :])
    assert events[-1] == Ready(heartbeat)


def test_after_done_or_failed_the_machine_takes_no_more_data() -> None:
    hs = _started()
    hs.receive_data(_reply())
    with pytest.raises(UsageError):
        hs.receive_data(b"x")
    with pytest.raises(UsageError):
        hs.receive_eof()


# --------------------------------------------------------------------------- TLS


def test_tls_offered_stops_reading_until_the_upgrade() -> None:
    hs = _started(tls=True)
    events = hs.receive_data(_reply(tls_v1=True))
    assert _kinds(events) == [Identified, StartTLS]
    assert hs.state is HandshakeState.AWAIT_TLS_START
    assert hs.tls_started() == []
    assert hs.receive_data(_ok()) == [Ready(b"")]


def test_tls_bytes_before_the_upgrade_are_a_protocol_error() -> None:
    hs = _started(tls=True)
    hs.receive_data(_reply(tls_v1=True))
    with pytest.raises(ProtocolError, match="before the TLS upgrade"):
        hs.receive_data(b"\x16\x03\x01")
    assert hs.state is HandshakeState.FAILED


def test_tls_bytes_behind_the_identify_reply_are_a_protocol_error() -> None:
    hs = _started(tls=True)
    with pytest.raises(ProtocolError, match="before the TLS upgrade"):
        hs.receive_data(_reply(tls_v1=True) + b"\x16\x03")


def test_tls_asked_for_but_not_offered() -> None:
    hs = _started(tls=True)
    with pytest.raises(TLSError, match="does not offer TLS") as info:
        hs.receive_data(_reply(tls_v1=False))
    assert isinstance(info.value, ConnectError)
    assert info.value.setting == "tls" and "--" not in str(info.value)
    assert hs.state is HandshakeState.FAILED


def test_tls_upgrade_answered_with_something_else() -> None:
    hs = _started(tls=True)
    hs.receive_data(_reply(tls_v1=True))
    hs.tls_started()
    with pytest.raises(ConnectError, match="after the TLS upgrade"):
        hs.receive_data(encode_frame(FrameType.RESPONSE, b"NOPE"))


def test_eof_instead_of_the_ok_inside_tls_is_a_tls_failure() -> None:
    """nsqd closes cleanly after the TLS upgrade instead of sending its OK: the upgrade
    failed (nsqd did not accept our TLS), a TLSError naming the TLS setting, not a plain
    connect failure. Before the upgrade (waiting for the IDENTIFY reply) it stays plain."""
    hs = _started(tls=True)
    hs.receive_data(_reply(tls_v1=True))
    hs.tls_started()
    with pytest.raises(TLSError, match="during the TLS upgrade") as info:
        hs.receive_eof()
    assert info.value.setting == "tls" and hs.state is HandshakeState.FAILED
    with pytest.raises(ConnectError) as plain:
        _started(tls=True).receive_eof()
    assert not isinstance(plain.value, TLSError)


def test_tls_not_asked_for_is_not_started_even_if_offered() -> None:
    hs = _started()
    assert _kinds(hs.receive_data(_reply(tls_v1=True))) == [Identified, Ready]


def test_tls_started_out_of_order() -> None:
    with pytest.raises(UsageError):
        _started().tls_started()


# --------------------------------------------------------------------------- compression


def _server_codec(name: str, level: int = 6) -> Codec:
    return SnappyCodec() if name == "snappy" else DeflateCodec(level)


@pytest.mark.parametrize("name", ["snappy", "deflate"])
def test_compression_ok_is_read_through_the_codec(name: str) -> None:
    """The compressed OK and a compressed heartbeat come in the same read as the plain
    IDENTIFY reply: the bytes past the reply are decompressed, the heartbeat handed on."""
    server = _server_codec(name, 3)
    heartbeat = encode_frame(FrameType.RESPONSE, HEARTBEAT)
    hs = _started(compression=name)
    reply = _reply(**{name: True, "deflate_level": 3})
    events = hs.receive_data(reply + server.compress(_ok() + heartbeat))
    assert _kinds(events) == [Identified, SwitchCodec, Ready]
    switch = events[1]
    assert isinstance(switch, SwitchCodec) and switch.codec.name == name
    assert hs.codec is switch.codec
    if name == "deflate":
        assert isinstance(switch.codec, DeflateCodec) and switch.codec.level == 3
    assert events[2] == Ready(heartbeat)


@pytest.mark.parametrize("name", ["snappy", "deflate"])
def test_compression_ok_in_later_reads(name: str) -> None:
    server = _server_codec(name)
    hs = _started(compression=name)
    events = hs.receive_data(_reply(**{name: True}))
    assert _kinds(events) == [Identified, SwitchCodec]
    assert hs.state is HandshakeState.AWAIT_COMPRESSION_OK
    compressed = server.compress(_ok())
    assert hs.receive_data(compressed[:3]) == []
    assert hs.receive_data(compressed[3:]) == [Ready(b"")]


@pytest.mark.parametrize("name", ["snappy", "deflate"])
def test_compression_refused(name: str) -> None:
    hs = _started(compression=name)
    with pytest.raises(ConnectError, match=f"refused {name}") as info:
        hs.receive_data(_reply())
    assert info.value.setting == "compression" and "--" not in str(info.value)


def test_compression_upgrade_answered_with_something_else() -> None:
    hs = _started(compression="snappy")
    reply = _reply(snappy=True)
    with pytest.raises(ConnectError, match="after switching on snappy"):
        hs.receive_data(reply + SnappyCodec().compress(encode_frame(0, b"WHAT")))


def test_tls_then_compression() -> None:
    """TLS first (its OK plain inside TLS), then the compressed OK."""
    hs = _started(tls=True, compression="deflate")
    assert _kinds(hs.receive_data(_reply(tls_v1=True, deflate=True))) == [Identified, StartTLS]
    hs.tls_started()
    server = DeflateCodec()
    events = hs.receive_data(_ok() + server.compress(_ok()))
    assert _kinds(events) == [SwitchCodec, Ready]


# --------------------------------------------------------------------------- AUTH


def test_auth_sent_after_the_upgrades_and_its_reply_parsed() -> None:
    server = SnappyCodec()
    hs = _started(compression="snappy", auth_secret=Secret(SECRET))
    events = hs.receive_data(_reply(snappy=True, auth_required=True))
    assert _kinds(events) == [Identified, SwitchCodec]
    events = hs.receive_data(server.compress(_ok()))
    (send,) = events
    assert isinstance(send, SendData)
    assert send.data == p.auth(SECRET.encode())  # plain: the transport compresses it
    assert SECRET not in repr(send) and SECRET not in repr(events)
    assert hs.state is HandshakeState.AWAIT_AUTH
    auth_reply = {"identity": "who", "identity_url": "u", "permission_count": 2}
    events = hs.receive_data(server.compress(encode_frame(0, json.dumps(auth_reply).encode())))
    assert _kinds(events) == [Authenticated, Ready]
    assert isinstance(events[0], Authenticated) and events[0].response.identity == "who"
    assert hs.auth is not None and hs.auth.permission_count == 2
    assert not hs.secret_unused


def test_auth_required_without_a_secret() -> None:
    hs = _started()
    with pytest.raises(p.AuthFailedError, match="requires AUTH") as info:
        hs.receive_data(_reply(auth_required=True))
    assert isinstance(info.value, ConnectError)  # what it was before it had a class
    assert info.value.setting == "auth_secret" and "--" not in str(info.value)
    assert "`auth_secret`" in str(info.value)


def test_auth_not_required_keeps_the_secret() -> None:
    hs = _started(auth_secret=Secret(SECRET))
    events = hs.receive_data(_reply())
    assert not any(isinstance(e, SendData) for e in events)
    assert hs.secret_unused


def test_auth_failed_is_the_servers_error() -> None:
    hs = _started(auth_secret=Secret(SECRET))
    hs.receive_data(_reply(auth_required=True))
    with pytest.raises(p.AuthFailedError) as info:
        hs.receive_data(encode_frame(FrameType.ERROR, b"E_AUTH_FAILED AUTH failed"))
    assert info.value.context == "auth" and info.value.fatal
    assert SECRET not in str(info.value)
    assert hs.state is HandshakeState.FAILED


# --------------------------------------------------------------------------- broken answers


def test_identify_error_frame() -> None:
    hs = _started()
    with pytest.raises(p.IdentifyFailedError) as info:
        hs.receive_data(encode_frame(FrameType.ERROR, b"E_IDENTIFY_FAILED bad heartbeat"))
    assert info.value.context == "identify"


def test_garbage_identify_reply_is_a_protocol_error() -> None:
    hs = _started()
    with pytest.raises(p.ReplyDecodeError, match="max_rdy_count"):
        hs.receive_data(_reply(max_rdy_count="lots"))
    assert hs.state is HandshakeState.FAILED


def test_an_http_server_is_named_as_such() -> None:
    """nsqd's HTTP port answers the magic with an HTTP error: read as a frame header,
    ``HTTP`` is the size 1213486160."""
    assert int.from_bytes(b"HTTP", "big") == 1213486160
    hs = _started()
    assert hs.receive_data(b"HT") == []  # not enough to tell yet
    with pytest.raises(ConnectError, match="HTTP port") as info:
        hs.receive_data(b"TP/1.1 400 Bad Request\r\n\r\n")
    assert "TCP port" in str(info.value) and info.value.setting == "nsqd_tcp"


def test_impossible_frame_header() -> None:
    hs = _started()
    with pytest.raises(p.FrameDecodeError, match="invalid frame size 2"):
        hs.receive_data(struct.pack(">II", 2, 0))


def test_a_message_frame_during_the_handshake() -> None:
    hs = _started()
    with pytest.raises(p.FrameDecodeError, match="unexpected frame type 2 during identify"):
        hs.receive_data(encode_frame(FrameType.MESSAGE, b"x" * 30))


def test_truncated_frame_then_eof() -> None:
    hs = _started()
    assert hs.receive_data(_reply()[:-3]) == []
    with pytest.raises(ConnectError, match="closed the connection during the handshake") as info:
        hs.receive_eof()
    assert f"{len(_reply()) - 3} bytes into an unfinished frame" in str(info.value)
    assert hs.state is HandshakeState.FAILED


def test_handshake_timeout_is_a_connect_error_and_a_timeout() -> None:
    err = HandshakeTimeoutError("x", setting="connect_timeout")
    assert isinstance(err, ConnectError) and isinstance(err, NsqctlTimeoutError)
