"""``nsqctl dash --serve``: the dashboard served to a real browser (the system's Chromium,
driven by Playwright), against the session cluster, and what guards the server: the rule
"beyond loopback needs a token" (checked before anything binds), the token on every request
(query, bearer header or the cookie the first page sets), Origin and, without a token,
Host. Only loopback addresses are used: a token given on loopback turns token mode on."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, WebSocket, sync_playwright

from nsqctl.servers import cluster
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env, run_main
from tests.helpers.redesign import TopicSpec, create_topics, unique
from tests.helpers.wait import eventually

CHROMIUM = "/usr/bin/chromium"


@contextmanager
def served(*args: str, token: str | None = None) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``nsqctl dash --serve ARGS`` running, and the base URL its start line gives."""
    env = clean_env({"NSQCTL_DASH_TOKEN": token} if token else None)
    proc = subprocess.Popen(
        [NSQCTL, "dash", "--serve", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # written once the port is bound
        if not line.startswith("nsqctl dash: serving on http://"):
            ended = proc.poll() is not None and proc.stderr is not None
            said = proc.stderr.read() if ended and proc.stderr is not None else "still running"
            raise AssertionError((line, said))
        yield proc, line
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def base_of(line: str) -> str:
    url = line.split("serving on ", 1)[1].split()[0]
    return url.split("?", 1)[0].rstrip("/")


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("bind", ["0.0.0.0:8080", "10.1.2.3:8080", "dash.example:8080"])
def test_beyond_loopback_without_token_refused_before_binding(
    bind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused with exit 2 and one line before the cluster is even resolved: none is given,
    so a command that went on to bind would have failed on the missing cluster instead."""
    monkeypatch.delenv("NSQCTL_DASH_TOKEN", raising=False)
    proc = run_main("dash", "--serve", bind)
    assert_one_line_error(proc, 2)
    assert "needs a token" in proc.stderr and "NSQCTL_DASH_TOKEN" in proc.stderr


def test_short_token_and_bad_address_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NSQCTL_DASH_TOKEN", "short")
    proc = run_main("dash", "--serve", "127.0.0.1:0", "--lookupd", "127.0.0.1:1")
    monkeypatch.delenv("NSQCTL_DASH_TOKEN")
    assert_one_line_error(proc, 2)
    assert "shorter than 16" in proc.stderr
    proc = run_main("dash", "--serve", "127.0.0.1:http")
    assert_one_line_error(proc, 2)
    assert "port" in proc.stderr
    proc = run_main("dash", "--allow-actions", "--lookupd", "127.0.0.1:1")
    assert_one_line_error(proc, 2)
    assert "--serve" in proc.stderr


def test_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "textual_serve", None)  # as if not installed
    proc = run_main("dash", "--serve", "0", "--lookupd", "127.0.0.1:1")
    assert_one_line_error(proc, 1)
    assert "pip install 'nsqctl[serve]'" in proc.stderr


def test_loopback_without_token_answers_its_own_names_only(
    original_cluster: cluster.Cluster,
) -> None:
    """No token: a page on a DNS name rebound to 127.0.0.1 (its Host) or another site's page
    (its Origin) is refused; the server's own loopback address is served, its websocket URL
    wss:// behind a TLS-terminating proxy."""
    lookupd = original_cluster.lookupd_http[0]
    with served("127.0.0.1:0", "--lookupd", lookupd, "--allow-actions") as (_, line):
        base = base_of(line)
        assert line.rstrip().endswith("(actions allowed; Ctrl+C stops)") and "token" not in line
        port = base.rsplit(":", 1)[1]
        assert httpx.get(base + "/").status_code == 200
        assert httpx.get(base + "/", headers={"Host": f"localhost:{port}"}).status_code == 200
        rebound = httpx.get(base + "/", headers={"Host": f"evil.example:{port}"})
        assert rebound.status_code == 403
        other_site = httpx.get(base + "/", headers={"Origin": "http://evil.example"})
        assert other_site.status_code == 403
        behind_tls = httpx.get(base + "/", headers={"X-Forwarded-Proto": "https"}).text
        assert f'"wss://127.0.0.1:{port}/ws"' in behind_tls
        assert f'"ws://127.0.0.1:{port}/ws"' in httpx.get(base + "/").text


def test_browser_shows_topics_with_the_token_read_only(original_cluster: cluster.Cluster) -> None:
    """One server in token mode (a token given on loopback): requests without it are
    refused; Chromium opened on the start line's URL (token filled in) connects, the
    served topics screen lists a topic this test created, and pausing its channel is
    refused (read-only). The token is in no process title nor any session's environment."""
    c = original_cluster
    topic = unique("served")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1)}, ["readers"]))
    token = secrets.token_urlsafe(24)
    with served("127.0.0.1:0", "--lookupd", c.lookupd_http[0], token=token) as (proc, line):
        assert "?token=$NSQCTL_DASH_TOKEN" in line and token not in line
        assert "(read-only;" in line
        base = base_of(line)
        assert httpx.get(base + "/").status_code == 401
        assert httpx.get(base + "/ws").status_code == 401
        assert httpx.get(base + "/static/js/textual.js").status_code == 401
        assert httpx.get(base + "/", params={"token": token[:-1] + "x"}).status_code == 403
        bearer = {"Authorization": f"Bearer {token}"}
        assert httpx.get(base + "/", headers=bearer).status_code == 200
        foreign = {**bearer, "Origin": "http://evil.example"}
        assert httpx.get(base + "/", headers=foreign).status_code == 403

        frames: list[bytes] = []

        def watch(ws: WebSocket) -> None:
            ws.on(
                "framereceived",
                lambda payload: frames.append(
                    payload if isinstance(payload, bytes) else payload.encode()
                ),
            )

        def screen_shows(text: str, since: int = 0) -> bool:
            return text.encode() in b"".join(frames[since:])

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM)
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 900})
                page.on("websocket", watch)
                page.goto(f"{base}/?token={token}", wait_until="domcontentloaded")
                page.wait_for_selector("body.-first-byte", timeout=30_000)
                # the shared cluster may hold more topics than the screen has rows: the
                # topics screen is known by its title here, the test's topic by filtering
                # to it and opening it below
                wait_until(page, lambda: screen_shows("topics (sort:"), "the topics screen")

                sessions = children_of(proc.pid)
                assert sessions, "no dashboard process runs for the browser session"
                for pid in [proc.pid, *sessions]:
                    assert token.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
                for pid in sessions:  # the server's own holds it: it was started with it
                    assert token.encode() not in Path(f"/proc/{pid}/environ").read_bytes()

                # open the topic (filtered to it), then ask to pause its channel; each key
                # waits for the screen to show the one before took (focus moves after it)
                page.click("#terminal")
                mark = len(frames)
                page.keyboard.press("/")
                wait_until(page, lambda: screen_shows("ilter topics", mark), "the filter box")
                page.keyboard.type(topic)
                wait_until(page, lambda: screen_shows(f"filter: '{topic}'"), "the filter")
                mark = len(frames)
                page.keyboard.press("Enter")  # leaves the box for the (filtered) table
                wait_until(page, lambda: screen_shows("pause/unpause ch", mark), "table keys")
                mark = len(frames)
                page.keyboard.press("Enter")  # opens the one topic listed: the test's
                wait_until(page, lambda: screen_shows("readers", mark), "the topic's channel")
                assert screen_shows(topic, mark)
                before = len(frames)
                page.keyboard.press("p")
                wait_until(
                    page,
                    lambda: screen_shows("read-only (from --serve without", before),
                    "the refusal",
                )
                assert not screen_shows("Really", before)
            finally:
                browser.close()
    stats = httpx.get(f"http://{c.nsqd_http[0]}/stats", params={"format": "json"}).json()
    [shown] = [t for t in stats["topics"] if t["topic_name"] == topic]
    assert not shown["channels"][0]["paused"]


def wait_until(page: Page, predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Poll ``predicate`` while Playwright runs: the frames arrive through its calls, so the
    pause between polls is Playwright's own wait, never a sleep that would block them."""
    eventually(predicate, timeout, what, step=0.05, pause=lambda s: page.wait_for_timeout(s * 1000))
