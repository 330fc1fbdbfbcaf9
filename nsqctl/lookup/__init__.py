"""Discovery through nsqlookupd for both server families (original and youzan redesign).

``topology`` is pure (parsing and merging); ``client`` does the HTTP (over ``fetch``). The
client is imported on first use, so publishing straight to ``--nsqd`` starts faster.
"""

from typing import TYPE_CHECKING, Any

from nsqctl.lookup.topology import (
    LookupAnswer,
    LookupDecodeError,
    LookupdList,
    LookupdNode,
    LookupProtocolError,
    PartitionInfo,
    Peer,
    SourceStatus,
    TopicMeta,
    Topology,
    merge_answers,
    parse_listlookup,
    parse_lookup_response,
)

if TYPE_CHECKING:  # what __getattr__ gives, for type checkers (else Any to them)
    from nsqctl.lookup.client import ACCEPT_V1, LookupClient, LookupUnavailableError

_CLIENT_NAMES = ("ACCEPT_V1", "LookupClient", "LookupUnavailableError")


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from nsqctl.lookup import client

        return getattr(client, name)
    raise AttributeError(f"module 'nsqctl.lookup' has no attribute {name!r}")


__all__ = [
    "ACCEPT_V1",
    "LookupAnswer",
    "LookupClient",
    "LookupDecodeError",
    "LookupProtocolError",
    "LookupUnavailableError",
    "LookupdList",
    "LookupdNode",
    "PartitionInfo",
    "Peer",
    "SourceStatus",
    "TopicMeta",
    "Topology",
    "merge_answers",
    "parse_listlookup",
    "parse_lookup_response",
]
