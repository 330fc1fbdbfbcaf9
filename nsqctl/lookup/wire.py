"""nsqlookupd's answers as they come over the wire (both families), for msgspec to decode.

Every body a lookupd sends is decoded here, straight from bytes, into these records; the
model (:mod:`nsqctl.lookup.topology`) then builds its values from records that are known to
have the right shape. A body of the wrong shape (``{"producers": 5}``, a port of 99999, a
topic list that is a string, a ``null`` topic name) fails here, as one
:class:`LookupDecodeError` naming the server, the endpoint and the field (msgspec's
``$.producers[0].tcp_port``), instead of a ``TypeError`` deep in a caller or a garbage
value (a port ``connect()`` refuses, a topic called ``None``) reaching a view.

What is refused: ports outside 1-65535, hosts and names that are not strings, topic and
channel names the servers would not accept. Decoding is lax (``strict=False``) as for
nsqd's ``/stats``: youzan spells ``/listlookup``'s ports and some meta numbers as strings.
Fields a server may send as ``null`` or leave out are optional. Every key not named here
is skipped without being built.

The envelope, the decoders and the error's wording are :mod:`nsqctl.answers`'s, shared
with the decoding of nsqd's answers; here the error is a :class:`LookupDecodeError`.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from nsqctl import answers
from nsqctl.answers import NULL, W, WireEnvelope, is_json
from nsqctl.lookup.errors import LookupDecodeError
from nsqctl.protocol.names import MAX_NAME_LENGTH, NAME_PATTERN

__all__ = [
    "NULL",
    "Name",
    "Port",
    "W",
    "WireChannels",
    "WireEnvelope",
    "WireInfo",
    "WireListLookup",
    "WireLookup",
    "WireLookupdNode",
    "WireMeta",
    "WireNodes",
    "WirePeer",
    "WireTopics",
    "convert",
    "decode",
    "is_json",
]

Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
Name = Annotated[
    str,
    msgspec.Meta(min_length=1, max_length=MAX_NAME_LENGTH, pattern=rf"^(?:{NAME_PATTERN})\Z"),
]


class WirePeer(msgspec.Struct, gc=False):
    """One nsqd in ``/lookup`` (producers, partitions) or ``/nodes``."""

    broadcast_address: str | None = None
    hostname: str | None = None
    tcp_port: Port | None = None
    http_port: Port | None = None
    version: str | None = None
    id: str | None = None
    distributed_id: str | None = None
    remote_address: str | None = None


class WireMeta(msgspec.Struct, gc=False):
    """A redesign topic's meta (``/lookup?metainfo=true``)."""

    partition_num: int | None = None
    replica: int | None = None
    extend_support: bool | None = None
    ordered: bool | None = None
    multi_part: bool | None = None
    disable_channel_auto_create: bool | None = None


class WireLookup(WireEnvelope, gc=False):
    """``/lookup``. ``partitions`` is UNSET when the key is absent: its presence (even as
    ``null``) is how a redesign lookupd is told from an original one."""

    channels: list[Name] | None = None
    producers: list[WirePeer] | None = None
    partitions: dict[str, WirePeer | None] | msgspec.UnsetType | None = msgspec.UNSET
    meta: WireMeta | None = None


class WireTopics(WireEnvelope, gc=False):
    topics: list[Name] | None = None


class WireChannels(WireEnvelope, gc=False):
    channels: list[Name] | None = None


class WireNodes(WireEnvelope, gc=False):
    producers: list[WirePeer] | None = None


class WireInfo(WireEnvelope, gc=False):
    """``/info``: ``version`` on both families, ``ha_support`` on the redesign."""

    version: str | None = None
    ha_support: bool | None = None


class WireLookupdNode(msgspec.Struct, gc=False):
    """One lookupd of a redesign ``/listlookup`` (Go field names; ports as strings)."""

    ID: str | None = None
    NodeIP: str | None = None
    NodeIp: str | None = None  # Go's decoder matches keys case-insensitively: both are seen
    TcpPort: Port | None = None
    HttpPort: Port | None = None
    RpcPort: Port | None = None
    Epoch: int | None = None


class WireListLookup(WireEnvelope, gc=False):
    lookupdnodes: list[WireLookupdNode | None] | None = None
    lookupdleader: WireLookupdNode | None = None


def decode(content: bytes, kind: type[W], *, source: str, path: str) -> W | None:
    """Decode one answer body into ``kind`` (``None`` for an empty or ``null`` body),
    unwrapping the pre-v1 envelope; :class:`LookupDecodeError` if it does not fit."""
    return answers.decode(
        content, kind, role="nsqlookupd", source=source, path=path, error=LookupDecodeError
    )


def convert(payload: Any, kind: type[W], *, source: str, path: str) -> W | None:
    """:func:`decode` for a body already decoded into Python values (``json.loads``)."""
    return answers.convert(
        payload, kind, role="nsqlookupd", source=source, path=path, error=LookupDecodeError
    )
