"""``nsqctl peek``: a channel's next messages, printed in ``tail``'s formats, consumed by
nobody.

The formats are tail's own (:mod:`nsqctl.cli.output.messages`); the printing here only
writes, never acknowledges: a peeked message was only read (a plain record of it is
printed), and a borrowed one is given back by :func:`nsqctl.peek.borrow` (exactly once,
whatever was printed).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import BinaryIO

import typer

from nsqctl.cli import complete
from nsqctl.cli.flags import (
    ClusterSelection,
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.cli.output.fd import stream_fd, write_fully
from nsqctl.cli.output.messages import Printable, PrintedMessage, format_message
from nsqctl.errors import ConfigError, LookupUnavailableError, NsqctlError
from nsqctl.timeparse import parse_time_s

FORMATS = ("raw", "json", "pretty")
DEFAULT_COUNT = 10  # as nsqctl.peek's, not imported for --help (start-up time)


def _print(out: BinaryIO, fmt: str, messages: Sequence[Printable]) -> None:
    """Write ``messages`` in one go, whole. A reader that went away (``| head``) raises
    BrokenPipeError, which ends the command as it ends every other (exit 141)."""
    data = b"".join([format_message(msg, fmt, False) for msg in messages])
    write_fully(out, stream_fd(out), data)


def _warn_borrowing(count: int, topic: str, channel: str, expected: list[int]) -> None:
    expected.append(count)
    if count == 0:
        return
    print(
        f"nsqctl peek: borrowing {count} message(s) from {topic}/{channel}: each is taken and "
        "given straight back, so its attempts rise by one and it may now come after newer "
        "messages",
        file=sys.stderr,
        flush=True,
    )


def _warn_paused(topic: str, channel: str, paused: Sequence[tuple[str, int]]) -> None:
    where = ", ".join(f"nsqd {node} ({depth} message(s) waiting)" for node, depth in paused)
    print(
        f"nsqctl peek: {topic}/{channel} is paused on {where}: a paused channel delivers "
        f"nothing, so those are not borrowed (`nsqctl channel unpause {topic} {channel}` "
        "lets them out)",
        file=sys.stderr,
        flush=True,
    )


def _borrowed_fewer(got: int, asked: int, waiting: int, wait: float) -> None:
    """Say why fewer than ``asked`` were shown: the channel held only ``waiting`` (exit
    0: that is all there was), or some of those did not arrive in time (exit 1)."""
    if got < waiting:
        raise NsqctlError(
            f"borrowed {got} of the {waiting} message(s) the channel held (of {asked} "
            f"asked): the rest did not arrive within {wait:g}s (another consumer of "
            "the channel may have taken them first)"
        )
    if got < asked:
        print(
            f"nsqctl peek: borrowed {got} of {asked} message(s) asked: the channel held only "
            f"{waiting} waiting (its depth; messages in flight to other consumers are not "
            "waiting)",
            file=sys.stderr,
        )


def _warn_lookupds_down(cluster: ClusterSelection, down: Sequence[str], what: str) -> None:
    """Say that the nsqds given were read instead of the silent nsqlookupds, in the words
    every cluster view uses (:class:`~nsqctl.stats.coverage.Coverage`)."""
    from nsqctl.stats.coverage import Coverage

    seen = Coverage(len(cluster.nsqd_http), lookupds_down=tuple(down), lookupds_asked=len(down))
    for line in seen.lookupd_warnings(what):
        print(f"nsqctl peek: warning: {line}", file=sys.stderr, flush=True)


def _without_lookupd(err: LookupUnavailableError, way_round: str) -> LookupUnavailableError:
    """``err`` (every nsqlookupd silent, no nsqd given to fall back on) with the flags
    that would have read the nsqds instead."""
    return LookupUnavailableError(f"{err}; {way_round}")


def _stdout() -> BinaryIO:
    if sys.stdout is None:
        raise ConfigError("standard output is closed: peek prints the messages there")
    return sys.stdout.buffer


def peek(
    topic: str = typer.Argument(..., help="Topic.", autocompletion=complete.topics),
    channel: str | None = typer.Argument(
        None,
        help="Channel whose next messages to show (optional with --from-offset/--from-time).",
        autocompletion=complete.channels,
    ),
    count: int = typer.Option(
        DEFAULT_COUNT, "--count", "-n", min=1, help="Show this many messages."
    ),
    partition: int | None = typer.Option(
        None,
        "--partition",
        min=0,
        help="Only this partition (redesign).",
        autocompletion=complete.partitions,
    ),
    from_offset: int | None = typer.Option(
        None, "--from-offset", min=0, help="Read --partition from this disk-queue byte offset."
    ),
    from_time: str | None = typer.Option(
        None,
        "--from-time",
        help="Read --partition from this publish time: Unix seconds or ISO 8601.",
    ),
    borrow: int | None = typer.Option(
        None,
        "--borrow",
        min=1,
        metavar="N",
        help="Original NSQ: take N messages and give them straight back (their attempts "
        "rise by one, their order may change).",
    ),
    fmt: str = typer.Option("pretty", "--format", help="raw | json | pretty (as tail)."),
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """Show a channel's next messages without consuming them (redesign; --borrow: original).

    With every nsqlookupd down, the nsqds given (--nsqd-http; with --borrow, --nsqd too)
    are read instead, and a warning says the messages shown may be incomplete. With
    --borrow and nsqlookupd up, an nsqd given by both addresses that holds the topic
    but that nsqlookupd does not list is borrowed from too."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown --format {fmt!r}: use raw, json or pretty")
    since = float(parse_time_s(from_time)) if from_time is not None else None
    cluster = resolve_cluster(lookupd, nsqd, profile, nsqd_http, require="http")
    out = _stdout()
    if borrow is None:
        _peek(out, fmt, cluster, topic, channel, count, partition, from_offset, since)
        return
    if channel is None:
        raise ConfigError("--borrow takes messages from a channel: name the CHANNEL")
    if partition is not None or from_offset is not None or since is not None:
        raise ConfigError(
            "--partition/--from-offset/--from-time read the redesign in place: drop them "
            "with --borrow"
        )
    _borrow(out, fmt, cluster, topic, channel, borrow)


def _peek(
    out: BinaryIO,
    fmt: str,
    cluster: ClusterSelection,
    topic: str,
    channel: str | None,
    count: int,
    partition: int | None,
    offset: int | None,
    since: float | None,
) -> None:
    """Read the next messages in place (redesign) and print them."""
    from nsqctl import peek as lib  # HTTP, stats and admin only when it runs

    try:
        result = asyncio.run(
            lib.peek(
                topic,
                channel,
                lookupd_http=cluster.lookupd,
                nsqd_http=cluster.nsqd_http,
                count=count,
                partition=partition,
                offset=offset,
                since=since,
            )
        )
    except LookupUnavailableError as err:
        raise _without_lookupd(err, "--nsqd-http reads the nsqds without it") from err
    if result.lookupds_down:
        _warn_lookupds_down(cluster, result.lookupds_down, "the messages shown")
    shown = channel or "-"
    _print(
        out,
        fmt,
        [PrintedMessage(m.raw, m.topic, shown, m.partition, m.nsqd) for m in result.messages],
    )
    if result.unread:
        listed = ", ".join(str(p) for p in result.unread)
        print(
            f"nsqctl peek: warning: {topic} partition(s) {listed} not read: no leader (the "
            "nsqds holding them are down or not answering, or none is elected yet), so "
            f"these may not be the channel's next messages; `nsqctl lookup {topic}` shows why",
            file=sys.stderr,
        )
    for part, why in result.unanswered:
        print(
            f"nsqctl peek: warning: {topic} partition {part} not read: its leader did not "
            f"answer ({why}), so these may not be the channel's next messages",
            file=sys.stderr,
        )
    if not result.messages:
        print(f"nsqctl peek: no messages waiting in {topic}/{shown}", file=sys.stderr)


def _borrow(
    out: BinaryIO, fmt: str, cluster: ClusterSelection, topic: str, channel: str, count: int
) -> None:
    """Take up to ``count`` messages (original), print them, give them back; say why
    fewer were shown."""
    from nsqctl import peek as lib  # the consumer only when borrowing

    expected: list[int] = []
    try:
        borrowed = asyncio.run(
            lib.borrow(
                topic,
                channel,
                count,
                lambda msgs: _print(out, fmt, msgs),
                lookupd_http=cluster.lookupd,
                nsqd_tcp=cluster.nsqd,
                nsqd_http=cluster.nsqd_http,
                config=cluster.consumer_config(channel),
                on_taking=lambda n: _warn_borrowing(n, topic, channel, expected),
                on_paused=lambda paused: _warn_paused(topic, channel, paused),
                on_lookupds_down=lambda down: _warn_lookupds_down(
                    cluster, down, "the messages borrowed"
                ),
            )
        )
    except LookupUnavailableError as err:
        way_round = "--nsqd with --nsqd-http borrows from the nsqds without it"
        raise _without_lookupd(err, way_round) from err
    _borrowed_fewer(len(borrowed), count, expected[0] if expected else count, lib.BORROW_WAIT)
