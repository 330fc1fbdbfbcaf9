"""What ``nsqctl stat`` says of an nsqd that is not plainly up: each state with its why."""

from __future__ import annotations

from nsqctl.cli.commands.stat import node_note
from nsqctl.stats.model import NodeStats


def test_each_state_says_why() -> None:
    slow = NodeStats("127.0.0.1:4151", 0.0, "slow", health="OK", elapsed=2.34)
    assert node_note(slow) == "nsqd 127.0.0.1:4151 slow: answered /stats in 2.3s"
    down = NodeStats("127.0.0.1:4151", 0.0, "down", error="not answering within 2s")
    assert node_note(down) == "nsqd 127.0.0.1:4151 down: not answering within 2s"
    sick = NodeStats("127.0.0.1:4151", 0.0, "unhealthy", health="NOK - disk full")
    assert node_note(sick) == "nsqd 127.0.0.1:4151 unhealthy: NOK - disk full"
