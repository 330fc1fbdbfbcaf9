"""One move a redesign drain sends (:class:`LeaderMove`), apart from the planners so that
both the leader planner (:mod:`.redesign`) and the stop check (:mod:`.safety`)
can make them without importing each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LeaderMove:
    """Leadership of ``topic``/``partition`` to go from ``source`` (the drained node) to
    ``target``; with ``copy``, the in-sync copy on ``source`` goes to ``target`` instead
    (youzan has ``target`` catch up, then drops ``source`` from the ISR)."""

    topic: str
    partition: int
    source: str
    target: str
    copy: bool = False

    def describe(self) -> str:
        what = "copy" if self.copy else "leader"
        return f"move {self.topic} partition {self.partition} {what} {self.source} -> {self.target}"
