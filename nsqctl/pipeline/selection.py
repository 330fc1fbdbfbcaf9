"""What a replay or a trace asks for, as plain data: the input of
:mod:`nsqctl.pipeline.filters`, which compiles it for either engine. In a module of its own
so that the filters and the jobs that use them (:mod:`~nsqctl.pipeline.replay`,
:mod:`~nsqctl.pipeline.trace`) share it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ReplayFilters:
    """The archive rows a replay takes (every field narrows; times in nanoseconds)."""

    since_ns: int | None = None
    until_ns: int | None = None
    topics: list[str] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)
    trace_id: int | None = None
    grep: str | None = None
    where: str | None = None


@dataclass(frozen=True)
class TraceQuery:
    """What to look for; ids are kept unsigned (as on the wire and in trace logs)."""

    label: str
    trace_id: int | None = None
    internal_id: int | None = None
    message_id: str | None = None  # original family: 16 hex characters
    topic: str | None = None
