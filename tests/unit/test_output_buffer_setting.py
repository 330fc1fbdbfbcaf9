"""The consumers' output-buffer setting: its one reading, and how flag, environment and
profile carry it to the IDENTIFY a consumer's connections send."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsqctl.cli import flags
from nsqctl.cli.app import app
from nsqctl.cli.flags import resolve_cluster
from nsqctl.errors import ConfigError
from nsqctl.profiles import Profile, load_config, save_profile
from nsqctl.protocol.output_buffer import output_buffer_fields, parse_output_buffer
from tests.helpers.cli import assert_one_line_error, clean_env, run_cli

NSQD = ["127.0.0.1:4150"]
DURABLE = "archive"
EPHEMERAL = "look#ephemeral"


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config file whose default profile sets nothing about buffering, a clean
    environment and no global flags."""
    for var in ("NSQCTL_LOOKUPD", "NSQCTL_NSQD", "NSQCTL_PROFILE", flags.OUTPUT_BUFFER_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(flags, "GLOBAL_FLAGS", flags.SecurityFlags())
    path = tmp_path / "config.toml"
    path.write_text('default_profile = "prod"\n[profiles.prod]\nnsqd = ["127.0.0.1:4150"]\n')
    monkeypatch.setenv("NSQCTL_CONFIG", str(path))
    return path


def identify(channel: str) -> dict[str, object]:
    return resolve_cluster(None, NSQD).consumer_config(channel).identify_body()


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("auto", "auto"),
        (" NONE ", "none"),
        ("100ms", "100ms"),
        ("1s", "1000ms"),
        ("1.5s", "1500ms"),
    ],
)
def test_values_read_to_one_spelling(text: str, normal: str) -> None:
    assert parse_output_buffer(text) == normal


@pytest.mark.parametrize("text", ["bogus", "", "0ms", "0.5ms", "-1", "100", "5m", "1e3ms"])
def test_bad_values_say_what_to_give(text: str) -> None:
    with pytest.raises(ConfigError, match=r"use auto, none \(unbuffered\) or a duration"):
        parse_output_buffer(text)


def test_fields_per_value_and_channel() -> None:
    assert output_buffer_fields("auto", durable=True) == {
        "output_buffer_size": -1,
        "output_buffer_original_only": True,
    }
    assert output_buffer_fields("auto", durable=False) == {}
    assert output_buffer_fields("none", durable=False) == {"output_buffer_size": -1}
    assert output_buffer_fields("250ms", durable=True) == {"output_buffer_timeout_ms": 250}


def test_default_unbuffers_durable_channels_only(cfg: Path) -> None:
    body = identify(DURABLE)
    assert body["output_buffer_size"] == -1 and "output_buffer_timeout" not in body
    body = identify(EPHEMERAL)
    assert "output_buffer_size" not in body and "output_buffer_timeout" not in body
    # producers and the library keep nsqd's default
    plain = resolve_cluster(None, NSQD).connection_config().identify_body()
    assert "output_buffer_size" not in plain


def test_flag_beats_env_beats_profile(cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save_profile(Profile("prod", nsqd=tuple(NSQD), output_buffer="2s"), cfg, make_default=True)
    assert load_config(cfg).profiles["prod"].output_buffer == "2000ms"
    sel = resolve_cluster(None, None)
    assert sel.sources["output_buffer"] == "profile prod"
    assert sel.consumer_config(DURABLE).identify_body()["output_buffer_timeout"] == 2000

    monkeypatch.setenv(flags.OUTPUT_BUFFER_ENV, "none")
    sel = resolve_cluster(None, None)
    assert sel.sources["output_buffer"] == f"${flags.OUTPUT_BUFFER_ENV}"
    assert sel.consumer_config(EPHEMERAL).identify_body()["output_buffer_size"] == -1

    flags.store_global_flag("output_buffer", "100ms")
    sel = resolve_cluster(None, None)
    assert sel.sources["output_buffer"] == "flag" and sel.describe()["output_buffer"] == "100ms"
    body = sel.consumer_config(DURABLE).identify_body()
    assert body["output_buffer_timeout"] == 100 and "output_buffer_size" not in body


def test_bad_profile_value_names_the_profile(cfg: Path) -> None:
    cfg.write_text('[profiles.prod]\nnsqd = ["127.0.0.1:4150"]\noutput_buffer = "fast"\n')
    with pytest.raises(ConfigError, match=r"\[profiles\.prod\].*'fast'"):
        load_config(cfg)


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["tail", "t", "-c", "c", "--output-buffer", "bogus"], {}, "--output-buffer"),
        (["--output-buffer", "bogus", "tail", "t", "-c", "c"], {}, "--output-buffer"),
        (["tail", "t"], {flags.OUTPUT_BUFFER_ENV: "bogus"}, flags.OUTPUT_BUFFER_ENV),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], env: dict[str, str], named: str) -> None:
    # nothing listens on port 1: the setting is refused before any connection
    line = assert_one_line_error(run_cli([*args, "--nsqd", "127.0.0.1:1"], env=clean_env(env)), 2)
    assert f"bad {named} 'bogus': use auto, none" in line


def test_set_profile_stores_the_setting(cfg: Path) -> None:
    args = ["config", "set-profile", "dev", "--nsqd", NSQD[0], "--output-buffer", "1s"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert load_config(cfg).profiles["dev"].output_buffer == "1000ms"
    assert 'output_buffer = "1000ms"' in cfg.read_text()
    # the default is left out of the file
    assert (
        CliRunner().invoke(app, ["config", "set-profile", "dev", "--nsqd", NSQD[0]]).exit_code == 0
    )
    assert "output_buffer" not in cfg.read_text()
