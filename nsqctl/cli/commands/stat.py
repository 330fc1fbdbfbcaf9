"""``nsqctl stat [TOPIC [CHANNEL]]``: an nsq_stat-like rolling table, or NDJSON with --json.

Rows come from the same model as the dashboard (:mod:`nsqctl.stats`): without TOPIC one
row per topic, each followed by its channels' rows; with TOPIC that topic and its
channels; with CHANNEL that channel. A paused or skipped topic, channel or partition says so
in the last column (``PAUSED``, ``SKIPPED``; JSON: ``paused``, ``skipped``). On the
redesign each is followed by one row per partition (JSON: leader, replicas, and with TOPIC
the ISR and catch-up; ``null`` when not asked). A partition with no live copy keeps its
rows, under its topic and under each channel, with ``?`` counts (JSON: ``null``, ``live``
false), and is said to have no leader. ``depth`` is always a message count; byte
figures (``depth_bytes``, ``stored_bytes``) are named as such. A redesign topic nsqlookupd
has no meta for while an nsqd holds a copy (data a deleted topic left behind) is marked
``DELETED`` (JSON: ``deleted``) and said to be that, with what removes it, instead of
having no leader.

A topic whose every nsqd is down (original family) keeps its row and its known channels'
rows, every counter ``?`` (JSON: ``null``), marked ``NOT SEEN`` with the nsqds that hold it
(JSON: ``not_seen``, ``held_by``). One nsqlookupd lists with no producer is marked as the
guess it is, on the nsqds down or a registration left behind (JSON: ``unregistered``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import typer

from nsqctl.cli import complete
from nsqctl.cli.flags import (
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
    require_first_answer,
    resolve_cluster,
)
from nsqctl.cli.numbers import poll_interval, seconds
from nsqctl.cli.wording import cli_words
from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.protocol.names import validate_channel, validate_topic
from nsqctl.stats.coverage import coverage, leader_silent_words, not_seen_words
from nsqctl.stats.model import NodeStats
from nsqctl.stats.poller import DEFAULT_TIMEOUT, StatsPoller
from nsqctl.stats.sources import StatsSession, ViewSource
from nsqctl.stats.view import ChannelView, ClusterView, TopicView, deleted_words

HEADER_EVERY = 20
SAMPLE = "this sample"
"""What a sample's warnings say may be incomplete."""
COLUMNS = (
    ("time", 8),
    ("what", 32),
    ("depth", 9),
    ("inflt", 7),
    ("def", 6),
    ("req", 7),
    ("t-o", 6),
    ("msgs", 10),
    ("clients", 7),
    ("msg/s", 9),
    ("state", 0),
)


def _row(what: str, scope: str, **fields: Any) -> dict[str, Any]:
    return {"scope": scope, "what": what, **fields}


def _paused_copies(topic: TopicView, paused: Sequence[bool]) -> dict[str, Any]:
    """On the original family, on how many of its nsqds the topic or channel is paused:
    its one row stands for every copy, and a pause made on one nsqd (``--node``) leaves
    the others delivering. The redesign shows each partition's own row instead."""
    if topic.is_redesign:
        return {}
    return {"paused_copies": sum(paused), "copies": len(paused)}


def _paused_partitions(topic: TopicView, ch: ChannelView) -> dict[str, Any]:
    """On the redesign, on how many of the partitions read that hold the channel it is
    paused, and how many of the topic's partitions went unread (no live copy): a pause
    made with ``--partition`` leaves the others delivering, and the channel's own row must
    not read as paused everywhere (its partitions' rows follow it). A partition that does
    not hold the channel (one created with ``--partition``) counts in neither."""
    if not topic.is_redesign:
        return {}
    read = {part.partition for part in ch.parts}
    paused = {part.partition for part in ch.parts if part.stats.paused}
    unread = sum(1 for p in topic.partitions if not p.live and p.partition not in read)
    return {"paused_partitions": len(paused), "partitions": len(read), "unread_partitions": unread}


def _channel_rows(topic: TopicView, ch: ChannelView) -> list[dict[str, Any]]:
    rows = [
        _row(
            f"{topic.name}/{ch.name}",
            "channel",
            topic=topic.name,
            channel=ch.name,
            partition=None,
            depth=ch.depth,
            depth_bytes=ch.depth_bytes,
            in_flight=ch.in_flight,
            deferred=ch.deferred,
            requeued=ch.requeued,
            requeued_delta=ch.requeue_delta,
            timed_out=ch.timed_out,
            timed_out_delta=ch.timeout_delta,
            messages=ch.messages,
            clients=ch.client_count,
            msg_rate=ch.msg_rate,
            paused=ch.paused,
            skipped=ch.skipped,
            starved=ch.starved,
            stalled=ch.stalled,
            **_paused_copies(topic, [copy.paused for _, copy in ch.sources]),
            **_paused_partitions(topic, ch),
        )
    ]
    if topic.is_redesign:
        parts: list[dict[str, Any]] = _unseen_channel_rows(topic, ch)
        for part in ch.parts:
            s = part.stats
            parts.append(
                _row(
                    f"  {topic.name}/{ch.name}#{part.partition}",
                    "channel_partition",
                    topic=topic.name,
                    channel=ch.name,
                    partition=part.partition,
                    node=part.node,
                    live=True,
                    depth=s.depth,
                    depth_bytes=s.depth_bytes,
                    in_flight=s.in_flight_count,
                    deferred=s.deferred_count,
                    requeued=s.requeue_count,
                    requeued_delta=part.requeue_delta,
                    timed_out=s.timeout_count,
                    timed_out_delta=part.timeout_delta,
                    messages=s.message_count,
                    clients=s.client_count,
                    msg_rate=part.msg_rate,
                    paused=s.paused,
                    skipped=s.skipped,
                )
            )
        rows.extend(sorted(parts, key=lambda r: -1 if r["partition"] is None else r["partition"]))
    return rows


#: A partition with no live copy: its counts are unknown (``?``), those the table cannot
#: show as unknown read 0, as on the topic's partition rows.
UNSEEN_COUNTS: dict[str, Any] = dict.fromkeys(("depth", "depth_bytes", "messages", "msg_rate")) | (
    dict.fromkeys(("in_flight", "deferred", "requeued", "timed_out", "clients"), 0)
)


def _unseen_channel_rows(topic: TopicView, ch: ChannelView) -> list[dict[str, Any]]:
    """The channel on each partition with no live copy: nothing is known of it (``?``),
    but it is there, so the channel's figures above it are not the whole channel."""
    read = {part.partition for part in ch.parts}
    return [
        _row(
            f"  {topic.name}/{ch.name}#{p.label}",
            "channel_partition",
            topic=topic.name,
            channel=ch.name,
            partition=p.partition,
            node=None,
            live=False,
            **UNSEEN_COUNTS,
        )
        for p in topic.partitions
        if not p.live and p.partition not in read
    ]


def _not_seen_row(topic: TopicView, channel: str | None) -> dict[str, Any]:
    """A row of a topic (or one of its channels) no answering nsqd holds: every counter
    unknown (``None``), and who holds it."""
    unknown = dict.fromkeys(
        ("depth", "in_flight", "deferred", "requeued", "timed_out", "messages", "clients")
    )
    return _row(
        topic.name if channel is None else f"{topic.name}/{channel}",
        "topic" if channel is None else "channel",
        topic=topic.name,
        channel=channel,
        partition=None,
        **unknown,
        msg_rate=None,
        paused=None,
        not_seen=True,
        held_by=list(topic.held_by),
        held_by_guessed=topic.held_by_guessed,
        unregistered=topic.unregistered,
    )


def _topic_rows(topic: TopicView) -> list[dict[str, Any]]:
    if topic.not_seen:
        return [_not_seen_row(topic, None)]
    rows = [
        _row(
            topic.name,
            "topic",
            topic=topic.name,
            channel=None,
            partition=None,
            depth=topic.depth,
            in_flight=sum(c.in_flight for c in topic.channels),
            deferred=sum(c.deferred for c in topic.channels),
            requeued=sum(c.requeued for c in topic.channels),
            timed_out=sum(c.timed_out for c in topic.channels),
            messages=topic.messages,
            clients=sum(c.client_count for c in topic.channels),
            msg_rate=topic.rate,
            partitions=len(topic.partitions),
            leaderless=topic.leaderless,
            unseen=topic.unseen,
            deleted=topic.deleted,
            paused=topic.paused,
            **_paused_copies(topic, [p.paused for p in topic.partitions]),
        )
    ]
    if topic.is_redesign:
        for p in topic.partitions:
            rows.append(
                _row(
                    f"  {topic.name}#{p.label}",
                    "partition",
                    topic=topic.name,
                    channel=None,
                    partition=p.partition,
                    leader=p.leader,
                    replicas=list(p.replicas),
                    isr=None if p.isr is None else list(p.isr),
                    catchup=None if p.catchup is None else list(p.catchup),
                    write_enabled=p.write_enabled,
                    live=p.live,
                    depth=p.depth if p.live else None,
                    stored_bytes=p.stored_bytes,
                    in_flight=sum(c.in_flight_count for c in p.channels),
                    deferred=sum(c.deferred_count for c in p.channels),
                    requeued=sum(c.requeue_count for c in p.channels),
                    timed_out=sum(c.timeout_count for c in p.channels),
                    messages=p.messages if p.live else None,
                    clients=sum(c.client_count for c in p.channels),
                    msg_rate=p.rate,
                )
            )
    return rows


def stat_rows(view: ClusterView, topic: str | None, channel: str | None) -> list[dict[str, Any]]:
    """The rows one interval prints, as plain dicts (the --json form)."""
    if topic is None:
        return [r for t in view.topics for r in _topic_and_channel_rows(t)]
    tv = view.topic(topic)
    if tv is None:
        return []
    if channel is not None:
        if channel in tv.unseen_channels:
            return [_not_seen_row(tv, channel)]
        ch = tv.channel(channel)
        return _channel_rows(tv, ch) if ch else []
    return _topic_and_channel_rows(tv)


def _topic_and_channel_rows(topic: TopicView) -> list[dict[str, Any]]:
    """A topic's rows, then each of its channels' rows under it."""
    rows = _topic_rows(topic)
    rows.extend(_not_seen_row(topic, name) for name in topic.unseen_channels)
    for ch in topic.channels:
        rows.extend(_channel_rows(topic, ch))
    return rows


def _paused_words(row: dict[str, Any]) -> str:
    """``PAUSED``, or ``PAUSED k/n`` when paused on only k of the n nsqds holding it
    (original) or of the partitions read that hold it (a redesign channel), with how many
    partitions went unread: a pause there is unknown."""
    some, of = row.get("paused_copies"), row.get("copies")
    if some is None:  # a redesign channel: counted in partitions
        some, of = row.get("paused_partitions"), row.get("partitions")
    unread = row.get("unread_partitions") or 0
    if some is None or (some == of and not unread):
        return "PAUSED"
    words = f"PAUSED {some}/{of}"
    if unread:
        words += f" ({_unread_words(unread)})"
    return words


def _unread_words(unread: int) -> str:
    return f"{unread} partition{'s' if unread > 1 else ''} unread"


def _partial_words(row: dict[str, Any]) -> str:
    """``PARTIAL (n partitions unread)`` on a redesign topic's or channel's own row when
    some of its partitions have no live copy: its figures sum only the partitions read,
    so a depth of 0 is not an empty topic (``unseen`` / ``unread_partitions`` in JSON).
    Empty when a partial pause count already says so (:func:`_paused_words`)."""
    unread = row.get("unseen") or row.get("unread_partitions") or 0
    # a paused redesign channel's count says the unread partitions itself
    pause_says = row.get("paused") and row.get("paused_partitions") is not None
    if not unread or pause_says:
        return ""
    return f"PARTIAL ({_unread_words(unread)})"


def state_marker(row: dict[str, Any]) -> str:
    """``PAUSED`` / ``SKIPPED`` (both when both), the text form of the JSON flags, the
    pause counted where it is partial (:func:`_paused_words`);
    ``NOT SEEN`` (with its nsqds) when no nsqd holding it answered; ``DELETED`` for the
    data a deleted topic left behind (:attr:`TopicView.deleted`); ``PARTIAL`` when its
    figures miss partitions nobody could read (:func:`_partial_words`)."""
    words = []
    if row.get("deleted"):
        words.append("DELETED")
    partial = _partial_words(row)
    if partial:
        words.append(partial)
    if row.get("not_seen"):
        words.append(not_seen_words(row["held_by"], row["held_by_guessed"], row["unregistered"]))
    if row.get("paused"):
        words.append(_paused_words(row))
    if row.get("skipped"):
        words.append("SKIPPED")
    return " ".join(words)


def _fmt_delta(total: int | None, change: int | None) -> str:
    return _count(total) if change is None else f"+{change}"


def _count(value: int | None) -> str:
    """A counter; ``?`` when nobody could say (a partition with no live copy, a topic
    whose every nsqd is down)."""
    return "?" if value is None else str(value)


def format_row(when: str, row: dict[str, Any]) -> str:
    rate = row.get("msg_rate")
    values = (
        when,
        row["what"][:32],
        _count(row["depth"]),
        _count(row["in_flight"]),
        _count(row["deferred"]),
        _fmt_delta(row["requeued"], row.get("requeued_delta")),
        _fmt_delta(row["timed_out"], row.get("timed_out_delta")),
        _count(row["messages"]),
        _count(row["clients"]),
        "-" if rate is None else f"{rate:.1f}",
        state_marker(row),
    )
    return _line(values)


def _line(values: tuple[str, ...]) -> str:
    """Time and what left-aligned, the figures right-aligned, the state marker last."""
    last = len(COLUMNS) - 1
    return " ".join(
        v.ljust(w) if i < 2 else v if i == last else v.rjust(w)
        for i, (v, (_, w)) in enumerate(zip(values, COLUMNS, strict=True))
    ).rstrip()


def header() -> str:
    return _line(tuple(name for name, _ in COLUMNS))


def interval_record(view: ClusterView, topic: str | None, channel: str | None) -> dict[str, Any]:
    """One --json line: time, the rows, the nodes, and what the sample could not see
    (``complete``, ``warnings``: nsqds or nsqlookupds not answering, partitions unseen)."""
    seen = coverage(view, topic)
    return {
        "time": view.taken_at,
        "rows": stat_rows(view, topic, channel),
        "nodes": [
            {"address": n.address, "state": n.stats.state, "error": n.stats.error}
            for n in view.nodes
        ],
        "complete": seen.complete,
        "warnings": seen.warnings(SAMPLE),
    }


def node_note(node: NodeStats) -> str:
    """The line for an nsqd that is not plainly up: down with why, unhealthy with its
    health, slow with how long its /stats took (its health is "OK" then: a slow answer
    is no error, and "slow: OK" told nothing)."""
    if node.error:
        why = node.error
    elif node.state == "slow":
        why = f"answered /stats in {node.elapsed:.1f}s"
    else:
        why = node.health
    return f"nsqd {node.address} {node.state}: {why}"


def _leaderless_notes(view: ClusterView, topic: str | None) -> list[str]:
    """``T#P has no leader`` for each partition of the topics shown (a channel's rows
    too: they sum the partitions, so one unread must be said there as well), or that
    the leader nsqlookupd lists does not answer; for a deleted topic's data left on an
    nsqd, one note saying so and what removes it (its partitions have no leader by
    design)."""
    why = "no live copy: its nsqds are down or not answering"
    topics = view.topics if topic is None else [t for t in view.topics if t.name == topic]
    answering = {n.address for n in view.nodes if n.stats.state != "down"}
    notes = []
    for t in topics:
        if t.deleted:
            notes.append(cli_words(deleted_words(t)))
            continue
        for p in t.partitions:
            if not t.is_redesign or p.leader is not None:
                continue
            if p.listed_leader is not None and p.listed_leader not in answering:
                # nsqlookupd still lists it (hung, or gone since it last heard of it): a
                # copy that may come back, which "no live copy" is not
                notes.append(f"{t.name}#{p.label}: {leader_silent_words(p.listed_leader)}")
            else:
                notes.append(
                    f"{t.name}#{p.label} has no leader" + (f" ({why})" if not p.live else "")
                )
    return notes


async def run_stat(
    source: ViewSource,
    topic: str | None,
    channel: str | None,
    *,
    interval: float,
    count: int,
    as_json: bool,
) -> None:
    printed = 0
    n = 0
    try:
        while True:
            started = time.monotonic()
            view = await source.refresh()
            if n == 0:
                require_first_answer(view)
            elif not view.nodes and view.errors:
                raise NsqctlError(view.errors[0])
            n += 1
            if as_json:
                sys.stdout.write(json.dumps(interval_record(view, topic, channel)) + "\n")
            else:
                when = time.strftime("%H:%M:%S", time.localtime(view.taken_at))
                for node in view.nodes:
                    if node.stats.state != "up":
                        typer.echo(f"{when} {node_note(node.stats)}", err=True)
                for warning in coverage(view).lookupd_warnings(SAMPLE):
                    typer.echo(f"{when} {warning}", err=True)
                rows = stat_rows(view, topic, channel)
                for note in _leaderless_notes(view, topic):
                    typer.echo(f"{when} {note}", err=True)
                if not rows:
                    missing = f"{topic}/{channel}" if channel else topic
                    where = coverage(view, topic).searched
                    typer.echo(f"{when} (no {missing or 'topics'} on {where})")
                for row in rows:
                    if printed % HEADER_EVERY == 0:
                        typer.echo(header())
                    typer.echo(format_row(when, row))
                    printed += 1
            sys.stdout.flush()
            if count and n >= count:
                return
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
    finally:
        await source.aclose()


def stat(
    topic: str | None = typer.Argument(
        None, autocompletion=complete.topics, help="Only this topic (and its channels)."
    ),
    channel: str | None = typer.Argument(
        None, autocompletion=complete.channels, help="Only this channel of TOPIC."
    ),
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
    interval: float = typer.Option(
        2.0, "--interval", "-i", parser=poll_interval(), help="Seconds between samples."
    ),
    count: int = typer.Option(0, "--count", "-n", help="Stop after N samples (0: run forever)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per interval (NDJSON)."),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT,
        "--timeout",
        parser=seconds(),
        help="Seconds before an nsqd counts as down for a sample.",
    ),
) -> None:
    """Rolling per-interval stats (depth, in-flight, deferred, requeued, timeouts, rates)."""
    if count < 0:
        raise ConfigError(f"bad --count {count!r}: must be >= 0")
    if topic is not None:
        validate_topic(topic)
    if channel is not None:
        validate_channel(channel)
    sel = resolve_cluster(lookupd, nsqd, profile, nsqd_http, require="http")
    poller = StatsPoller(sel.lookupd, sel.nsqd_http, topic=topic, channel=channel, timeout=timeout)
    asyncio.run(
        run_stat(
            StatsSession(poller), topic, channel, interval=interval, count=count, as_json=as_json
        )
    )
