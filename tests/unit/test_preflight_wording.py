"""How a refused admin action names the nsqds that did not answer: one form, "nsqd
ADDRESS (why)", whether the reason came from the /ping asked before the plan or from
the /stats read that found the topic (whose reasons name the nsqd themselves)."""

from __future__ import annotations

import asyncio

import pytest

from nsqctl.admin.preflight import check_nsqds_answer
from nsqctl.admin.requests import admin_client
from nsqctl.errors import AdminError


async def _refusal(unreadable: list[tuple[str, str]]) -> str:
    async with admin_client() as client:
        with pytest.raises(AdminError) as caught:
            await check_nsqds_answer(client, "topic pause t", [], unreadable)
    return str(caught.value)


def test_an_nsqd_the_stats_read_could_not_reach_is_named_once_with_its_reason() -> None:
    reason = "nsqd 127.0.0.1:4151 /stats: connection refused or host unreachable"
    text = asyncio.run(_refusal([("127.0.0.1:4151", reason)]))
    assert text == (
        "topic pause t refused, nothing was changed: nsqd 127.0.0.1:4151 (/stats: "
        "connection refused or host unreachable) did not answer, so it would change on "
        "the other nsqds only; run it again once every nsqd answers"
    )
