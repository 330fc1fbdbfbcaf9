"""nsqctl: an NSQ client library, operator CLI and dashboard for both NSQ families (the
original nsqio/nsq and youzan's partitioned, replicated redesign).

The library's whole public API is here, at ``nsqctl.X``::

    import nsqctl

    async with nsqctl.Producer(lookupd_http="127.0.0.1:4161") as producer:
        await producer.publish("orders", b"hello")

    async with nsqctl.Consumer("orders", "audit", handle, lookupd_http="127.0.0.1:4161"):
        ...

Everything below the top level (``nsqctl.consumer``, ``nsqctl.connection``, ...) is the
implementation: importable, but not a promise. Names are loaded on first use, so that
``import nsqctl`` (and every CLI command, which imports it) stays cheap.

The public names are listed once, in the ``if TYPE_CHECKING:`` imports below: a type
checker reads them as imports (so it knows every name, and rejects a misspelt one), and
at run time :func:`__getattr__` reads the same lines to learn which module defines a name
it is asked for. ``typing`` is not imported for this (``TYPE_CHECKING`` is a local False,
which type checkers treat as the real one): it is the costliest part of ``import nsqctl``.
"""

from __future__ import annotations

__version__ = "0.1.0"

TYPE_CHECKING = False

if TYPE_CHECKING:  # the public API, the one list of it (see the module docstring)
    from nsqctl.admin.base import FamilyUnsupportedError as FamilyUnsupportedError
    from nsqctl.admin.partitions.state import NotRedesignError as NotRedesignError
    from nsqctl.connection import ConnectionConfig as ConnectionConfig
    from nsqctl.connection import TLSSettings as TLSSettings
    from nsqctl.consumer import Consumer as Consumer
    from nsqctl.consumer import ConsumerOptions as ConsumerOptions
    from nsqctl.consumer import ConsumerStats as ConsumerStats
    from nsqctl.consumer import OrderViolation as OrderViolation
    from nsqctl.deadletter import DeadLetterFile as DeadLetterFile
    from nsqctl.errors import AdminError as AdminError
    from nsqctl.errors import AlreadyRespondedError as AlreadyRespondedError
    from nsqctl.errors import AnswerDecodeError as AnswerDecodeError
    from nsqctl.errors import ArchiveWriteError as ArchiveWriteError
    from nsqctl.errors import ConfigError as ConfigError
    from nsqctl.errors import ConnectError as ConnectError
    from nsqctl.errors import ConnectionClosedError as ConnectionClosedError
    from nsqctl.errors import ConnectTimeoutError as ConnectTimeoutError
    from nsqctl.errors import FailoverTimeoutError as FailoverTimeoutError
    from nsqctl.errors import HandshakeTimeoutError as HandshakeTimeoutError
    from nsqctl.errors import LeaderUnavailableError as LeaderUnavailableError
    from nsqctl.errors import LookupUnavailableError as LookupUnavailableError
    from nsqctl.errors import MessageNotFoundError as MessageNotFoundError
    from nsqctl.errors import NoConnectionError as NoConnectionError
    from nsqctl.errors import NoConnectionTimeoutError as NoConnectionTimeoutError
    from nsqctl.errors import NoSuchPartitionError as NoSuchPartitionError
    from nsqctl.errors import NotFoundError as NotFoundError
    from nsqctl.errors import NsqctlError as NsqctlError
    from nsqctl.errors import NsqctlTimeoutError as NsqctlTimeoutError
    from nsqctl.errors import PartitionTimeoutError as PartitionTimeoutError
    from nsqctl.errors import PartitionUnavailableError as PartitionUnavailableError
    from nsqctl.errors import ProducerClosedError as ProducerClosedError
    from nsqctl.errors import ProtocolError as ProtocolError
    from nsqctl.errors import PublishConnectError as PublishConnectError
    from nsqctl.errors import PublishConnectTimeoutError as PublishConnectTimeoutError
    from nsqctl.errors import PublishError as PublishError
    from nsqctl.errors import PublishTimeoutError as PublishTimeoutError
    from nsqctl.errors import PublishTransportError as PublishTransportError
    from nsqctl.errors import ReplyTimeoutError as ReplyTimeoutError
    from nsqctl.errors import ServerError as ServerError
    from nsqctl.errors import ServerSetupError as ServerSetupError
    from nsqctl.errors import TLSCertificateError as TLSCertificateError
    from nsqctl.errors import TLSError as TLSError
    from nsqctl.errors import TopicNotFoundError as TopicNotFoundError
    from nsqctl.errors import TransportError as TransportError
    from nsqctl.errors import UsageError as UsageError
    from nsqctl.failover import DEFAULT_FAILOVER_WINDOW as DEFAULT_FAILOVER_WINDOW
    from nsqctl.failover import FailoverEvent as FailoverEvent
    from nsqctl.lookup import LookupClient as LookupClient
    from nsqctl.lookup import Topology as Topology
    from nsqctl.lookup.client import ListLookupRefusedError as ListLookupRefusedError
    from nsqctl.lookup.client import LookupAnsweredError as LookupAnsweredError
    from nsqctl.lookup.client import NotNsqlookupdError as NotNsqlookupdError
    from nsqctl.lookup.errors import LookupDecodeError as LookupDecodeError
    from nsqctl.lookup.errors import LookupProtocolError as LookupProtocolError
    from nsqctl.lookup.fetch import RequestError as RequestError
    from nsqctl.message import Message as Message
    from nsqctl.message import finish_all as finish_all
    from nsqctl.pipeline.engine import MissingExtraError as MissingExtraError
    from nsqctl.pipeline.spark import ExecutorError as ExecutorError
    from nsqctl.producer import Producer as Producer
    from nsqctl.producer import ProducerOptions as ProducerOptions
    from nsqctl.producer import Receipt as Receipt
    from nsqctl.protocol.errors import AuthFailedError as AuthFailedError
    from nsqctl.protocol.errors import AuthRequiredError as AuthRequiredError
    from nsqctl.protocol.errors import BadBodyError as BadBodyError
    from nsqctl.protocol.errors import BadChannelError as BadChannelError
    from nsqctl.protocol.errors import BadExtError as BadExtError
    from nsqctl.protocol.errors import BadMessageError as BadMessageError
    from nsqctl.protocol.errors import BadPartitionError as BadPartitionError
    from nsqctl.protocol.errors import BadTopicError as BadTopicError
    from nsqctl.protocol.errors import CompressionError as CompressionError
    from nsqctl.protocol.errors import CreateTopicFailedError as CreateTopicFailedError
    from nsqctl.protocol.errors import DPubFailedError as DPubFailedError
    from nsqctl.protocol.errors import EmptyPartitionError as EmptyPartitionError
    from nsqctl.protocol.errors import ExtNotSupportError as ExtNotSupportError
    from nsqctl.protocol.errors import FinFailedError as FinFailedError
    from nsqctl.protocol.errors import FrameDecodeError as FrameDecodeError
    from nsqctl.protocol.errors import IdentifyFailedError as IdentifyFailedError
    from nsqctl.protocol.errors import InvalidCommandError as InvalidCommandError
    from nsqctl.protocol.errors import InvalidError as InvalidError
    from nsqctl.protocol.errors import InvalidJsonHeaderError as InvalidJsonHeaderError
    from nsqctl.protocol.errors import InvalidTraceIdError as InvalidTraceIdError
    from nsqctl.protocol.errors import MessageDecodeError as MessageDecodeError
    from nsqctl.protocol.errors import MPubFailedError as MPubFailedError
    from nsqctl.protocol.errors import NotLeaderError as NotLeaderError
    from nsqctl.protocol.errors import NotWritableError as NotWritableError
    from nsqctl.protocol.errors import PubFailedError as PubFailedError
    from nsqctl.protocol.errors import PubTooMuchWaitingError as PubTooMuchWaitingError
    from nsqctl.protocol.errors import ReplyDecodeError as ReplyDecodeError
    from nsqctl.protocol.errors import ReqFailedError as ReqFailedError
    from nsqctl.protocol.errors import SubChannelNotRegisteredError as SubChannelNotRegisteredError
    from nsqctl.protocol.errors import SubExtendForbiddenError as SubExtendForbiddenError
    from nsqctl.protocol.errors import SubExtendNeedError as SubExtendNeedError
    from nsqctl.protocol.errors import SubOrderIsMustError as SubOrderIsMustError
    from nsqctl.protocol.errors import TLSNotOfferedError as TLSNotOfferedError
    from nsqctl.protocol.errors import TLSRequiredError as TLSRequiredError
    from nsqctl.protocol.errors import TouchFailedError as TouchFailedError
    from nsqctl.protocol.errors import UnauthorizedError as UnauthorizedError
    from nsqctl.protocol.names import InvalidNameError as InvalidNameError
    from nsqctl.secrets import Secret as Secret
    from nsqctl.stats.parse import StatsDecodeError as StatsDecodeError
    from nsqctl.stats.parse import StatsProtocolError as StatsProtocolError
    from nsqctl.tracelog import TraceLog as TraceLog
    from nsqctl.tracelog import TraceLogWriteError as TraceLogWriteError

    __all__: list[str]
else:

    def _exports() -> dict[str, str]:
        """Public name -> the module that defines it, read from the ``if TYPE_CHECKING:``
        imports of this file's source, once, on the first name asked for.

        Read line by line, not with :mod:`ast`: ``from nsqctl import protocol`` asks this
        module for ``protocol`` before importing it, so the first CLI command pays for
        this, and parsing the file would cost 20 times as much. The imports are written
        one ``from M import X as X`` per name (ruff format wraps a long one in
        parentheses); tests/unit/test_public_api.py checks that this reading agrees with
        Python's."""
        table = _exports_cache
        if table:
            return table
        with open(__file__, encoding="utf-8") as f:
            text = f.read()
        block = text.partition("\nif TYPE_CHECKING:")[2].partition("\nelse:")[0]
        module = ""
        for raw in block.splitlines():
            line = raw.strip()
            if line.startswith("from ") and " import " in line:
                module, _, names = line[5:].partition(" import ")
                if names == "(":
                    continue  # the names follow, one a line
            elif module and line != ")":
                names = line
            else:
                module = ""
                continue
            for item in names.rstrip(",").split(","):
                name = item.split(" as ")[-1].strip()
                if name:
                    table[name] = module
            if not raw.rstrip().endswith(","):
                module = ""
        return table

    _exports_cache: dict[str, str] = {}

    def __getattr__(name: str) -> object:
        if name == "__all__":
            value: object = ["__version__", *sorted(_exports())]
        else:
            module = _exports().get(name)
            if module is None:
                raise AttributeError(f"module 'nsqctl' has no attribute {name!r}")
            import importlib

            value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(_exports()))

    del TYPE_CHECKING  # only for the block above: not a name of the package
