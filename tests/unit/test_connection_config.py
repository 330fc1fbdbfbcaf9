"""ConnectionConfig's IDENTIFY body and TLSSettings' errors (no IO but reading files)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, cast

import pytest

from nsqctl.connection.config import (
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    HEARTBEAT_INTERVAL_ENV,
    MAX_DURATION_MS,
    ConnectionConfig,
    TLSSettings,
)
from nsqctl.errors import ConfigError
from nsqctl.protocol.session import idle_timeout
from nsqctl.secrets import Secret
from tests.helpers.certs import encrypted_key, make_tls_files


def test_identify_body_negotiates_features() -> None:
    cfg = ConnectionConfig(client_id="unit", hostname="h.example", heartbeat_interval_ms=12_345)
    body = cfg.identify_body()
    assert body["feature_negotiation"] is True
    assert (body["client_id"], body["hostname"]) == ("unit", "h.example")
    assert body["heartbeat_interval"] == 12_345
    assert body["tls_v1"] is False and body["snappy"] is False and body["deflate"] is False
    assert "extend_support" not in body and "msg_timeout" not in body


def test_heartbeat_interval_default_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(HEARTBEAT_INTERVAL_ENV, raising=False)
    assert ConnectionConfig().heartbeat_interval_ms == DEFAULT_HEARTBEAT_INTERVAL_MS
    monkeypatch.setenv(HEARTBEAT_INTERVAL_ENV, "1500")
    assert ConnectionConfig().identify_body()["heartbeat_interval"] == 1500
    assert ConnectionConfig(heartbeat_interval_ms=9000).heartbeat_interval_ms == 9000


@pytest.mark.parametrize("raw", ["fast", "999", "-1", "1.5"])
def test_a_bad_heartbeat_interval_in_the_environment_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv(HEARTBEAT_INTERVAL_ENV, raw)
    with pytest.raises(ConfigError, match=HEARTBEAT_INTERVAL_ENV) as caught:
        ConnectionConfig()
    assert caught.value.setting == "heartbeat_interval_ms"


def test_identify_body_asks_for_what_is_configured() -> None:
    cfg = ConnectionConfig(
        hostname="h", tls=TLSSettings(insecure=True), compression="deflate", msg_timeout_ms=5000
    )
    body = cfg.identify_body()
    assert body["tls_v1"] is True and body["deflate"] is True and body["msg_timeout"] == 5000
    assert body["client_id"] == "h"


def test_unknown_compression_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match="unknown compression") as caught:
        ConnectionConfig(compression="lz4")
    assert caught.value.setting == "compression"


#: Each field just outside what nsqd's IDENTIFY (or, for the client's own timeouts, a
#: working timer) takes, with a word of the range the message must name.
REFUSED = [
    ("heartbeat_interval_ms", -5, "1000 ms or more"),
    ("heartbeat_interval_ms", -2, "-1 (no heartbeats)"),
    ("heartbeat_interval_ms", 0, "1000 ms or more"),
    ("heartbeat_interval_ms", 999, "1000 ms or more"),
    ("heartbeat_interval_ms", MAX_DURATION_MS + 1, "max_heartbeat_interval"),
    ("heartbeat_interval_ms", 1500.0, "whole number"),
    ("heartbeat_interval_ms", True, "whole number"),
    ("msg_timeout_ms", -1, "0 (nsqd's default)"),
    ("msg_timeout_ms", 999, "1000 ms or more"),
    ("msg_timeout_ms", MAX_DURATION_MS + 1, "max_msg_timeout"),
    ("output_buffer_size", -2, "-1 (unbuffered)"),
    ("output_buffer_size", 63, "64 bytes or more"),
    ("output_buffer_size", 2**63, "max_output_buffer_size"),
    ("output_buffer_timeout_ms", -2, "-1 (no timeout)"),
    ("output_buffer_timeout_ms", MAX_DURATION_MS + 1, "max_output_buffer_timeout"),
    ("sample_rate", -1, "0..99"),
    ("sample_rate", 100, "0..99"),
    ("deflate_level", 0, "1..9"),
    ("deflate_level", 10, "1..9"),
    ("connect_timeout", 0, "> 0 seconds"),
    ("connect_timeout", -1.0, "> 0 seconds"),
    ("connect_timeout", math.nan, "finite"),
    ("connect_timeout", math.inf, "finite"),
    ("request_timeout", 0.0, "> 0 seconds"),
    ("request_timeout", -math.inf, "finite"),
    ("request_timeout", math.nan, "finite"),
    ("request_timeout", "30", "finite"),
]


@pytest.mark.parametrize(("setting", "value", "named"), REFUSED)
def test_a_value_nsqd_would_refuse_is_refused_at_construction(
    setting: str, value: Any, named: str
) -> None:
    with pytest.raises(ConfigError, match=f"bad {setting}") as caught:
        ConnectionConfig(**{setting: value})
    assert caught.value.setting == setting
    assert named in str(caught.value) and "--" not in str(caught.value)


#: nsqd's own edges, each taken by it (its IDENTIFY handling): none may be refused here.
ACCEPTED: list[tuple[str, Any]] = [
    ("heartbeat_interval_ms", -1),
    ("heartbeat_interval_ms", 1000),
    ("heartbeat_interval_ms", MAX_DURATION_MS),
    ("msg_timeout_ms", 0),
    ("msg_timeout_ms", 1000),
    ("msg_timeout_ms", None),
    ("output_buffer_size", -1),
    ("output_buffer_size", 0),
    ("output_buffer_size", 64),
    ("output_buffer_timeout_ms", -1),
    ("output_buffer_timeout_ms", 0),
    ("output_buffer_timeout_ms", 1),
    ("sample_rate", 0),
    ("sample_rate", 99),
    ("deflate_level", 1),
    ("deflate_level", 9),
    ("connect_timeout", 0.001),
    ("request_timeout", 1),
]


@pytest.mark.parametrize(("setting", "value"), ACCEPTED)
def test_every_value_nsqd_takes_is_accepted(setting: str, value: Any) -> None:
    assert getattr(ConnectionConfig(**{setting: value}), setting) == value


def test_a_field_set_after_construction_is_checked_before_identify() -> None:
    cfg = ConnectionConfig()
    cfg.sample_rate = 100
    with pytest.raises(ConfigError, match="bad sample_rate") as caught:
        cfg.identify_body()
    assert caught.value.setting == "sample_rate"


def test_no_heartbeats_means_no_idle_limit() -> None:
    """With heartbeats off nsqd may stay silent for ever: the idle watch must not take
    that silence for a dead server."""
    assert idle_timeout(-1) == math.inf
    assert idle_timeout(1000) == 10.0


def test_unloadable_tls_files_name_their_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="CA file") as info:
        TLSSettings(ca_file=str(tmp_path / "missing-ca.pem")).context()
    assert info.value.setting == "tls_ca" and "--" not in str(info.value)
    bad = tmp_path / "cert.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ConfigError, match="client certificate") as info:
        TLSSettings(cert_file=str(bad), key_file=str(bad)).context()
    assert info.value.setting == "tls_cert" and "--" not in str(info.value)
    assert "None" not in str(info.value)


def test_a_certificate_without_a_key_file_says_where_the_key_was_looked_for(
    tmp_path: Path,
) -> None:
    """OpenSSL's own words ("PEM lib") do not say that the key was looked for in the
    certificate's file; the error does, and never prints a missing key as ``None``."""
    cert = tmp_path / "cert.pem"
    cert.write_text("not a certificate")
    with pytest.raises(ConfigError, match="no key file given") as info:
        TLSSettings(cert_file=str(cert)).context()
    assert "None" not in str(info.value) and info.value.setting == "tls_cert"


def test_a_tls_key_without_its_certificate_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs its certificate") as info:
        TLSSettings(key_file="/etc/nsq/client.key")
    assert info.value.setting == "tls_key" and "--" not in str(info.value)


def test_an_encrypted_key_is_opened_with_key_password_and_the_passphrase_never_shows(
    tmp_path: Path,
) -> None:
    """The library's side: without ``key_password`` an encrypted key is a ConfigError
    naming the setting (OpenSSL never asks on the terminal); a wrong one says it does
    not decrypt; the passphrase is in no message and no repr."""
    files = make_tls_files(tmp_path / "tls")
    passphrase = b"hunter2-but-longer"
    key = str(encrypted_key(files.client_key, passphrase, tmp_path / "enc.key"))
    cert = str(files.client_cert)
    with pytest.raises(ConfigError, match="is encrypted") as info:
        TLSSettings(cert_file=cert, key_file=key).context()
    assert info.value.setting == "tls_key_password" and "`key_password`" in str(info.value)
    wrong = TLSSettings(cert_file=cert, key_file=key, key_password=Secret(b"nope", "a test"))
    with pytest.raises(ConfigError, match="does not decrypt") as info:
        wrong.context()
    assert "nope" not in str(info.value) and "a test" in str(info.value)
    right = TLSSettings(cert_file=cert, key_file=key, key_password=Secret(passphrase))
    assert right.context() is not None
    assert passphrase.decode() not in repr(right)
    # a key that is not encrypted: the passphrase is never asked for, and not in the way
    plain = TLSSettings(cert_file=cert, key_file=str(files.client_key), key_password=Secret(b"x"))
    assert plain.context() is not None


def test_a_plain_auth_secret_is_wrapped_at_once_and_never_shown() -> None:
    """A caller who passes the secret as a str (not an nsqctl.Secret) must not see it
    printed by the config's repr, nor meet an AttributeError at AUTH."""
    config = ConnectionConfig(auth_secret=cast(Any, "hunter2-secret"))
    assert isinstance(config.auth_secret, Secret)
    assert config.auth_secret.reveal() == b"hunter2-secret"
    assert "hunter2" not in repr(config)
    config.auth_secret = cast(Any, b"later-secret")  # assignable after construction
    config.identify_body()  # validated again before IDENTIFY
    assert isinstance(config.auth_secret, Secret) and "later" not in repr(config)
    with pytest.raises(ConfigError, match="auth_secret must be") as info:
        ConnectionConfig(auth_secret=cast(Any, 12345))
    assert info.value.setting == "auth_secret" and "12345" not in str(info.value)


def test_tls_true_means_the_default_settings_and_other_values_are_refused() -> None:
    assert ConnectionConfig(tls=cast(Any, True)).tls == TLSSettings()
    assert ConnectionConfig(tls=cast(Any, False)).tls is None
    with pytest.raises(ConfigError, match="tls must be") as info:
        ConnectionConfig(tls=cast(Any, "yes"))
    assert info.value.setting == "tls"


def test_a_key_that_does_not_match_its_certificate_is_not_blamed_on_the_passphrase(
    tmp_path: Path,
) -> None:
    """The right passphrase opens the key, and then the key does not match the
    certificate: the error must say that, not send the operator after the passphrase."""
    files = make_tls_files(tmp_path / "tls")
    key = encrypted_key(files.rogue_client_key, b"the-right-one", tmp_path / "other.key")
    settings = TLSSettings(
        cert_file=str(files.client_cert), key_file=str(key), key_password=Secret(b"the-right-one")
    )
    with pytest.raises(ConfigError) as info:
        settings.context()
    assert "does not decrypt" not in str(info.value) and info.value.setting == "tls_cert"
