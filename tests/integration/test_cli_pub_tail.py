"""``nsqctl pub`` and ``nsqctl tail`` as a user runs them: real subprocesses (and typer's
runner) against the real original-NSQ session cluster.

Bodies are compared byte for byte; placement and admin effects are read from nsqd's
``/stats``; errors must be one line on stderr with the right exit code.
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
from functools import partial
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsqctl.cli.app import app
from nsqctl.servers import cluster, process
from nsqctl.sharding import pick_node_for_key
from nsqctl.stats import read_nsqd_stats
from nsqctl.stats.model import ChannelStats
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env, pub_process, run_cli
from tests.helpers.names import unique
from tests.helpers.wait import eventually

pytestmark = pytest.mark.original


def _nsqd(c: cluster.Cluster, index: int = 0) -> list[str]:
    return ["--nsqd", c.nsqd_tcp[index]]


def _topic_depth(http: str, topic: str) -> int:
    found = read_nsqd_stats(http, topic=topic).topic(topic)
    if found is None:
        return 0
    return found.depth + sum(ch.depth for ch in found.channels)


def _depth_reached(http: str, topic: str, depth: int) -> bool:
    return _topic_depth(http, topic) >= depth


def _channel(http: str, topic: str, channel: str) -> ChannelStats:
    found = read_nsqd_stats(http, topic=topic).channel(topic, channel)
    if found is None:
        raise AssertionError(f"no channel {channel} on {http}")
    return found


def _pipeline(cmd: str) -> subprocess.CompletedProcess[bytes]:
    """A shell pipeline as a user types it, with bash's pipefail: tail's own status counts."""
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", cmd], capture_output=True, env=clean_env(), timeout=60
    )


def test_pub_arguments_then_tail_gives_exact_bytes(original_cluster: cluster.Cluster) -> None:
    topic = unique("args")
    bodies = ["hello", "wörld ✓", "tabs\tand  spaces"]
    pub = run_cli(["pub", topic, *bodies, *_nsqd(original_cluster)])
    assert pub.returncode == 0, pub.stderr
    assert pub.stderr.decode().strip() == f"published 3 message(s) to {topic}"
    tail = run_cli(["tail", topic, "-n", "3", "-c", "c", *_nsqd(original_cluster)])
    assert tail.returncode == 0, tail.stderr
    assert sorted(tail.stdout.split(b"\n")[:-1]) == sorted(b.encode() for b in bodies)
    assert tail.stdout.endswith(b"\n")


def test_binary_files_and_multiline_bodies_round_trip(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    topic = unique("bin")
    bodies = [b"line one\nline two\n", bytes(range(256)), b"\x00\xff\r\n end"]
    files = []
    for i, body in enumerate(bodies):
        f = tmp_path / f"m{i}"
        f.write_bytes(body)
        files.append(str(f))
    pub = run_cli(["pub", topic, "--binary", *files, *_nsqd(original_cluster)])
    assert pub.returncode == 0, pub.stderr
    tail = run_cli(
        ["tail", topic, "-n", "3", "-c", "c", "--format", "json", *_nsqd(original_cluster)]
    )
    assert tail.returncode == 0, tail.stderr
    got = []
    for line in tail.stdout.decode().splitlines():
        rec = json.loads(line)
        assert rec["topic"] == topic and rec["attempts"] == 1 and len(rec["id"]) == 16
        body = rec["body"]
        got.append(base64.b64decode(body) if rec["body_encoding"] == "base64" else body.encode())
    assert sorted(got) == sorted(bodies)


def test_stdin_with_a_custom_delimiter(original_cluster: cluster.Cluster) -> None:
    topic = unique("delim")
    pub = run_cli(
        ["pub", topic, "-d", "\\x00", *_nsqd(original_cluster)],
        input=b"first\nstill first\x00second\x00",
    )
    assert pub.returncode == 0, pub.stderr
    tail = run_cli(
        ["tail", topic, "-n", "2", "-c", "c", "--format", "json", *_nsqd(original_cluster)]
    )
    got = sorted(json.loads(line)["body"] for line in tail.stdout.decode().splitlines())
    assert got == ["first\nstill first", "second"]


def test_shard_field_puts_each_key_on_one_consistent_nsqd(
    original_cluster: cluster.Cluster,
) -> None:
    topic = unique("shard")
    keys = [f"user-{i}" for i in range(12)]
    lines = [json.dumps({"user": k, "seq": n}) for n in range(5) for k in keys]
    pub = run_cli(
        ["pub", topic, "--shard-field", "user", "--lookupd", original_cluster.lookupd_http[0]],
        input="\n".join(lines).encode(),
    )
    assert pub.returncode == 0, pub.stderr
    nodes = original_cluster.nsqd_tcp
    seen: dict[str, str] = {}
    total = 0
    for tcp, http in zip(nodes, original_cluster.nsqd_http, strict=True):
        depth = _topic_depth(http, topic)
        total += depth
        if not depth:
            continue
        out = run_cli(["tail", topic, "-n", str(depth), "-c", "c", "--nsqd", tcp])
        seqs: dict[str, list[int]] = {}
        for line in out.stdout.decode().splitlines():
            rec = json.loads(line)
            assert seen.setdefault(rec["user"], tcp) == tcp, "a key landed on two nsqd"
            seqs.setdefault(rec["user"], []).append(rec["seq"])
        assert all(s == sorted(s) for s in seqs.values()), "per-key order was not kept"
    assert total == len(lines)
    assert set(seen) == set(keys)
    for key, tcp in seen.items():
        assert pick_node_for_key(key, nodes) == tcp
    assert len(set(seen.values())) == 2, "12 keys over 2 nodes should use both"


def test_tail_filters_and_count(original_cluster: cluster.Cluster) -> None:
    topic = unique("filter")
    lines = [json.dumps({"user": {"id": i % 3}, "msg": f"m{i}"}) for i in range(30)]
    run_cli(["pub", topic, *_nsqd(original_cluster)], input="\n".join(lines).encode())
    # -c c is durable: a filter acknowledges what it skips there, so it is asked for
    where = ["--discard-unmatched", *_nsqd(original_cluster)]
    out = run_cli(["tail", topic, "-n", "10", "-c", "c", "--jq-field", "user.id=1", *where])
    assert out.returncode == 0, out.stderr
    got = [json.loads(line) for line in out.stdout.decode().splitlines()]
    assert len(got) == 10 and all(r["user"]["id"] == 1 for r in got)
    topic = unique("grep")  # a new channel on the old topic would not see old messages
    run_cli(["pub", topic, *_nsqd(original_cluster)], input="\n".join(lines).encode())
    out = run_cli(["tail", topic, "-n", "2", "-c", "c", "--grep", r'"m1[0-9]"', *where])
    msgs = sorted(json.loads(line)["msg"] for line in out.stdout.decode().splitlines())
    assert len(msgs) == 2 and all(m.startswith("m1") and len(m) == 3 for m in msgs)


def test_pretty_format_and_print_topic_through_the_runner(
    original_cluster: cluster.Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NSQCTL_CONFIG", "/nonexistent/config.toml")
    topic = unique("pretty")
    runner = CliRunner()
    res = runner.invoke(app, ["pub", topic, "one", *_nsqd(original_cluster)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app, ["tail", topic, "-n", "1", "-c", "c", "--format", "pretty", *_nsqd(original_cluster)]
    )
    assert res.exit_code == 0, res.output
    head, body = res.stdout.splitlines()
    assert head.startswith(f"--- {topic} id=") and "attempts=1" in head
    assert body == "one"
    runner.invoke(app, ["pub", topic, "two", *_nsqd(original_cluster)])
    res = runner.invoke(
        app, ["tail", topic, "-n", "1", "-c", "c", "--print-topic", *_nsqd(original_cluster)]
    )
    assert res.stdout == f"{topic} | two\n"


def test_json_result_and_exit_code(original_cluster: cluster.Cluster) -> None:
    topic = unique("json")
    pub = run_cli(["pub", topic, "a", "b", "--json", *_nsqd(original_cluster)])
    assert pub.returncode == 0
    assert json.loads(pub.stdout) == {
        "topic": topic,
        "published": 2,
        "unpublished": 0,
        "skipped": 0,
        "too_large": [],
        "lines": {
            "published": [[1, 2]],
            "refused": [],
            "unconfirmed": [],
            "unsent": [],
            "sent_up_to": 2,
        },
        "error": None,
    }


def test_pub_publishes_trickling_stdin_as_it_comes(original_cluster: cluster.Cluster) -> None:
    """``tail -F log | nsqctl pub``: lines are published when they arrive, not held back
    until a full batch or the end of input."""
    topic = unique("trickle")
    http = original_cluster.nsqd_http[0]
    proc = pub_process(topic, *_nsqd(original_cluster))
    try:
        assert proc.stdin is not None
        for sent in (1, 2, 3):
            proc.stdin.write(b"line %d\n" % sent)
            proc.stdin.flush()
            eventually(partial(_depth_reached, http, topic, sent), 15, f"line {sent}", step=0.05)
            assert _topic_depth(http, topic) == sent  # published while stdin is still open
        _, err = proc.communicate(timeout=30)  # closes stdin: the end of input
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert err.decode().strip() == f"published 3 message(s) to {topic}"


def test_ctrl_c_loses_nothing(original_cluster: cluster.Cluster) -> None:
    """SIGINT while messages are in flight: every message is either printed (and FINed)
    or back in the channel; none is lost or printed twice."""
    topic, channel = unique("sigint"), "durable"
    total = 3000
    http = original_cluster.nsqd_http[0]
    run_cli(
        ["pub", topic, *_nsqd(original_cluster)], input=b"\n".join(b"m%d" % i for i in range(total))
    )
    proc = subprocess.Popen(
        [NSQCTL, "tail", topic, "-c", channel, "--max-in-flight", "50", *_nsqd(original_cluster)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
        bufsize=0,  # unbuffered: readline must not swallow lines communicate() then misses
    )
    try:
        first = proc.stdout.readline()  # type: ignore[union-attr]
        assert first.startswith(b"m")
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    printed = [first.strip(), *rest.split(b"\n")[:-1]]
    assert len(printed) == len(set(printed))
    ch = _channel(http, topic, channel)

    def settled() -> bool:  # the server settles the closed connection's in-flight messages
        nonlocal ch
        ch = _channel(http, topic, channel)
        return ch.in_flight_count == 0

    def seen() -> str:  # what a failure shows: enough to tell a lost REQ from a late FIN
        return (
            f"nothing in flight on {topic}/{channel}: {ch.in_flight_count} still in flight, "
            f"depth {ch.depth}, {ch.requeue_count} requeued, {ch.timeout_count} timed out, "
            f"{len(printed)} of {total} printed; tail's stderr: {err.decode()!r}"
        )

    # tail answered every message before it closed: nothing waits for nsqd's msg-timeout
    eventually(settled, 10, seen, step=0.05)
    assert ch.depth + len(printed) == total, seen()
    assert ch.message_count - ch.requeue_count >= len(printed), seen()


# ----------------------------------------------------------------------- errors


def test_usage_errors_exit_2_with_one_line(original_cluster: cluster.Cluster) -> None:
    nsqd = _nsqd(original_cluster)
    line = assert_one_line_error(run_cli(["pub", "bad topic!", "x", *nsqd]), 2)
    assert "topic" in line
    line = assert_one_line_error(run_cli(["pub", "t", "x"]), 2)
    assert "no cluster given" in line
    line = assert_one_line_error(run_cli(["pub", "t", "x", "--nsqd", "nohostport"]), 2)
    assert "nohostport" in line
    line = assert_one_line_error(run_cli(["tail", "t", "--format", "xml", *nsqd]), 2)
    assert "unknown --format" in line
    proc = run_cli(
        ["pub", unique("notjson"), "--shard-field", "k", *nsqd], input=b'{"k": 1}\nplain text\n'
    )
    assert "line 2 is not JSON" in assert_one_line_error(proc, 2)
    proc = run_cli(["--profile", "nope", "pub", "t", "x"])
    assert "no profile 'nope'" in assert_one_line_error(proc, 2)


def test_runtime_errors_exit_1_with_one_line(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    dead = f"127.0.0.1:{process.free_ports(1)[0]}"
    line = assert_one_line_error(run_cli(["pub", "t", "a", "b", "--nsqd", dead]), 1)
    assert "2 message(s) not published" in line
    line = assert_one_line_error(run_cli(["pub", "t", "a", "--lookupd", dead]), 1)
    assert dead in line
    big = tmp_path / "big"
    big.write_bytes(b"x" * (2 << 20))  # nsqd's default --max-msg-size is 1 MiB
    proc = run_cli(["pub", unique("big"), "--binary", str(big), *_nsqd(original_cluster)])
    line = assert_one_line_error(proc, 1)
    assert "1 message(s) not published" in line


def test_tail_into_head_ends_quietly_and_gives_back_the_rest(
    original_cluster: cluster.Cluster,
) -> None:
    """`nsqctl tail T -c C | head -n 3`: exit 141 (128 + SIGPIPE, like `yes | head` under
    pipefail), nothing on stderr, nothing left in flight, and nothing lost: what head
    read and dropped, and what was still in the pipe, is given back."""
    topic, channel = unique("pipe"), "durable"
    total = 2000
    http = original_cluster.nsqd_http[0]
    # 200 KB of lines: more than a pipe holds, so tail cannot have written them all
    # before head goes (that case is the next test's)
    lines = b"\n".join(b"m%d " % i + b"x" * 100 for i in range(total))
    run_cli(["pub", topic, *_nsqd(original_cluster)], input=lines)
    cmd = f"{NSQCTL} tail {topic} -c {channel} --nsqd {original_cluster.nsqd_tcp[0]} | head -n 3"
    proc = _pipeline(cmd)
    assert proc.stdout.count(b"\n") == 3
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == b""
    ch = _channel(http, topic, channel)
    assert ch.in_flight_count == 0
    # only what head may have printed can be gone (tail cannot tell how much of its last
    # read head printed, so it gives all of it back: those lines may come again)
    assert ch.depth >= total - 3


def test_tail_into_head_ends_when_head_goes_even_with_nothing_left_to_write(
    original_cluster: cluster.Cluster,
) -> None:
    """A quiet topic: every message fits in the pipe before `head` exits, so no write can
    fail; tail sees the reader gone (POLLERR on its stdout) and ends as above instead of
    waiting for a message that may never come. head took all five in one read and
    printed two: the three it dropped are not lost."""
    topic, channel = unique("pipe_quiet"), "durable"
    http = original_cluster.nsqd_http[0]
    run_cli(["pub", topic, *_nsqd(original_cluster)], input=b"a\nb\nc\nd\ne")
    cmd = f"{NSQCTL} tail {topic} -c {channel} --nsqd {original_cluster.nsqd_tcp[0]} | head -n 2"
    proc = _pipeline(cmd)
    assert proc.stdout == b"a\nb\n"
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == b""
    ch = _channel(http, topic, channel)
    assert ch.in_flight_count == 0 and ch.depth >= 3
    rest = run_cli(["tail", topic, "-c", channel, "-n", str(ch.depth), *_nsqd(original_cluster)])
    assert rest.returncode == 0, rest.stderr
    assert {b"c", b"d", b"e"} <= set(rest.stdout.split())


def test_tail_into_a_reader_that_stays_acknowledges_everything(
    original_cluster: cluster.Cluster,
) -> None:
    """`tail -c C -n 5 | cat`: the reader takes every line and stays, so each message is
    FINed (once cat has it), none given back, and tail exits 0."""
    topic, channel = unique("pipe_cat"), "durable"
    http = original_cluster.nsqd_http[0]
    run_cli(["pub", topic, *_nsqd(original_cluster)], input=b"a\nb\nc\nd\ne")
    cmd = f"{NSQCTL} tail {topic} -c {channel} -n 5 --nsqd {original_cluster.nsqd_tcp[0]} | cat"
    proc = _pipeline(cmd)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == [b"a", b"b", b"c", b"d", b"e"]
    assert proc.stderr == b""
    ch = _channel(http, topic, channel)
    assert (ch.depth, ch.in_flight_count, ch.requeue_count) == (0, 0, 0)


def test_deferred_publish_counts_each_message(original_cluster: cluster.Cluster) -> None:
    topic = unique("defer")
    pub = run_cli(
        ["pub", topic, "--defer", "50", "--json", "a", "b", "c", *_nsqd(original_cluster)]
    )
    assert pub.returncode == 0, pub.stderr
    assert json.loads(pub.stdout)["published"] == 3
    tail = run_cli(["tail", topic, "-n", "3", "-c", "c", *_nsqd(original_cluster)])
    assert sorted(tail.stdout.split()) == [b"a", b"b", b"c"]
    dead = f"127.0.0.1:{process.free_ports(1)[0]}"
    line = assert_one_line_error(
        run_cli(["pub", topic, "--defer", "50", "x", "y", "--nsqd", dead]), 1
    )
    assert "2 message(s) not published (0 were)" in line


def test_a_defer_nsqd_refuses_is_said_refused_not_unconfirmed(
    original_cluster: cluster.Cluster,
) -> None:
    """nsqd answers a DPUB delay beyond its --max-req-timeout (1 h by default) with
    E_INVALID before storing anything: the line is refused, not "sent but not
    confirmed" (which would have the operator fear a duplicate on a retry)."""
    topic = unique("defer_refused")
    proc = run_cli(["pub", topic, "--defer", "3600001", "x", "y", *_nsqd(original_cluster)])
    line = assert_one_line_error(proc, 1)
    assert "DPUB timeout 3600001 out of range" in line, line
    assert line.endswith(
        "(no input line was published; line(s) 1 were refused by nsqd (not stored); "
        "nothing after line 1 was sent)"
    ), line


def test_trace_log_on_a_full_disk_stops_with_one_line_and_loses_nothing(
    original_cluster: cluster.Cluster,
) -> None:
    """`--trace-log /dev/full`: the write fails with ENOSPC. tail says so in one line
    (naming the file and the cause), exits 1, prints no body twice, and leaves nothing
    in flight: what it printed is acknowledged once, the rest given back."""
    topic, channel = unique("trace_full"), "durable"
    http = original_cluster.nsqd_http[0]
    run_cli(["pub", topic, *_nsqd(original_cluster)], input=b"a\nb\nc")
    stop = ["-e", *_nsqd(original_cluster), "--nsqd-http", http]
    proc = run_cli(["tail", topic, "-c", channel, "--trace-log", "/dev/full", *stop])
    line = assert_one_line_error(proc, 1)
    assert "/dev/full" in line and "No space left on device" in line, line
    printed = proc.stdout.split()
    assert len(printed) == len(set(printed)) and set(printed) <= {b"a", b"b", b"c"}
    ch = _channel(http, topic, channel)
    assert ch.in_flight_count == 0
    assert ch.depth == 3 - len(printed)


def test_a_partition_on_the_original_family_is_refused(original_cluster: cluster.Cluster) -> None:
    """The original family has no partitions: `--partition 0` matched nothing and tail
    waited in silence for ever; the lookup shows the family, so it is refused up front."""
    topic = unique("part")
    run_cli(["pub", topic, "x", *_nsqd(original_cluster)])
    proc = run_cli(
        [
            "tail",
            topic,
            "--partition",
            "0",
            "-n",
            "1",
            "--lookupd",
            original_cluster.lookupd_http[0],
        ],
        timeout=30,
    )
    line = assert_one_line_error(proc, 2)
    assert "no partitions" in line and "--partition" in line, line


def test_until_empty_names_an_nsqd_http_address_that_does_not_answer(
    original_cluster: cluster.Cluster,
) -> None:
    """`tail -e` with one --nsqd-http address down: once everything was printed, tail
    waits --connect-timeout for that nsqd, then exits 1 naming it (it waited in silence
    for ever)."""
    topic, channel = unique("down_http"), "durable"
    http = original_cluster.nsqd_http[0]
    run_cli(["pub", topic, *_nsqd(original_cluster)], input=b"a\nb")
    down = "127.0.0.1:1"  # nothing listens on port 1
    stats = ["--nsqd-http", http, "--nsqd-http", down, "--connect-timeout", "1"]
    proc = run_cli(
        ["tail", topic, "-c", channel, "-e", *_nsqd(original_cluster), *stats], timeout=30
    )
    line = assert_one_line_error(proc, 1)
    assert down in line and "/stats" in line, line
    assert sorted(proc.stdout.split()) == [b"a", b"b"]
    ch = _channel(http, topic, channel)
    assert (ch.depth, ch.in_flight_count) == (0, 0)


def test_stdout_on_a_full_disk_stops_with_one_line_and_acknowledges_nothing(
    original_cluster: cluster.Cluster,
) -> None:
    """`tail > /dev/full`: every write to standard output fails with ENOSPC. tail says so
    in one line and exits 1 (it ended in a traceback, after failing the handler of each
    message it could not print), and FINs nothing: all of it is back on the channel."""
    topic, channel = unique("stdout_full"), "durable"
    http = original_cluster.nsqd_http[0]
    run_cli(["pub", topic, *_nsqd(original_cluster)], input=b"a\nb\nc")
    tail = ["tail", topic, "-c", channel, "-e", *_nsqd(original_cluster), "--nsqd-http", http]
    proc = run_cli(tail, stdout=Path("/dev/full"))
    line = assert_one_line_error(proc, 1)
    assert "standard output" in line and "No space left on device" in line, line

    def untouched() -> bool:
        ch = _channel(http, topic, channel)
        return (ch.depth, ch.in_flight_count, ch.timeout_count) == (3, 0, 0)

    eventually(untouched, 30, "every message back on the channel, none in flight")
