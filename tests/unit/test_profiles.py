"""Profiles in the TOML config file and how flags, environment and profile combine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nsqctl.cli import flags
from nsqctl.cli.app import app
from nsqctl.cli.flags import resolve_cluster
from nsqctl.connection import TLSSettings
from nsqctl.errors import ConfigError
from nsqctl.profiles import Profile, load_config, save_profile
from nsqctl.secrets import Secret

SECRET = "s3cr3t-value-never-printed"


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in (
        "NSQCTL_LOOKUPD",
        "NSQCTL_NSQD",
        "NSQCTL_NSQD_HTTP",
        "NSQCTL_PROFILE",
        "NSQCTL_AUTH_SECRET",
        "NSQCTL_AUTH_SECRET_FILE",
        "NSQCTL_TLS_CA",
        "NSQCTL_TLS_CERT",
        "NSQCTL_TLS_KEY",
        "NSQCTL_COMPRESSION",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(flags, "GLOBAL_FLAGS", flags.SecurityFlags())
    secret = tmp_path / "prod.secret"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)  # as a secret file should be (else a warning joins the output)
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
default_profile = "prod"

[profiles.prod]
lookupd = ["10.0.0.1:4161", "10.0.0.2:4161"]
auth_secret_file = "{secret}"
tls_ca = "/etc/ca.pem"
compression = "snappy"

[profiles.stage]
nsqd = "10.1.0.1:4150"
"""
    )
    monkeypatch.setenv("NSQCTL_CONFIG", str(path))
    return path


def test_default_profile_applies(cfg: Path) -> None:
    sel = resolve_cluster(None, None)
    assert sel.profile == "prod"
    assert sel.lookupd == ["10.0.0.1:4161", "10.0.0.2:4161"]
    assert sel.sources["lookupd"] == "profile prod"
    assert sel.compression == "snappy"
    assert sel.tls is not None and sel.tls.ca_file == "/etc/ca.pem"
    assert sel.auth_secret is not None and sel.auth_secret.reveal() == SECRET.encode()


def test_flags_beat_env_beat_profile(cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NSQCTL_LOOKUPD", "127.0.0.1:1111")
    sel = resolve_cluster(None, None)
    assert sel.lookupd == ["127.0.0.1:1111"] and sel.sources["lookupd"] == "$NSQCTL_LOOKUPD"
    sel = resolve_cluster(["127.0.0.1:2222,127.0.0.1:3333"], None)
    assert sel.lookupd == ["127.0.0.1:2222", "127.0.0.1:3333"] and sel.sources["lookupd"] == "flag"
    # Addresses are a group: a flag's nsqd does not get mixed with the env's lookupd.
    sel = resolve_cluster(None, ["127.0.0.1:4150"])
    assert sel.nsqd == ["127.0.0.1:4150"] and sel.lookupd == []


def test_profile_chosen_by_flag_or_env(cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_cluster(None, None, "stage").nsqd == ["10.1.0.1:4150"]
    monkeypatch.setenv("NSQCTL_PROFILE", "stage")
    sel = resolve_cluster(None, None)
    assert sel.profile == "stage" and sel.nsqd == ["10.1.0.1:4150"] and sel.auth_secret is None


def test_unknown_profile_names_the_known_ones(cfg: Path) -> None:
    with pytest.raises(ConfigError, match=r"no profile 'nope' .*profiles: prod, stage"):
        resolve_cluster(None, None, "nope")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[profiles.a]\nlookupd = 5\n", "lookupd must be a list"),
        ("[profiles.a]\ncolour = 'red'\n", "unknown key 'colour'"),
        ("[profiles.a\n", "not valid TOML"),
        ("[profiles.a]\ntls = 'yes'\n", "tls must be true or false"),
        ("[profiles.a]\ncompression = 'gzip'\n", r"\[profiles.a\]: unknown compression 'gzip'"),
    ],
)
def test_broken_config_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_no_cluster_at_all_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NSQCTL_CONFIG", str(tmp_path / "missing.toml"))
    for var in ("NSQCTL_LOOKUPD", "NSQCTL_NSQD", "NSQCTL_NSQD_HTTP", "NSQCTL_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError, match="no cluster given"):
        resolve_cluster(None, None)
    with pytest.raises(ConfigError, match="reads the HTTP APIs"):
        resolve_cluster(None, ["127.0.0.1:4150"], require="http")


def test_save_profile_round_trips_and_keeps_others(cfg: Path) -> None:
    save_profile(Profile("dev", nsqd=("127.0.0.1:4150",), compression="deflate"), make_default=True)
    loaded = load_config(cfg)
    assert loaded.default_profile == "dev"
    assert loaded.profiles["dev"].compression == "deflate"
    assert loaded.profiles["prod"].lookupd == ("10.0.0.1:4161", "10.0.0.2:4161")


def test_config_show_masks_the_secret(cfg: Path) -> None:
    result = CliRunner().invoke(app, ["config", "--json"])
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output
    data = json.loads(result.output)
    assert data["auth_secret"] == "<hidden>"
    assert data["auth_secret_source"].startswith("file ")
    assert data["profile"] == "prod"
    table = CliRunner().invoke(app, ["config"])
    assert table.exit_code == 0 and SECRET not in table.output and "prod" in table.output


def test_config_says_a_key_passphrase_is_set_and_where_from_never_what() -> None:
    """``nsqctl config`` shows every resolved setting, secrets masked: a TLS key's
    passphrase as the AUTH secret is, "<hidden>" with its source, not left out."""
    sel = flags.ClusterSelection(
        lookupd=["127.0.0.1:4161"],
        nsqd=[],
        tls=TLSSettings(
            cert_file="c.pem", key_file="k.pem", key_password=Secret(b"pass-phrase-9", "file /p")
        ),
    )
    shown = sel.describe()
    assert shown["tls"]["key_password"] == "<hidden>"
    assert shown["tls"]["key_password_source"] == "file /p"
    assert "pass-phrase-9" not in json.dumps(shown)


@pytest.mark.parametrize(
    ("flag", "value", "example"),
    [
        ("--lookupd", "127.0.0.1", "127.0.0.1:4161"),
        ("--nsqd", "127.0.0.1:4150,::1:4150", "127.0.0.1:4150"),
        ("--nsqd-http", "http://127.0.0.1:4151", "127.0.0.1:4151"),
    ],
)
def test_set_profile_refuses_a_malformed_address_and_saves_nothing(
    cfg: Path, flag: str, value: str, example: str
) -> None:
    """Saved, it would fail every later command that names the profile."""
    args = ["config", "set-profile", "p", "--lookupd", "127.0.0.1:4161", flag, value]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.output  # main() exits 2
    assert "bad address" in str(result.exception) and f"e.g. {example}" in str(result.exception)
    assert "p" not in load_config(cfg).profiles


def test_no_tls_by_flag_beats_the_profiles_ca_and_refuses_a_tls_flag(
    cfg: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--no-tls was ignored whenever any TLS setting was found: the profile's CA turned
    TLS back on. Asked for by name it wins over the profile and the environment; beside
    a TLS flag it is a conflict, said as one."""
    monkeypatch.setattr(flags, "GLOBAL_FLAGS", flags.SecurityFlags(tls=False))
    assert resolve_cluster(None, None).tls is None
    monkeypatch.setenv("NSQCTL_TLS_CA", "/etc/other-ca.pem")
    assert resolve_cluster(None, None).tls is None
    monkeypatch.setattr(flags, "GLOBAL_FLAGS", flags.SecurityFlags(tls=False, tls_ca="/etc/ca.pem"))
    with pytest.raises(ConfigError, match="--no-tls conflicts with --tls-ca"):
        resolve_cluster(None, None)


def test_no_tls_by_flag_wins_over_half_a_client_identity_from_the_environment(
    cfg: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A key or a passphrase file without its certificate is refused when TLS is to be
    used; --no-tls given by name means none is, so it must not be refused for them."""
    monkeypatch.setattr(flags, "GLOBAL_FLAGS", flags.SecurityFlags(tls=False))
    monkeypatch.setenv("NSQCTL_TLS_KEY_PASSWORD_FILE", str(tmp_path / "pass"))
    monkeypatch.setenv("NSQCTL_TLS_KEY", "/etc/nsq/client.key")
    assert resolve_cluster(None, None).tls is None
    monkeypatch.setattr(flags, "GLOBAL_FLAGS", flags.SecurityFlags())
    with pytest.raises(ConfigError, match="--tls-key needs --tls-cert"):
        resolve_cluster(None, None)


@pytest.mark.parametrize("flag", ["--tls-key", "--tls-key-password-file"])
def test_set_profile_refuses_half_a_client_identity_and_saves_nothing(cfg: Path, flag: str) -> None:
    """Saved, a key (or the passphrase file opening one) without its certificate would
    fail every later command that names the profile."""
    args = ["config", "set-profile", "p", "--lookupd", "127.0.0.1:4161", flag, "/etc/nsq/x"]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, ConfigError), result.output
    assert "--tls-cert FILE" in str(result.exception)
    assert "p" not in load_config(cfg).profiles
