"""``nsqctl topic update`` says a change was accepted only when it was, on real youzan
servers (the session cluster)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import typer

from nsqctl.cli import admin_actions
from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import run_main
from tests.helpers.redesign import TopicSpec, create_topics, unique

ACCEPTED = "reported as accepted"


def test_the_accepted_note_comes_only_with_an_accepted_update(
    redesign_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    lookupd = redesign_cluster.lookupd_http[0]
    kept, text, as_json = unique("upd-kept"), unique("upd-text"), unique("upd-json")
    asyncio.run(create_topics([lookupd], {t: TopicSpec(1) for t in (kept, text, as_json)}))
    gone = [text]  # the topic the run under way updates
    update = ("topic", "update", "--sync-every", "100", "--wait", "5", "--lookupd", lookupd)
    done = run_main(*update[:2], kept, *update[2:], "--yes")
    assert done.returncode == 0, done
    assert f"note: {ACCEPTED}" not in done.stdout  # the note is one sentence, not its head
    assert ACCEPTED in done.stdout

    def deleted_meanwhile(*_: Any, **__: Any) -> bool:
        """The operator says yes after another deleted the topic: the update was planned
        on a topic nsqlookupd no longer has, and nsqlookupd refuses it when sent."""
        httpx.post(
            f"http://{lookupd}/topic/delete", params={"topic": gone[0], "partition": "**"}
        ).raise_for_status()
        return True

    monkeypatch.setattr(admin_actions, "stdin_is_tty", lambda: True)
    monkeypatch.setattr(typer, "confirm", deleted_meanwhile)
    for topic, flags in ((text, ()), (as_json, ("--json",))):
        gone[0] = topic
        refused = run_main(*update[:2], topic, *update[2:], *flags)
        assert refused.returncode == 1, refused
        errors = [line for line in refused.stderr.splitlines() if "error" in line]
        assert len(errors) == 1 and errors[0].startswith("nsqctl: error: topic update failed")
        assert ACCEPTED not in refused.stdout + refused.stderr
        if flags:
            report = json.loads(refused.stdout)
            assert report["ok"] is False and report["notes"] == []
