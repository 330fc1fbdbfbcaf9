"""One admin request, its per-node result and the command's report, and the code that
sends requests in stages (:func:`execute`): the HTTP layer every operation goes
through."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlencode

import httpx

from nsqctl.admin.base import NSQ_V1, TIMEOUT
from nsqctl.errors import AdminError
from nsqctl.httpclient import describe_http_error, http_client
from nsqctl.protocol.raw_message import Family

_NOT_FOUND = ("TOPIC_NOT_FOUND", "CHANNEL_NOT_FOUND", "E_TOPIC_NOT_EXIST", "NOT EXIST")


@dataclass(frozen=True)
class Node:
    """One server an admin request goes to; ``partition`` only on the redesign."""

    address: str
    role: Literal["nsqd", "lookupd"]
    partition: int | None = None

    def __str__(self) -> str:
        where = f"{self.role} {self.address}"
        return where if self.partition is None else f"{where} (partition {self.partition})"


@dataclass(frozen=True)
class AdminRequest:
    """One POST; ``params`` keep their order so URLs are stable for tests and output."""

    node: Node
    path: str
    params: tuple[tuple[str, str], ...]
    body: bytes | None = None

    @property
    def target(self) -> str:
        return f"{self.path}?{urlencode(self.params, safe='*')}" if self.params else self.path

    @property
    def url(self) -> str:
        return f"http://{self.node.address}{self.target}"

    def describe(self) -> str:
        body = f" body={self.body.decode(errors='replace')!r}" if self.body else ""
        return f"POST {self.target}{body}"


Outcome = Literal["ok", "skipped", "failed"]


@dataclass
class NodeResult:
    """What one request did; ``skipped`` is a not-found on some nodes while others worked."""

    request: AdminRequest
    outcome: Outcome
    status: int | None = None
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        node = self.request.node
        return {
            "node": node.address,
            "role": node.role,
            "partition": node.partition,
            "request": self.request.describe(),
            "outcome": self.outcome,
            "status": self.status,
            "error": self.error or None,
        }


@dataclass
class AdminReport:
    """Per-node results of one command, plus warnings that did not fail it."""

    action: str
    topic: str
    family: Family | None
    channel: str | None = None
    results: list[NodeResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[NodeResult]:
        return [r for r in self.results if r.outcome == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "topic": self.topic,
            "channel": self.channel,
            "family": self.family,
            "ok": self.ok,
            "results": [r.to_json() for r in self.results],
            "warnings": self.warnings,
            "notes": self.notes,
        }

    def raise_for_failures(self) -> None:
        """One line naming every failed node, for the CLI's exit status."""
        bad = self.failures
        if bad:
            what = "; ".join(f"{r.request.node} ({r.error})" for r in bad)
            raise AdminError(
                f"{self.action} failed on {len(bad)} of {len(self.results)} request(s): {what}"
            )


def error_text(resp: httpx.Response) -> str:
    """The server's reason: v1 ``{"message"}``, wrapped ``status_txt`` or plain text."""
    text = resp.text.strip()
    with contextlib.suppress(ValueError):
        body = resp.json()
        if isinstance(body, dict):
            text = str(body.get("message") or body.get("status_txt") or text)
    hint = ""
    if resp.status_code in (401, 403):
        hint = " (permission denied: check TLS/auth settings and the server's access rules)"
    elif "NOT_LEADER" in text.upper():
        hint = " (the partition leader moved: run the command again)"
    return f"HTTP {resp.status_code} {text[:200]}".rstrip() + hint


def _is_not_found(resp: httpx.Response) -> bool:
    return resp.status_code == 404 and any(t in resp.text.upper() for t in _NOT_FOUND)


#: Seconds a redesign partition leader may take to answer a change (youzan's leader has
#: every ISR member apply it first, and retries one that does not answer for up to 10 s
#: before it asks nsqlookupd to drop it from the ISR and answers): longer than that, so a
#: change made while an in-sync copy is down is reported as made, not as timed out.
ISR_SYNC_TIMEOUT = 30.0


def _timeout(req: AdminRequest) -> float:
    synced = req.node.role == "nsqd" and req.node.partition is not None
    return ISR_SYNC_TIMEOUT if synced else TIMEOUT


async def send_request(
    client: httpx.AsyncClient, req: AdminRequest, timeout: float | None = None
) -> tuple[NodeResult, bool]:
    """Run one request (``timeout``: the node's own unless given); the flag marks a
    not-found that may become ``skipped``."""
    timeout = _timeout(req) if timeout is None else timeout
    try:
        resp = await client.post(req.url, content=req.body, headers=NSQ_V1, timeout=timeout)
    except httpx.ReadTimeout:
        # sent: a server that is hung (or slow) may still apply it once it runs again
        why = f"sent, but no answer within {timeout:.0f}s: it may have been applied or not"
        return NodeResult(req, "failed", None, why), False
    except httpx.HTTPError as err:
        return NodeResult(
            req, "failed", None, f"cannot reach it: {describe_http_error(err)}"
        ), False
    if resp.status_code == 200:
        return NodeResult(req, "ok", 200), False
    return NodeResult(req, "failed", resp.status_code, error_text(resp)), _is_not_found(resp)


async def execute(
    stages: Sequence[Sequence[AdminRequest]], client: httpx.AsyncClient
) -> list[NodeResult]:
    """Run each stage's requests concurrently, stages in order (nsqadmin's delete order).

    A not-found on an nsqd counts as ``skipped`` when another nsqd did the job (that node
    never had the topic/channel); when no nsqd succeeded it stays a failure.
    """
    results: list[NodeResult] = []
    maybe_skip: list[NodeResult] = []
    for stage in stages:
        done = await asyncio.gather(*(send_request(client, r) for r in stage))
        for result, not_found in done:
            results.append(result)
            if not_found and result.request.node.role == "nsqd":
                maybe_skip.append(result)
    if any(r.outcome == "ok" and r.request.node.role == "nsqd" for r in results):
        for result in maybe_skip:
            result.outcome = "skipped"
    return results


def admin_client(transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    """The HTTP client every admin operation sends through: the v1 header and the admin
    timeout; ``transport`` lets tests answer for the servers."""
    return http_client(timeout=TIMEOUT, headers=NSQ_V1, transport=transport)


async def unanswered(
    client: httpx.AsyncClient,
    address: str,
    *,
    timeout: float | None = None,
    any_answer: bool = False,
) -> str | None:
    """Why the server at ``address`` does not answer ``/ping`` (in words), or None when it
    answers: with 200, or with ``any_answer`` with anything at all. ``any_answer`` asks
    whether something is there rather than whether it serves: an nsqd's TCP port, given
    instead of its HTTP port, answers HTTP with a protocol error, so only a refused
    connection or no answer in time mean nothing is there. ``timeout``: seconds, else the
    client's."""
    try:
        resp = await client.get(
            f"http://{address}/ping",
            timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
        )
    except (httpx.ConnectError, httpx.TimeoutException) as err:
        return describe_http_error(err)
    except httpx.HTTPError as err:
        return None if any_answer else describe_http_error(err)
    return None if any_answer or resp.status_code == 200 else f"HTTP {resp.status_code} to /ping"
