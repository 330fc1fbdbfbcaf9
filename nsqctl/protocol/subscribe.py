"""What a refused subscription means, sans-IO: a pure classification of the error a
SUB, SUB_ORDERED or SUB_ADVANCED was answered with (or raised before it was sent).

A consumer must tell apart a refusal no reconnect can cure (a bad name, an ext or TLS
mismatch, an ordered-only topic, a setting the nsqd's family lacks), the one refusal it
answers by subscribing differently (an empty redesign partition asked for a start
position: read it from its end), and everything else, which a later attempt may get
past (a partition moving to another leader, a topic not created yet, an auth server not
granting yet, a connection lost mid-subscribe). The codes are those both nsqd families
answer a subscription with (docs/nsq-protocol.md; youzan's
``nsqdserver/protocol_v2.go`` ``internalSubAndTrace``); the typed error
(:func:`~nsqctl.protocol.errors.error_from_frame`) already carries the code and, for
``E_INVALID``, the text a kind is told by, so the classification is a table on its class.
"""

from __future__ import annotations

import enum

from nsqctl.errors import ConfigError, NsqctlError, TopicNotFoundError
from nsqctl.protocol.errors import (
    AuthFailedError,
    BadChannelError,
    BadPartitionError,
    BadTopicError,
    EmptyPartitionError,
    NotLeaderError,
    NotWritableError,
    SubChannelNotRegisteredError,
    SubExtendForbiddenError,
    SubExtendNeedError,
    SubOrderIsMustError,
    TLSRequiredError,
    UnauthorizedError,
)

__all__ = ["SubscribeRefusal", "classify_subscribe_error"]


class SubscribeRefusal(enum.Enum):
    """Why a subscription failed, and so what the consumer does about it."""

    #: The partition's leader moved or is being elected (E_FAILED_ON_NOT_LEADER,
    #: E_FAILED_ON_NOT_WRITABLE): the lookup will name the new leader; retry.
    NOT_LEADER = "not_leader"
    #: The nsqd has no such topic (E_TOPIC_NOT_EXIST): created later or moved; retry.
    TOPIC_NOT_FOUND = "topic_not_found"
    #: The partition number is not one of the topic's on this nsqd (E_BAD_PARTITION):
    #: a stale topology; retry after the lookup is asked again.
    PARTITION_MISSING = "partition_missing"
    #: A redesign partition with an empty log cannot start at the position asked for
    #: (E_INVALID "commit log end of file"): subscribe it from its end instead.
    PARTITION_EMPTY = "partition_empty"
    #: The topic accepts only ordered subscriptions (E_SUB_ORDER_IS_MUST): fatal.
    ORDER_REQUIRED = "order_required"
    #: The topic or channel name is rejected (E_BAD_TOPIC, E_BAD_CHANNEL): fatal.
    BAD_NAME = "bad_name"
    #: The connection's ext support does not match the topic (E_SUB_EXTEND_NEED,
    #: E_SUB_EXTEND_FORBIDDON): fatal.
    EXT_MISMATCH = "ext_mismatch"
    #: nsqd requires TLS (E_INVALID "TLS required"): fatal.
    TLS_REQUIRED = "tls_required"
    #: The subscription asks for what the nsqd cannot do (a partition, ordering or a
    #: start on the original family), found before anything was sent: fatal.
    CONFIG = "config"
    #: The auth server refused (E_AUTH_FIRST, E_AUTH_FAILED, E_UNAUTHORIZED, ...): its
    #: grants can change while the consumer runs; retry.
    AUTH = "auth"
    #: Channel auto-creation is off and the channel is not registered
    #: (E_SUB_CHANNEL_NOT_REGISTERED): it may be created; retry.
    CHANNEL_NOT_REGISTERED = "channel_not_registered"
    #: Anything else (another E_INVALID, an unknown code, the connection lost while
    #: subscribing): retry with backoff.
    RETRY = "retry"

    @property
    def fatal(self) -> bool:
        """No reconnect cures it: the consumer stops with the error."""
        return self in _FATAL


_FATAL = frozenset(
    {
        SubscribeRefusal.ORDER_REQUIRED,
        SubscribeRefusal.BAD_NAME,
        SubscribeRefusal.EXT_MISMATCH,
        SubscribeRefusal.TLS_REQUIRED,
        SubscribeRefusal.CONFIG,
    }
)

# Most specific first: the E_INVALID kinds are subclasses of InvalidError, and the first
# matching class wins.
_TABLE: tuple[tuple[type[NsqctlError], SubscribeRefusal], ...] = (
    (NotLeaderError, SubscribeRefusal.NOT_LEADER),
    (NotWritableError, SubscribeRefusal.NOT_LEADER),
    (TopicNotFoundError, SubscribeRefusal.TOPIC_NOT_FOUND),
    (BadPartitionError, SubscribeRefusal.PARTITION_MISSING),
    (EmptyPartitionError, SubscribeRefusal.PARTITION_EMPTY),
    (SubOrderIsMustError, SubscribeRefusal.ORDER_REQUIRED),
    (BadTopicError, SubscribeRefusal.BAD_NAME),
    (BadChannelError, SubscribeRefusal.BAD_NAME),
    (SubExtendNeedError, SubscribeRefusal.EXT_MISMATCH),
    (SubExtendForbiddenError, SubscribeRefusal.EXT_MISMATCH),
    (TLSRequiredError, SubscribeRefusal.TLS_REQUIRED),
    (AuthFailedError, SubscribeRefusal.AUTH),
    (UnauthorizedError, SubscribeRefusal.AUTH),
    (SubChannelNotRegisteredError, SubscribeRefusal.CHANNEL_NOT_REGISTERED),
    (ConfigError, SubscribeRefusal.CONFIG),
)


def classify_subscribe_error(error: NsqctlError) -> SubscribeRefusal:
    """The kind of a subscription's failure (see :class:`SubscribeRefusal`)."""
    for cls, refusal in _TABLE:
        if isinstance(error, cls):
            return refusal
    return SubscribeRefusal.RETRY
