"""Shell completion that knows the cluster: topics, channels, partitions and nodes from the
nsqlookupd the command would talk to (profiles complete in :mod:`nsqctl.cli.flags`, beside
the option, since this module resolves the cluster through it).

A completion runs while the user waits at a prompt, so every answer has one short
deadline for all of its requests, and anything that goes wrong (no cluster configured,
lookupd down or silent, a body that is not what we expect) completes nothing rather
than printing an error into the shell. The cluster is resolved exactly as the command
would resolve it: flags already typed on the line, then the environment, then the
profile.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import typer

from nsqctl.errors import NsqctlError

if TYPE_CHECKING:
    from nsqctl.answers import WireEnvelope

W = TypeVar("W", bound="WireEnvelope")

#: seconds one completion may spend on the network, all requests together
DEADLINE = 0.5
#: Environment variable that replaces :data:`DEADLINE`'s half second: a lookupd
#: over a slow link, or a machine too busy to answer a TAB in half a second, would
#: otherwise complete nothing.
DEADLINE_ENV = "NSQCTL_COMPLETION_DEADLINE"


def completion_deadline() -> float:
    """:data:`DEADLINE`, or the environment's replacement. A value that is not a positive
    number of seconds is ignored: completion never prints an error into the shell."""
    raw = os.environ.get(DEADLINE_ENV, "").strip()
    try:
        value = float(raw) if raw else DEADLINE
    except ValueError:
        return DEADLINE
    return value if 0 < value < float("inf") else DEADLINE


class TypedLine(Protocol):
    """What completion reads of a click context: the values parsed so far, and the
    group's context above it."""

    @property
    def params(self) -> dict[str, Any]: ...

    @property
    def parent(self) -> TypedLine | None: ...


def _typed(ctx: TypedLine) -> dict[str, Any]:
    """The values typed so far on the line, the command's own winning over its groups'."""
    values: dict[str, Any] = {}
    node: TypedLine | None = ctx
    while node is not None:
        for key, value in node.params.items():
            values.setdefault(key, value)
        node = node.parent
    return values


def _words() -> list[str]:
    """The words on the line as the shell sent them (bash: COMP_WORDS; zsh and fish:
    _TYPER_COMPLETE_ARGS), split as a shell would."""
    import shlex

    line = os.environ.get("COMP_WORDS") or os.environ.get("_TYPER_COMPLETE_ARGS") or ""
    try:
        return shlex.split(line)
    except ValueError:  # an unclosed quote while typing
        return line.split()


def _topic(ctx: TypedLine) -> str | None:
    """The topic on the line. click leaves it unparsed while an option's value is being
    completed (``tail orders -c <TAB>``), so then it is read from the words: the first
    one after the command's name that is neither an option nor an option's value."""
    topic = _typed(ctx).get("topic")
    if topic:
        return str(topic)
    name = getattr(ctx, "info_name", None)
    params = getattr(getattr(ctx, "command", None), "params", [])
    takes_value = {
        opt
        for param in params
        if getattr(param, "param_type_name", "") == "option" and not getattr(param, "is_flag", True)
        for opt in getattr(param, "opts", [])
    }
    words = _words()
    if name not in words:
        return None
    i = words.index(name) + 1
    while i < len(words):
        word = words[i]
        if word in takes_value:
            i += 2
        elif word.startswith("-"):
            i += 1
        else:
            return word
    return None


def _lookupds(ctx: typer.Context) -> list[str]:
    from nsqctl.cli.flags import resolve_cluster

    typed = _typed(ctx)
    try:
        selection = resolve_cluster(
            typed.get("lookupd"),
            typed.get("nsqd"),
            typed.get("profile"),
            typed.get("nsqd_http"),
            require=None,
        )
    except NsqctlError:
        return []
    return list(selection.lookupd)


def _get(
    ctx: typer.Context, path: str, kind: type[W], params: dict[str, str] | None = None
) -> list[tuple[str, W]]:
    """``(lookupd, answer)`` of ``GET path`` from each lookupd, decoded as ``kind`` (the
    lookup client's records), within the deadline; a lookupd that fails, answers an error
    or a body of the wrong shape adds nothing."""
    import httpx

    from nsqctl.httpclient import sync_http_client
    from nsqctl.lookup.client import ACCEPT_V1
    from nsqctl.lookup.wire import decode

    answers: list[tuple[str, W]] = []
    deadline = time.monotonic() + completion_deadline()
    with sync_http_client(headers={"Accept": ACCEPT_V1}) as client:
        for address in _lookupds(ctx):
            left = deadline - time.monotonic()
            if left <= 0.05:
                break
            url = address if "://" in address else f"http://{address}"
            try:
                resp = client.get(f"{url}{path}", params=params, timeout=left)
                found = decode(resp.content, kind, source=address, path=path)
            except (httpx.HTTPError, NsqctlError):
                continue
            ok = found is not None and found.status_code in (None, 200) and found.message is None
            if resp.status_code == 200 and found is not None and ok:
                answers.append((address, found))
    return answers


def _strings(values: Iterable[Any], incomplete: str) -> list[str]:
    found = {str(v) for v in values if isinstance(v, str | int) and not isinstance(v, bool)}
    return sorted(v for v in found if v.startswith(incomplete))


def topics(ctx: typer.Context, incomplete: str) -> list[str]:
    """Topics every lookupd knows (``/topics``)."""
    from nsqctl.lookup.wire import WireTopics

    return _strings(
        (n for _, b in _get(ctx, "/topics", WireTopics) for n in b.topics or ()), incomplete
    )


def channels(ctx: typer.Context, incomplete: str) -> list[str]:
    """Channels of the topic already on the line (``/channels?topic=``)."""
    from nsqctl.lookup.wire import WireChannels

    topic = _topic(ctx)
    if not topic:
        return []
    found = _get(ctx, "/channels", WireChannels, {"topic": str(topic)})
    return _strings((n for _, b in found for n in b.channels or ()), incomplete)


def partitions(ctx: typer.Context, incomplete: str) -> list[str]:
    """Partition numbers of the topic on the line, from its lookup (redesign)."""
    from nsqctl.admin.planners import MAX_PARTITIONS
    from nsqctl.lookup.topology import answer_from_wire
    from nsqctl.lookup.wire import WireLookup

    topic = _topic(ctx)
    if not topic:
        return []
    found: list[int] = []
    params = {"topic": str(topic), "metainfo": "true"}
    for address, body in _get(ctx, "/lookup", WireLookup, params):
        try:
            answer = answer_from_wire(body, source=address)
        except NsqctlError:
            continue
        found.extend(answer.partitions)
        if answer.meta is not None and answer.meta.valid:  # a huge count is no lookupd's
            found.extend(range(min(answer.meta.partition_num, MAX_PARTITIONS)))
    return _strings(found, incomplete)


def nodes(ctx: typer.Context, incomplete: str) -> list[str]:
    """nsqd nodes (their HTTP addresses, as ``lookup`` and ``dash`` show them)."""
    from nsqctl.lookup.topology import nodes_from_wire
    from nsqctl.lookup.wire import WireNodes

    addresses: list[str] = []
    for address, body in _get(ctx, "/nodes", WireNodes):
        try:
            peers = nodes_from_wire(body, source=address)
        except NsqctlError:
            continue
        addresses.extend(p.http_key for p in peers if p.http_port > 0)
    return _strings(addresses, incomplete)
