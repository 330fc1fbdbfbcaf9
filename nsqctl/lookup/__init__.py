"""Discovery through nsqlookupd for both server families (original and youzan redesign).

``model`` is pure (parsing and merging); ``client`` does the HTTP.
"""

from nsqctl.lookup.client import ACCEPT_V1, LookupClient, LookupUnavailableError
from nsqctl.lookup.model import (
    LookupAnswer,
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

__all__ = [
    "ACCEPT_V1",
    "LookupAnswer",
    "LookupClient",
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
