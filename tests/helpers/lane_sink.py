"""A sink for :class:`nsqctl.consumer.lanes.OrderedLanes` in tests: what the threads were
handed, instead of tail's output."""

from __future__ import annotations

from nsqctl.protocol.raw_message import RawMessage


class Sink:
    """Takes every message (on the lane's thread) and keeps its body."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def write_lane(self, raws: list[RawMessage]) -> bool:
        self.bodies += [raw.body for raw in raws]
        return True
