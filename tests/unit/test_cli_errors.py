"""The CLI's wording of library errors: the setting an error names becomes a flag."""

from __future__ import annotations

import pytest

from nsqctl.cli.wording import SETTING_FLAGS, cli_message
from nsqctl.errors import ConfigError, FailoverTimeoutError, NsqctlError
from tests.helpers.cli import assert_one_line_error, run_main


def test_a_named_setting_gains_its_flag() -> None:
    err = FailoverTimeoutError("no leader for t/0 within 180s", 0, setting="failover_window")
    assert cli_message(err) == "no leader for t/0 within 180s (flag: --failover-window SECONDS)"


def test_no_setting_or_an_unknown_one_leaves_the_message_alone() -> None:
    assert cli_message(NsqctlError("plain")) == "plain"
    assert cli_message(NsqctlError("odd", setting="no_such_setting")) == "odd"


def test_a_message_that_already_names_the_flag_is_not_repeated() -> None:
    err = NsqctlError("pass --partition 0..3", setting="partition")
    assert cli_message(err) == "pass --partition 0..3"


def test_every_flag_is_one_the_cli_has() -> None:
    from nsqctl.cli.app import root_command

    flags: set[str] = set()

    def walk(cmd: object) -> None:
        for param in getattr(cmd, "params", []):
            flags.update(o for o in param.opts if o.startswith("--"))
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(root_command())
    for setting, advice in SETTING_FLAGS.items():
        words = advice.replace("/", " ").replace(";", " ").replace("`", " ").split()
        named = [w for w in words if w.startswith("--")]
        assert named, setting
        assert set(named) <= flags, (setting, set(named) - flags)


def test_a_start_position_without_the_redesign_is_not_told_of_ordered_channels() -> None:
    """The original family has no history and no ordered channels: the hint for a start
    position names the flags that give one, nothing about setoffset or --ordered."""
    err = ConfigError(
        "nsqd 127.0.0.1:4150 is an original NSQ server: an ordered subscription and a start "
        "position need the redesign",
        setting="start",
    )
    hint = cli_message(err).rpartition("(flag: ")[2]
    assert hint == "--from-start/--from-time/--from-offset)"


def test_an_ordered_tail_with_a_start_says_how_in_the_clis_words() -> None:
    proc = run_main("tail", "t", "--ordered", "--from-time", "0", "--nsqd", "127.0.0.1:1")
    line = assert_one_line_error(proc, 2)
    assert "ordered subscriptions take no start position" in line, line
    assert "`nsqctl channel setoffset TOPIC CHANNEL --partition P`" in line, line
    assert line.endswith("(flag: --from-start/--from-time/--from-offset)"), line


def test_a_flag_the_failing_command_lacks_is_not_advised() -> None:
    """The library names one setting whichever command runs it: a publish that times out
    in its handshake names `connect_timeout`, and ``pub`` has no --connect-timeout (only
    ``tail`` has), so the advice is left out rather than naming a flag pub refuses."""
    err = NsqctlError("nsqd did not finish the handshake", setting="connect_timeout")
    assert cli_message(err, {"--nsqd", "--batch"}) == "nsqd did not finish the handshake"
    assert cli_message(err, {"--connect-timeout"}).endswith("(flag: --connect-timeout SECONDS)")
    assert cli_message(err).endswith("(flag: --connect-timeout SECONDS)")  # command unknown
    ranged = NsqctlError("no such offset", setting="offset")  # --from-offset/--from-time
    assert cli_message(ranged, {"--from-time"}).endswith("(flag: --from-offset/--from-time)")


def test_the_options_of_the_command_that_failed_are_found() -> None:
    from nsqctl.cli.app import failed_command_options, root_command

    with pytest.raises(NsqctlError) as caught:
        root_command().main(
            ["pub", "--shard", "k", "--shard-field", "f", "t", "x"], standalone_mode=False
        )
    options = failed_command_options(caught.value)
    assert options is not None
    assert {"--failover-window", "--batch", "--tls-key"} <= options
    assert "--connect-timeout" not in options
    assert failed_command_options(NsqctlError("raised by no command")) is None


def test_a_defer_dpub_cannot_carry_is_refused_as_the_flag_before_anything_is_sent() -> None:
    """Before, the library's encoder refused it as the first message went out, in its own
    words (`defer_ms`), and pub counted that line as sent but not confirmed."""
    proc = run_main("pub", "--defer", "999999999999", "--nsqd", "127.0.0.1:1", "t", "x")
    line = assert_one_line_error(proc, 2)
    assert "'--defer'" in line and "999999999999" in line, line
    assert "sent" not in line and "defer_ms" not in line, line


@pytest.mark.parametrize("off", ["0", "false", "off"])
def test_nsqctl_debug_set_off_keeps_the_one_line_error(
    off: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NSQCTL_DEBUG=0 is off, as --debug reads it: any value at all used to turn on
    tracebacks for the errors nsqctl raises on purpose."""
    monkeypatch.setenv("NSQCTL_DEBUG", off)
    monkeypatch.setenv("NSQCTL_LOG", "loud")
    line = assert_one_line_error(run_main("version", "--client"), 2)
    assert "NSQCTL_LOG='loud' is not a log level" in line, line
