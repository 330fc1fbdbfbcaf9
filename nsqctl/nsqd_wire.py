"""The redesign's HTTP answers beyond the lookup endpoints and ``/stats``, as they come
over the wire, for msgspec to decode (:mod:`nsqctl.answers`): nsqd's
``/coordinator/stats`` (each partition's ISR and catch-up), the lookupd leader's
``/cluster/stats`` (stability and load factors), nsqd's ``/info`` (its TCP address, to map
ISR node ids to nodes) and ``/message/get`` (one stored message, read in place).

Only the fields nsqctl reads are declared; a field of the wrong type fails the
decode as an :class:`~nsqctl.errors.AnswerDecodeError` naming it, where reading dicts
field by field met a ``TypeError`` (``float({})``) or a garbage value.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from nsqctl.answers import WireEnvelope
from nsqctl.lookup.wire import Port

U64_MAX = 2**64 - 1
"""youzan's message ids and trace ids are unsigned 64 bits (a wire id packs both); msgspec
takes no bound above int64's, so the reader checks this one."""
U64 = Annotated[int, msgspec.Meta(ge=0)]


class WireNodeRef(msgspec.Struct, gc=False):
    """One copy in a partition's ISR or catch-up list (youzan's node id)."""

    node_id: str | None = None
    hostname: str | None = None


class WireCoord(msgspec.Struct, gc=False):
    """One partition of ``topic_coord_stats``."""

    name: str | None = None
    partition: int | None = None
    node: str | None = None
    isr_stats: list[WireNodeRef | None] | None = None  # null for an empty list
    catchup_stats: list[WireNodeRef | None] | None = None


class WireCoordinatorStats(WireEnvelope, gc=False):
    """nsqd's ``/coordinator/stats?topic=T``."""

    topic_coord_stats: list[WireCoord | None] | None = None


class WireNodeLoad(msgspec.Struct, gc=False):
    """One nsqd of ``node_stat_list``."""

    hostname: str | None = None
    broadcast_address: str | None = None
    http_port: Port | None = None
    leader_load_factor: float | None = None
    node_load_factor: float | None = None


class WireClusterStats(WireEnvelope, gc=False):
    """The lookupd leader's ``/cluster/stats``."""

    stable: bool | None = None
    node_stat_list: list[WireNodeLoad | None] | None = None


class WireNsqdInfo(WireEnvelope, gc=False):
    """nsqd's ``/info``: the address other nodes know it by."""

    broadcast_address: str | None = None
    tcp_port: Port | None = None


class WireStoredMessage(WireEnvelope, gc=False):
    """One message as ``/message/get`` shows it (``ext`` and ``body`` as text)."""

    id: U64 | None = None
    trace_id: U64 | None = None
    timestamp: int | None = None
    attempts: Annotated[int, msgspec.Meta(ge=0, le=65535)] | None = None
    offset: Annotated[int, msgspec.Meta(ge=0)] | None = None
    queue_cnt_index: Annotated[int, msgspec.Meta(ge=0)] | None = None
    ext: str | None = None
    body: str | None = None
