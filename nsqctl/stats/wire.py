"""nsqd's ``/stats`` JSON as it comes over the wire (both families), for msgspec to decode.

A big cluster's ``/stats`` is tens of megabytes, most of it client connections. Decoding
it into dicts and then reading them field by field was most of a dashboard refresh;
msgspec decodes straight into these records and skips every key not named here without building
it. Of each client connection only RDY and in flight are decoded (the channel rules need
them every poll); the whole connection is read only when one is shown, by decoding the
body again into the ``Raw*`` records, which keep each channel's client list as undecoded
bytes (:class:`msgspec.Raw`) and skip everything else. Only the fields the model reads
are declared; a connection decodes straight into the model's :class:`ClientStats`.

Decoding is lax (``strict=False``): both families spell some numbers as strings (the
redesign's ``topic_partition`` always). Fields a server may send as ``null`` are
optional. Anything else that does not fit fails the decode with msgspec's message, which
names the field (a ``ValueError``, as bad JSON is).
"""

from __future__ import annotations

import msgspec

from nsqctl.answers import NULL, WireEnvelope
from nsqctl.stats.model import ClientStats


class WireClientLoad(msgspec.Struct, gc=False):
    """Of each client connection, what the channel rules need on every poll (RDY and
    in flight); the rest of the record is read only when the connection is shown."""

    ready_count: int = 0
    in_flight_count: int = 0


class WireChannel(msgspec.Struct, gc=False):
    channel_name: str = ""
    depth: int = 0
    backend_depth: int = 0
    in_flight_count: int = 0
    deferred_count: int = 0
    message_count: int = 0
    requeue_count: int = 0
    timeout_count: int = 0
    clients: list[WireClientLoad] | None = None
    client_count: int | None = None  # the original family's count
    client_num: int | None = None  # the redesign's
    paused: bool = False
    skipped: bool = False
    depth_size: int | None = None


class WireTopic(msgspec.Struct, gc=False):
    topic_name: str = ""
    topic_partition: int | None = None  # redesign only, sent as a string of digits
    channels: list[WireChannel] | None = None
    depth: int = 0
    backend_depth: int = 0
    message_count: int = 0
    paused: bool = False
    is_leader: bool = True
    is_multi_ordered: bool = False
    is_ext: bool = False
    backend_start: int = 0
    message_bytes: int | None = None


class WireNsqdStats(WireEnvelope, gc=False):
    """The body, with the fields of the pre-v1 envelope and v1's error
    (:class:`~nsqctl.answers.WireEnvelope`)."""

    version: str = ""
    health: str = ""
    start_time: int = 0
    topics: list[WireTopic] | None = None


class RawChannel(msgspec.Struct, gc=False):
    clients: msgspec.Raw = NULL


class RawTopic(msgspec.Struct, gc=False):
    channels: list[RawChannel] | None = None


class RawNsqdStats(WireEnvelope, gc=False):
    """The body again, for the client lists; the envelope unwrapped as for
    :class:`WireNsqdStats`."""

    topics: list[RawTopic] | None = None


NSQD_STATS = msgspec.json.Decoder(WireNsqdStats, strict=False)
CHANNEL = msgspec.json.Decoder(WireChannel, strict=False)
CLIENT = msgspec.json.Decoder(ClientStats, strict=False)
CLIENTS = msgspec.json.Decoder(list[ClientStats] | None, strict=False)
RAW_NSQD_STATS = msgspec.json.Decoder(RawNsqdStats, strict=False)  # as NSQD_STATS
RAW_CHANNEL = msgspec.json.Decoder(RawChannel)
