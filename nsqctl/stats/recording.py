"""Record every HTTP exchange of real stats polls, and play them back through the real
poller (playback: the recorded responses answer its requests; no server is asked).

A recording is what a :class:`~nsqctl.stats.poller.StatsPoller` asked and got back, poll by
poll: every request of a poll, its lookup clients' too, goes through the poller's one
httpx client, whose transport (httpx's own extension point) records or plays back, so
playing it back exercises the very requests the poller makes (which nsqds, which
``/coordinator/stats?topic=``, the envelopes) and not a hand-picked subset. A manifest
lists each poll's poller settings, its time and every exchange; JSON bodies are kept in
files of their own next to it (re-indented, keys in the order received), plain text
(``/ping``) inline. ``tests/data/stats/record.py`` makes one from a live cluster.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx

from nsqctl.stats.model import ClusterSnapshot
from nsqctl.stats.poller import StatsPoller

RequestKey = tuple[str, str, str, tuple[tuple[str, str], ...]]


def request_key(method: str, url: str) -> RequestKey:
    """What identifies a request for playback: method, host:port, path, sorted query."""
    parts = urlsplit(url)
    return method.upper(), parts.netloc, parts.path, tuple(sorted(parse_qsl(parts.query)))


@dataclass(frozen=True)
class Exchange:
    method: str
    url: str
    status: int
    content_type: str
    body: bytes


class RecordingTransport(httpx.AsyncBaseTransport):
    """Passes requests on to the network and keeps a copy of every answer."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.inner = inner or httpx.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        try:
            body = await response.aread()
        finally:
            await response.aclose()
        content_type = response.headers.get("content-type", "")
        self.exchanges.append(
            Exchange(request.method, str(request.url), response.status_code, content_type, body)
        )
        # the body is already decoded: hand it on without the encoding headers
        return httpx.Response(
            response.status_code, headers={"content-type": content_type}, content=body
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass(frozen=True)
class RecordedPoll:
    """One poll as recorded: the poller's settings, when it ran and what it exchanged."""

    name: str
    taken_at: float
    lookupd_http: tuple[str, ...]
    nsqd_http: tuple[str, ...]
    topic: str | None
    channel: str | None
    elapsed: Mapping[str, float]
    exchanges: Mapping[RequestKey, tuple[int, str, bytes]]


class Recording:
    """A manifest and its body files, loaded for playback."""

    def __init__(self, manifest: Path | str) -> None:
        self.path = Path(manifest)
        self.meta: dict[str, Any] = json.loads(self.path.read_text())
        self.polls: dict[str, RecordedPoll] = {}
        for poll in self.meta["polls"]:
            exchanges: dict[RequestKey, tuple[int, str, bytes]] = {}
            for ex in poll["exchanges"]:
                if "file" in ex:
                    body = (self.path.parent / ex["file"]).read_bytes()
                else:
                    body = ex["text"].encode()
                exchanges[request_key(ex["method"], ex["url"])] = (
                    ex["status"],
                    ex["content_type"],
                    body,
                )
            self.polls[poll["name"]] = RecordedPoll(
                name=poll["name"],
                taken_at=poll["taken_at"],
                lookupd_http=tuple(poll["lookupd_http"]),
                nsqd_http=tuple(poll["nsqd_http"]),
                topic=poll["topic"],
                channel=poll["channel"],
                elapsed=poll["elapsed"],
                exchanges=exchanges,
            )

    def body(self, poll: str, method: str, url: str) -> Any:
        """The decoded JSON one request of one poll got back (for tests' expectations)."""
        status, _, body = self.polls[poll].exchanges[request_key(method, url)]
        if status != 200:
            raise KeyError(f"{method} {url} answered HTTP {status} in poll {poll}")
        return json.loads(body)


class PlaybackTransport(httpx.AsyncBaseTransport):
    """Answers each request with what the current poll recorded for it; anything else is
    refused like a dead host and listed in :attr:`missed`."""

    def __init__(self) -> None:
        self.poll: RecordedPoll | None = None
        self.missed: list[str] = []

    def recorded(self, method: str, url: str) -> tuple[int, str, bytes] | None:
        """What the current poll got for ``method url``; ``None`` (and listed in
        :attr:`missed`) when it was not asked then."""
        found = None
        if self.poll is not None:
            found = self.poll.exchanges.get(request_key(method, url))
        if found is None:
            self.missed.append(f"{method} {url}")
        return found

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        found = self.recorded(request.method, str(request.url))
        if found is None:
            raise httpx.ConnectError(f"not recorded: {request.method} {request.url}")
        status, content_type, body = found
        return httpx.Response(status, headers={"content-type": content_type}, content=body)


def retime(snapshot: ClusterSnapshot, poll: RecordedPoll) -> ClusterSnapshot:
    """The recorded poll's clock: every node fetched at ``taken_at`` with its recorded
    round trip, so rates and ages come out the same on every playback."""
    nodes = tuple(
        replace(n, fetched_at=poll.taken_at, elapsed=poll.elapsed.get(n.address, 0.0))
        for n in snapshot.nodes
    )
    return replace(snapshot, taken_at=poll.taken_at, nodes=nodes)


class RecordedPoller:
    """A snapshot source playing recorded polls back in order through a real
    :class:`StatsPoller` (the last poll repeats); settings come from the first poll."""

    def __init__(self, recording: Recording, polls: Sequence[str], **poller_kwargs: Any) -> None:
        if not polls:
            raise ValueError("RecordedPoller needs at least one poll name")
        self.recording = recording
        self._polls = [recording.polls[name] for name in polls]
        self._n = 0
        self.transport = PlaybackTransport()
        first = self._polls[0]
        self.poller = StatsPoller(
            first.lookupd_http,
            first.nsqd_http,
            topic=first.topic,
            channel=first.channel,
            transport=self.transport,
            **poller_kwargs,
        )

    def set_focus(self, topics: Sequence[str] | None) -> None:
        self.poller.set_focus(topics)

    async def snapshot(self) -> ClusterSnapshot:
        poll = self._polls[min(self._n, len(self._polls) - 1)]
        self._n += 1
        self.transport.poll = poll
        return retime(await self.poller.snapshot(), poll)

    async def aclose(self) -> None:
        await self.poller.aclose()


async def play_back(
    manifest: Path | str, polls: Sequence[str], **poller_kwargs: Any
) -> list[ClusterSnapshot]:
    """The snapshots a poller makes from the recorded polls, in order."""
    source = RecordedPoller(Recording(manifest), polls, **poller_kwargs)
    try:
        snaps = [await source.snapshot() for _ in polls]
    finally:
        await source.aclose()
    if source.transport.missed:
        raise LookupError(f"the poller asked for what was not recorded: {source.transport.missed}")
    return snaps


def write_recording(
    manifest: Path,
    polls: Sequence[dict[str, Any]],
    names: Mapping[str, str],
    meta: Mapping[str, Any],
) -> list[Path]:
    """Save polls (each with its ``exchanges``: :class:`Exchange` list) as a manifest and
    body files named ``<stem>_<poll>_<names[host:port]>_<path>[_<topic>].json``."""
    stem = manifest.stem.removesuffix("_manifest")
    written = [manifest]
    out_polls = []
    for poll in polls:
        entries = []
        for ex in poll["exchanges"]:
            parts = urlsplit(ex.url)
            entry: dict[str, Any] = {
                "method": ex.method,
                "url": ex.url,
                "status": ex.status,
                "content_type": ex.content_type,
            }
            try:
                decoded = json.loads(ex.body)
            except ValueError:
                entry["text"] = ex.body.decode()
            else:
                query = dict(parse_qsl(parts.query))
                what = parts.path.strip("/").replace("/", "_") or "root"
                extra = "".join(f"_{query[k]}" for k in ("topic", "channel") if k in query)
                name = f"{stem}_{poll['name']}_{names.get(parts.netloc, parts.netloc)}_{what}"
                path = manifest.parent / f"{name}{extra}.json"
                path.write_text(json.dumps(decoded, indent=2) + "\n")
                entry["file"] = path.name
                written.append(path)
            entries.append(entry)
        settings = {k: v for k, v in poll.items() if k != "exchanges"}
        out_polls.append({**settings, "exchanges": entries})
    manifest.write_text(json.dumps({**meta, "polls": out_polls}, indent=2) + "\n")
    return written
