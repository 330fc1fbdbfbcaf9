"""ConnectionConfig's IDENTIFY body and TLSSettings' errors (no IO but reading files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqctl.connection.config import (
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    HEARTBEAT_INTERVAL_ENV,
    ConnectionConfig,
    TLSSettings,
)
from nsqctl.errors import ConfigError


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
        hostname="h", tls=TLSSettings(insecure=True), compression="deflate", msg_timeout_ms=5
    )
    body = cfg.identify_body()
    assert body["tls_v1"] is True and body["deflate"] is True and body["msg_timeout"] == 5
    assert body["client_id"] == "h"


def test_unknown_compression_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown compression"):
        ConnectionConfig(compression="lz4").identify_body()


def test_unloadable_tls_files_name_their_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="CA file") as info:
        TLSSettings(ca_file=str(tmp_path / "missing-ca.pem")).context()
    assert info.value.setting == "tls_ca" and "--" not in str(info.value)
    bad = tmp_path / "cert.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ConfigError, match="client certificate") as info:
        TLSSettings(cert_file=str(bad), key_file=str(bad)).context()
    assert info.value.setting == "tls_cert" and "--" not in str(info.value)


def test_a_tls_key_without_its_certificate_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs its certificate") as info:
        TLSSettings(key_file="/etc/nsq/client.key")
    assert info.value.setting == "tls_key" and "--" not in str(info.value)
