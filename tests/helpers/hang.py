"""Hung nodes for tests: SIGSTOP a server (its sockets stay open and answer nothing, unlike
a killed one's) for a window, and run real ``nsqctl`` commands through it concurrently.

Commands run with a 1 s heartbeat (:data:`HEARTBEAT_ENV`), so the connection idle deadline
(about two missed heartbeats, at least 10 s) falls inside a stop window of
:data:`STOP_WINDOW`, and with a bound (:data:`BOUND`) each must finish within.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from nsqctl.connection.config import HEARTBEAT_INTERVAL_ENV
from nsqctl.servers import process
from nsqctl.servers.catalog import Flavor
from nsqctl.servers.cluster import Cluster
from nsqctl.servers.process import NodeRecord
from nsqctl.stats.poller import NOT_ANSWERING
from nsqctl.stats.read import read_nsqd_stats
from tests.helpers.cli import NSQCTL, clean_env
from tests.helpers.clusters import running_cluster
from tests.helpers.wait import wait_for

HEARTBEAT_MS = 1000
#: Longer than the heartbeat and than the idle deadline it gives (10 s), so every
#: connection to the stopped node is declared dead while it is stopped.
STOP_WINDOW = 12.0
#: What any one command may take through a stop window and its recovery.
BOUND = 60.0


def spread_cluster(family: Flavor, directory: Path) -> Iterator[Cluster]:
    """A module fixture's body: two nsqds on 127.0.0.2 and 127.0.0.3, as separate hosts
    would be; a short msg timeout, so what a dead connection held in flight comes back
    within the test."""
    yield from running_cluster(
        family, directory, nsqd=2, spread_addresses=True, nsqd_args=["--msg-timeout=3s"]
    )


def env() -> dict[str, str]:
    return clean_env({HEARTBEAT_INTERVAL_ENV: str(HEARTBEAT_MS)})


@contextlib.asynccontextmanager
async def stopped(node: NodeRecord) -> AsyncIterator[None]:
    """``node`` SIGSTOPped inside the block, SIGCONTed on the way out whatever happens."""
    process.pause(node)
    try:
        yield
    finally:
        process.resume(node)


@dataclass
class Run:
    """A finished command: exit code, output and how long it took."""

    code: int
    out: str
    err: str
    took: float

    @property
    def returncode(self) -> int:  # for tests.helpers.cli.assert_one_line_error
        return self.code

    @property
    def stderr(self) -> str:
        return self.err

    @property
    def lines(self) -> list[str]:
        return [line for line in self.out.splitlines() if line]


async def nsqctl(*args: str, stdin: bytes = b"", bound: float = BOUND) -> Run:
    """``nsqctl ARGS`` to completion; fails the test if it runs longer than ``bound``."""
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        NSQCTL,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env(),
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), bound)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(
            f"nsqctl {' '.join(args)} hung: still running after {bound}s"
        ) from None
    return Run(proc.returncode or 0, out.decode(), err.decode(), time.monotonic() - start)


@dataclass
class Tail:
    """A running ``nsqctl tail``: every line it printed, as it prints them."""

    proc: asyncio.subprocess.Process
    seen: list[str] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, *args: str) -> Tail:
        proc = await asyncio.create_subprocess_exec(
            NSQCTL,
            "tail",
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env(),
        )
        tail = cls(proc)
        tail.reader = asyncio.create_task(tail._read())
        return tail

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            self.seen.append(line.decode().rstrip("\n"))

    async def wait_for(self, bodies: Iterable[str], timeout: float = BOUND) -> float:
        """Seconds until every one of ``bodies`` was printed (at least once)."""
        want = set(bodies)
        start = time.monotonic()

        async def printed() -> bool:
            if want <= set(self.seen):
                return True
            if self.proc.returncode is not None:
                raise AssertionError(f"tail exited early: {await self.stderr()}")
            return False

        def missing() -> str:
            left = sorted(want - set(self.seen))
            return f"tail to print {len(left)} more: {left[:5]}..."

        await wait_for(printed, timeout, missing, step=0.05)
        return time.monotonic() - start

    async def stderr(self) -> str:
        assert self.proc.stderr is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                return (await self.proc.stderr.read()).decode()
        return ""

    async def interrupt(self, bound: float = 30.0) -> tuple[int, str]:
        """Ctrl-C; the exit code and stderr, once it exits (within ``bound``)."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            async with asyncio.timeout(bound):
                code = await self.proc.wait()
                if self.reader is not None:
                    await self.reader
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(f"tail did not exit within {bound}s of SIGINT") from None
        return code, await self.stderr()

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


def bodies(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def lines_in(payload: Sequence[str]) -> bytes:
    return ("\n".join(payload) + "\n").encode()


async def publish_to_each(nsqd_tcp: Sequence[str], topic: str, payload: Sequence[str]) -> None:
    """Publish ``payload`` split evenly over the nsqds, straight to each: the topic on all."""
    for i, tcp in enumerate(nsqd_tcp):
        run = await nsqctl("pub", topic, "--nsqd", tcp, stdin=lines_in(payload[i :: len(nsqd_tcp)]))
        assert run.code == 0, run.err


async def keyed_pub(topic: str, lookupd: Sequence[str], payload: Sequence[str], rate: int) -> Run:
    """``nsqctl pub --shard-field k`` of JSON lines at ``rate`` a second."""
    return await nsqctl(
        "pub", topic, *lookupd, "--shard-field", "k", "--rate", str(rate), stdin=lines_in(payload)
    )


def assert_stat_saw_down(stat: Run, node: NodeRecord, samples: int) -> None:
    """``stat --json`` ran through the stop: ``samples`` records, ``node`` down in one of
    them with the not-answering error."""
    assert stat.code == 0, stat.err
    records = [json.loads(line) for line in stat.lines]
    assert len(records) == samples
    states = [{n["address"]: n for n in r["nodes"]}[node.http_address] for r in records]
    assert any(s["state"] == "down" and NOT_ANSWERING in s["error"] for s in states), states


class DashWatch:
    """``nsqctl dash`` (its app, under Textual's pilot) polling the cluster through a stop:
    what its nodes table and lookupd line show."""

    def __init__(self, lookupd_http: Sequence[str], timeout: float = 1.0) -> None:
        from nsqctl.stats.poller import StatsPoller
        from nsqctl.stats.sources import StatsSession
        from nsqctl.tui.app import DashApp

        self.app = DashApp(
            StatsSession(StatsPoller(lookupd_http, [], timeout=timeout)), interval=0.5
        )

    def node_rows(self) -> dict[str, list[str]]:
        from nsqctl.tui.rowtable import RowTable

        table = self.app.screen.query_one("#nodes", RowTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        return {r[0]: r for r in rows}

    def lookupd_line(self) -> str:
        from nsqctl.tui import rows

        view = self.app.view
        return "" if view is None else rows.lookupd_line(view).plain

    @contextlib.asynccontextmanager
    async def showing_both_nsqds(self) -> AsyncIterator[object]:
        """The app running under its pilot, once its nodes table lists both nsqds of a
        spread cluster (:func:`spread_cluster`): what the stop is then measured against."""
        async with self.app.run_test(size=(200, 50)) as pilot:
            await self.until(pilot, lambda: len(self.node_rows()) == 2, "both nsqds")
            yield pilot

    async def until_not_answering(self, pilot: object, node: NodeRecord, what: str) -> float:
        """Seconds until the nodes table says ``node`` is not answering (its last column)."""
        return await self.until(
            pilot,
            lambda: NOT_ANSWERING in self.node_rows().get(node.http_address, [""] * 9)[8],
            what,
        )

    async def until(self, pilot: object, cond: Callable[[], bool], what: str) -> float:
        """Seconds until ``cond`` holds on screen; fails after :data:`BOUND`."""
        assert isinstance(pilot, Pilot)
        start = time.monotonic()
        await wait_for(cond, BOUND, f"the dashboard to show {what}", 0.1, pause=pilot.pause)
        return time.monotonic() - start


async def until_consuming(
    node: NodeRecord, topic: str, channel: str, command: asyncio.Task[Run]
) -> None:
    """Until ``channel`` of ``topic`` on ``node`` has a client (``command`` connected),
    so the stop that follows cuts a live connection."""

    async def consuming() -> bool:
        stats = await asyncio.to_thread(read_nsqd_stats, node.http_address, topic=topic)
        found = stats.channel(topic, channel)
        if found is not None and found.client_count > 0:
            return True
        if command.done():
            raise AssertionError(f"the command ended before it consumed: {command.result()}")
        return False

    await wait_for(consuming, BOUND, f"a consumer of {topic}/{channel} on {node.name}", 0.1)


async def archive_through_stop(
    hung: NodeRecord,
    healthy: NodeRecord,
    topic: str,
    out: str,
    source: Sequence[str],
    publish_during: Sequence[str],
    total: int,
) -> dict[str, Any]:
    """``nsqctl archive`` reading ``topic`` while ``hung`` is stopped and a slow publisher
    (``publish_during``: the pub's target arguments) keeps ``healthy`` busy through the
    window, so the archive is never idle long enough to exit before ``hung`` is back. Its
    ``--json`` report once it exits (idle); every one of ``total`` messages archived, and
    none of ``healthy``'s timed out in the archive's hands (the cluster's msg timeout is
    shorter than the archive's default batch age: it must write and FIN sooner)."""
    archive = asyncio.create_task(
        nsqctl("archive", topic, "--out", out, "--exit-when-idle", "8", "--json", *source)
    )
    await until_consuming(hung, topic, "nsqctl_archive", archive)
    during = bodies("d", int(STOP_WINDOW * 2))
    async with stopped(hung):
        pub = await nsqctl("pub", topic, *publish_during, "--rate", "2", stdin=lines_in(during))
    assert pub.code == 0, pub.err
    run = await archive
    assert run.code == 0, run.err
    report: dict[str, Any] = json.loads(run.out)
    assert isinstance(report["archived"], int) and report["archived"] >= total + len(during), (
        report,
        run.err,
    )
    stats = await asyncio.to_thread(read_nsqd_stats, healthy.http_address, topic=topic)
    held = stats.channel(topic, "nsqctl_archive")
    assert held is not None and held.timeout_count == 0, (held, run.err)
    return report
