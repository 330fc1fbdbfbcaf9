"""Nothing reachable: every command that talks to a cluster ends with one line and exit 1,
instead of retrying forever (a wrong address in a script must not hang it)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.helpers.cli import run_cli


def _closed_port() -> str:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


DEAD = _closed_port()

COMMANDS = {
    "tail via nsqd": ["tail", "t", "--nsqd", DEAD, "-n", "1", "--connect-timeout", "1"],
    "tail via lookupd": ["tail", "t", "--lookupd", DEAD, "-n", "1"],
    "tail, default deadline": ["tail", "t", "--nsqd", DEAD, "-n", "1"],
    "pub via nsqd": ["pub", "t", "x", "--nsqd", DEAD],
    "pub via lookupd": ["pub", "t", "x", "--lookupd", DEAD],
    "lookup": ["lookup", "t", "--lookupd", DEAD],
    "topic list": ["topic", "list", "--lookupd", DEAD],
    "channel list": ["channel", "list", "t", "--lookupd", DEAD],
    "stat via lookupd": ["stat", "--lookupd", DEAD, "-n", "1"],
    "stat via nsqd": ["stat", "--nsqd-http", DEAD, "-n", "1"],
}


@pytest.mark.parametrize("args", COMMANDS.values(), ids=COMMANDS.keys())
def test_unreachable_cluster_is_one_line_and_exit_1(args: list[str]) -> None:
    # The subprocess timeout is only a hang guard: a command that retried forever fails here.
    proc = run_cli(args, timeout=60)
    err = proc.stderr.decode()
    assert proc.returncode == 1, (proc.returncode, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("nsqctl: error: "), err
    assert DEAD in lines[0] and "Traceback" not in err
    if args[0] == "pub":  # it reached no nsqd: nothing can be stored, so it is not "sent"
        assert "nothing was sent" in lines[0] and "not confirmed" not in lines[0]


@pytest.mark.spark
def test_archive_with_no_reachable_nsqd_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "archive"
    proc = run_cli(["archive", "t", "--nsqd", DEAD, "--out", str(out)], timeout=60)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and DEAD in lines[0] and "Traceback" not in err, err
    assert not any(out.rglob("*.parquet"))


async def test_library_consumer_fails_fast_at_start_unless_told_to_wait() -> None:
    from nsqctl.consumer import Consumer, ConsumerOptions
    from nsqctl.errors import NoConnectionError, NsqctlTimeoutError

    consumer = Consumer(
        "t", "c", lambda m: None, nsqd_tcp=[DEAD], options=ConsumerOptions(connect_timeout=0.5)
    )
    with pytest.raises(NoConnectionError, match=f"no nsqd of topic 't' reachable.*{DEAD}") as info:
        await consumer.start()
    assert not isinstance(info.value, NsqctlTimeoutError)  # refused: not a deadline passed
    patient = Consumer(
        "t", "c", lambda m: None, nsqd_tcp=[DEAD], options=ConsumerOptions(connect_timeout=None)
    )
    await patient.start()  # returns and keeps retrying in the background
    assert patient.connections == {}
    await patient.stop()
