"""``nsqctl node drain|restore|list``: take an nsqd out of service safely, and back.

Thin over :mod:`nsqctl.admin.drain`. ``drain`` shows its progress on stderr (one line kept
up to date on a terminal, a line every few seconds otherwise), or with ``--json-progress``
one JSON object a poll on stdout, and exits 0 only when the node is safe to stop; 1 when
``--timeout`` passed first (naming what is left), when ``node restore`` undid it
meanwhile, or at once (dry run too) when partitions keep it from being drained: stopping
it would leave one without enough in-sync copies to take writes, or a leader cannot move.
The drain state is kept in the state directory (``NSQCTL_STATE_DIR``), where ``restore``,
``list`` and the dashboard read it.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

import typer

from nsqctl.admin.drain.defaults import DEFAULT_INTERVAL, DEFAULT_RESTORE_WAIT, DEFAULT_TIMEOUT
from nsqctl.admin.drain.records import read_drains, running_elsewhere, state_word
from nsqctl.cli import complete
from nsqctl.cli.admin_actions import cluster_addresses
from nsqctl.cli.flags import JsonOption, LookupdOption, NsqdHttpOption, ProfileOption
from nsqctl.cli.numbers import poll_interval, seconds
from nsqctl.cli.wording import cli_words
from nsqctl.errors import AdminError, ConfigError, NsqctlTimeoutError

if TYPE_CHECKING:  # the drain loads the stats model: only when a command runs (start-up)
    from nsqctl.admin.drain.progress import DrainProgress
    from nsqctl.admin.drain.run import DrainPlan, DrainResult
    from nsqctl.admin.drain.safety import Blocker

app = typer.Typer(
    help="Drain an nsqd before stopping it, restore it, list nsqds and their drain state.",
    no_args_is_help=True,
)

NodeArgument = typer.Argument(
    ...,
    autocompletion=complete.nodes,
    help="The nsqd: its HTTP address (as `nsqctl node list` and `dash` show) or TCP address.",
)
PRINT_EVERY = 5.0
"""Seconds between progress lines when stderr is not a terminal (logs, CI)."""


def _lookupds(lookupd: list[str] | None, profile: str | None) -> list[str]:
    lookupds, _ = cluster_addresses(lookupd, None, None, profile, require=None)
    return lookupds


class _Display:
    """The drain's progress on stderr: a refreshed line on a terminal, else periodic lines."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last_print = float("-inf")
        self.open_line = False

    def progress(self, step: DrainProgress) -> None:
        line = step.line()
        if self.tty:
            sys.stderr.write("\r\x1b[K" + line)
            sys.stderr.flush()
            self.open_line = True
            return
        now = time.monotonic()
        if now - self.last_print >= PRINT_EVERY or step.done:
            typer.echo(line, err=True)
            self.last_print = now

    def say(self, line: str) -> None:
        self.end()
        typer.echo(line, err=True)

    def end(self) -> None:
        if self.open_line:
            sys.stderr.write("\n")
            self.open_line = False


class _JsonLines:
    """``--json-progress``: every poll as one JSON line on stdout, each written (and
    flushed) as the poll ends so a script reading the pipe follows the drain live; the
    result is the last line. Lines carry ``"event"`` so a reader tells the two apart."""

    def progress(self, step: DrainProgress) -> None:
        typer.echo(json.dumps({"event": "progress", **step.to_json()}))

    def result(self, result: DrainResult) -> None:
        typer.echo(json.dumps({"event": "result", **result.to_json()}))


def _show_plan(plan: DrainPlan, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"dry_run": True, **plan.to_json()}, indent=2))
        return
    for line in plan.preview():
        typer.echo(line)
    typer.echo("dry run: nothing was changed")


def _refuse(node: str, blocked: Sequence[Blocker], moved: bool = False) -> NoReturn:
    """What keeps ``node`` from being drained, one line each on stderr, then exit 1: the
    same for a dry run and a real one."""
    from nsqctl.admin.drain.run import refusal

    for b in blocked:
        typer.echo(f"  {b.describe()}", err=True)
    raise AdminError(refusal(node, blocked, moved))


def _finish(result: DrainResult, as_json: bool, lines: _JsonLines | None = None) -> None:
    if lines is not None:
        lines.result(result)
    elif as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    node = result.plan.node
    if result.outcome == "blocked":
        _refuse(node, result.blocked, moved=bool(result.moved))
    if result.outcome == "restored":
        raise AdminError(f"the drain of {node} was undone by `nsqctl node restore`: stopped")
    if result.outcome == "timeout":
        left = "; ".join(result.progress.left() + result.move_errors) or "not confirmed"
        raise NsqctlTimeoutError(
            f"{node} is not drained after {result.progress.elapsed:.0f}s: {left}",
            setting="timeout",
        )
    if not as_json and lines is None:
        copies = (
            ", and every partition keeps enough in-sync copies up without it"
            if result.plan.family == "redesign"
            else ""
        )
        typer.echo(
            f"{node} drained in {result.progress.elapsed:.0f}s: it holds nothing and nothing "
            f"depends on it{copies}; safe to stop"
        )
        for m in result.moved:
            what = "its copy" if m.copy else "leader"
            typer.echo(f"  moved {m.topic} partition {m.partition} {what} to {m.target}")
        if result.plan.family == "original":
            typer.echo(
                "  nsqlookupd lists it again once its tombstones expire (--tombstone-lifetime, "
                f"45s by default) unless it is stopped; `nsqctl node restore {node}` undoes "
                "the drain now"
            )


@app.command("drain")
def node_drain(
    node: str = NodeArgument,
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT,
        "--timeout",
        parser=seconds(zero=True),
        help="Give up after this long: exit 1, naming what is left.",
    ),
    interval: float = typer.Option(
        DEFAULT_INTERVAL,
        "--interval",
        parser=poll_interval(),
        help="Seconds between two looks at the node.",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Show the tombstones or leader moves; change nothing."
    ),
    as_json: bool = JsonOption,
    json_progress: bool = typer.Option(
        False,
        "--json-progress",
        help=(
            "Each poll as one JSON line on stdout (remaining, depth, in_flight, deferred, "
            'rate, eta, left, ...; "event": "progress"), then the result as one line '
            '("event": "result", as --json gives it).'
        ),
    ),
    lookupd: list[str] = LookupdOption,
    profile: str | None = ProfileOption,
) -> None:
    """Drain an nsqd: send traffic elsewhere, exit 0 once it is safe to stop it.

    Original: tombstone the nsqd's topics on every nsqlookupd (kept fresh while it runs),
    then wait until it holds no message (depth, in flight, deferred) and no nsqlookupd
    lists it. Redesign: move every partition leader it holds to an in-sync copy elsewhere,
    then wait until no partition depends on it; refused at once (exit 1, the dry run too)
    when stopping it would leave a partition without more than replicas/2 in-sync copies
    up (youzan then takes no writes for it), naming each. Undo with `nsqctl node restore`.
    """
    from nsqctl.admin.drain.run import plan_drain, run_drain

    lookupds = _lookupds(lookupd, profile)
    plan = asyncio.run(plan_drain(lookupds, node))
    if dry_run:
        if running_elsewhere(read_drains().get(plan.node)):
            typer.echo(f"note: a drain of {plan.node} is running now", err=True)
        _show_plan(plan, as_json or json_progress)
        if plan.blocked:
            _refuse(plan.node, plan.blocked)
        return
    display = _Display()
    lines = _JsonLines() if json_progress else None

    async def drain() -> DrainResult:
        # SIGTERM (a service manager, `kill`) ends the drain as Ctrl-C does: cancelled, so
        # that it records how far it got instead of staying "draining" for good
        task = asyncio.current_task()
        if task is not None:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await run_drain(
            plan,
            timeout=timeout,
            interval=interval,
            on_progress=display.progress if lines is None else lines.progress,
            say=display.say,
        )

    try:
        result = asyncio.run(drain())
    except (KeyboardInterrupt, asyncio.CancelledError):
        display.end()
        raise AdminError(
            f"the drain of {plan.node} was interrupted: recorded as given up (`nsqctl node "
            f"list`); leaders it moved stay moved (`nsqctl node restore {plan.node}` moves "
            "them back)"
        ) from None
    finally:
        display.end()
    _finish(result, as_json, lines)


@app.command("restore")
def node_restore(
    node: str = NodeArgument,
    wait: float = typer.Option(
        DEFAULT_RESTORE_WAIT,
        "--wait",
        parser=seconds(zero=True),
        help="Seconds to wait until the node takes traffic again.",
    ),
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    profile: str | None = ProfileOption,
) -> None:
    """Undo a drain: stop it, let nsqlookupd list the nsqd again (original) or move back
    the partition leaders the drain moved (redesign)."""
    from nsqctl.admin.drain.restore import restore_node

    lookupds = _lookupds(lookupd, profile)
    result = asyncio.run(
        restore_node(lookupds, node, wait=wait, say=lambda s: typer.echo(s, err=True))
    )
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        typer.echo(f"{result.node} restored ({result.family})")
        for note in result.notes:
            typer.echo(f"  {cli_words(note)}")
    if result.failed:
        raise AdminError(f"restore of {result.node} incomplete: {'; '.join(result.failed)}")


@app.command("list")
def node_list(
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """List the nsqds nsqlookupd knows (and those given), whether each answers, and the
    drain state recorded on this machine."""
    lookupds, nsqds = cluster_addresses(lookupd, None, nsqd_http, profile, require=None)
    if not lookupds:
        raise ConfigError(
            "node list asks nsqlookupd: give its HTTP address", setting="lookupd_http"
        )
    from nsqctl.admin.node_list import list_nodes

    found = asyncio.run(list_nodes(lookupds, nsqds))
    drains = read_drains()
    rows = [
        {
            "http": n.http,
            "tcp": n.tcp,
            "state": n.state,
            "registered": n.registered,
            "drain": drains[n.http].state if n.http in drains else None,
        }
        for n in found.nodes
    ]
    for warning in found.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if as_json:
        payload = {"nodes": rows, "complete": not found.warnings, "warnings": found.warnings}
        typer.echo(json.dumps(payload, indent=2))
        return
    if not rows:
        seen = " seen (some of the cluster did not answer)" if found.warnings else " registered"
        typer.echo(f"(no nsqd{seen})", err=True)
        return
    typer.echo(f"{'HTTP':<22} {'TCP':<22} {'STATE':<14} DRAIN")
    for n in found.nodes:
        record = drains.get(n.http)
        word = state_word(record.state) if record else "-"
        why = f": {record.detail}" if record and record.state == "stopped" and record.detail else ""
        state = n.state if n.registered else f"{n.state} (unlisted)"
        typer.echo(f"{n.http:<22} {n.tcp or '?':<22} {state:<14} {word}{why}")
