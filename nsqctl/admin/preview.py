"""A topic or channel plan in words, for the confirmation prompt and ``--dry-run``: what
will happen, on which partitions of which nsqds (host:port), not the HTTP requests."""

from __future__ import annotations

from collections.abc import Sequence

from nsqctl.admin.requests import AdminRequest, Node

_OFFSETS = {
    "timestamp": "the first message published at/after Unix time {}",
    "virtual_queue": "byte offset {} of the partition queue",
    "msgcount": "message {} of the partition queue",
    "special": "the end of the queue",
}


def _what(req: AdminRequest) -> str:
    """What one request does, in words."""
    params = dict(req.params)
    topic, channel = params.get("topic", "?"), params.get("channel")
    subject = f"channel {topic}/{channel}" if channel else f"topic {topic}"
    kind, _, action = req.path.strip("/").partition("/")
    if req.node.role == "lookupd":
        if kind == "topic" and action == "delete":
            if params.get("partition") == "**":
                return f"delete {subject} on every partition, with all its channels and messages"
            return f"unregister {subject}"
        if kind == "channel":
            return f"{'register' if action == 'create' else 'unregister'} {subject}"
        return f"{action} {subject}"
    if action == "setoffset":
        kind_, _, value = (req.body or b"").decode(errors="replace").partition(":")
        where = _OFFSETS.get(kind_, "{}").format(value)
        return f"move {subject}'s position to {where}"
    words = {
        "delete": f"delete {subject} with its queued messages",
        "empty": f"drop every queued message of {subject}",
        "skip": f"skip {subject} to the end of its queue and keep skipping new messages",
        "unskip": f"stop skipping {subject}",
        "pause": f"pause {subject} (nothing is delivered)",
        "unpause": f"unpause {subject}",
        "create": f"create {subject}",
    }
    return words.get(action, f"{action} {subject}")


def _where(nodes: Sequence[Node]) -> str:
    role = nodes[0].role
    named = [
        n.address if n.partition is None else f"{n.address} (partition {n.partition})"
        for n in nodes
    ]
    return f"on {role} {', '.join(named)}" if len(named) == 1 else f"on {role}s {', '.join(named)}"


def describe_plan(stages: Sequence[Sequence[AdminRequest]]) -> list[str]:
    """One line per stage and kind of request, in the order they are sent."""
    lines: list[str] = []
    for stage in stages:
        groups: dict[str, list[Node]] = {}
        for req in stage:
            groups.setdefault(_what(req), []).append(req.node)
        lines.extend(f"{what} {_where(nodes)}" for what, nodes in groups.items())
    if len(lines) > 1:
        lines = [f"{i}. {line}" for i, line in enumerate(lines, 1)]
    return lines or ["nothing to do"]
