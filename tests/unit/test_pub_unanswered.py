"""How ``pub`` accounts for lines whose batch got no OK: never sent, or maybe stored
(:func:`nsqctl.cli.commands.pub.unanswered`), from what the library's error says."""

from __future__ import annotations

import asyncio

import pytest

from nsqctl.cli.commands.pub import unanswered
from nsqctl.cli.commands.pub_lines import LineLedger
from nsqctl.errors import ConfigError, NsqctlError, PublishError


def _error(kind: type[NsqctlError], unsent: bool | None) -> NsqctlError:
    err = kind("no answer")
    err.unsent = unsent
    return err


@pytest.mark.parametrize(
    ("error", "sent"),
    [
        # the retry loop ends with a ConfigError (no given nsqd leads the partition)
        # after an earlier attempt wrote the PUB: it may be stored
        (_error(ConfigError, False), True),
        (_error(ConfigError, None), False),  # bad input refused before writing
        (_error(ConfigError, True), False),
        (_error(PublishError, True), False),
        (_error(PublishError, False), True),
        (_error(PublishError, None), True),  # not said: maybe stored
        (asyncio.CancelledError(), True),
        (None, True),
    ],
    ids=[
        "config-sent",
        "config-unsaid",
        "config-unsent",
        "publish-unsent",
        "publish-sent",
        "publish-unsaid",
        "cancelled",
        "no-error",
    ],
)
def test_lines_are_called_unsent_only_when_nothing_can_have_been_stored(
    error: BaseException | None, sent: bool
) -> None:
    ledger = LineLedger()
    ledger.launched([(1, 3)])
    unanswered(ledger, [(1, 3)], error)
    assert ledger.published() == []
    text = ledger.describe(stopped=True)
    if sent:
        assert "line(s) 1-3 were sent but not confirmed" in text
    else:
        assert text == "no input line was published; nothing was sent"
