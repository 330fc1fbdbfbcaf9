"""``peek --borrow`` stopped by an nsqd that does not answer /stats (hung: a stopped
process, its sockets open and silent) before anything is taken: the one line says that
nothing was borrowed and how to go on, in the CLI's flags. The wording alone is tested:
a hung nsqd would need a private cluster to stop, for one sentence."""

from __future__ import annotations

from nsqctl.cli.wording import cli_words
from nsqctl.peek import nothing_borrowed


def test_a_silent_nsqd_stops_the_borrow_saying_nothing_was_borrowed() -> None:
    line = cli_words(nothing_borrowed("nsqd 127.0.0.1:4151 /stats: timed out"))
    assert line.startswith("nsqd 127.0.0.1:4151 /stats: timed out: nothing was borrowed; ")
    assert "run it again when it answers" in line
    assert "(--nsqd and --nsqd-http, without --lookupd)" in line, line
