"""Every TLS setting, from a flag, the environment or a profile, either turns TLS on or is
refused with one line: none of them may leave a publish in plaintext without a word.

The refusals are checked through the real console script against a real (plaintext)
nsqd, where a key alone used to publish in the clear and exit 0, and a missing CA file
used to be reported as the server's failure to offer TLS.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsqctl.servers import cluster
from tests.helpers.cli import RUNNER_ENV, assert_one_line_error, clean_env, run_cli

#: what a key file would hold; it must never appear in a message
KEY_MATERIAL = "-----BEGIN PRIVATE KEY-----\nNSQCTLSECRETKEYMATERIAL\n-----END PRIVATE KEY-----\n"

#: a TLS setting -> (its flag, its environment variable or None, its profile line)
SETTINGS = {
    "tls_ca": ("--tls-ca", "NSQCTL_TLS_CA"),
    "tls_cert": ("--tls-cert", "NSQCTL_TLS_CERT"),
    "tls_key": ("--tls-key", "NSQCTL_TLS_KEY"),
    "tls_insecure": ("--tls-insecure", None),
}
SOURCES = ("flag", "env", "profile")


def _given(
    tmp_path: Path, setting: str, source: str, value: str
) -> tuple[list[str], dict[str, str]]:
    """The arguments and environment that give ``setting`` from ``source``."""
    flag, env_name = SETTINGS[setting]
    boolean = setting == "tls_insecure"
    if source == "flag":
        return ([flag] if boolean else [flag, value]), clean_env()
    if source == "env":
        assert env_name is not None
        return [], clean_env({env_name: value})
    config = tmp_path / "config.toml"
    line = f"{setting} = true" if boolean else f'{setting} = "{value}"'
    config.write_text(f'default_profile = "p"\n[profiles.p]\n{line}\n')
    return [], clean_env(config=config)


#: every setting that turns TLS on alone, from each source it can come from (a key alone
#: is refused instead: the tests below)
CASES = [
    (setting, source)
    for setting in SETTINGS
    for source in SOURCES
    if setting != "tls_key" and not (source == "env" and SETTINGS[setting][1] is None)
]


@pytest.mark.parametrize(("setting", "source"), CASES, ids=[f"{s}-{o}" for s, o in CASES])
def test_any_tls_setting_turns_tls_on(tmp_path: Path, setting: str, source: str) -> None:
    """In-process (``config`` only resolves): a process per case would cost seconds."""
    from typer.testing import CliRunner

    from nsqctl.cli.app import app

    args, env = _given(tmp_path, setting, source, str(tmp_path / "file.pem"))
    names = ("NSQCTL_CONFIG", *(e for _, e in SETTINGS.values() if e))
    runner_env = {**RUNNER_ENV, **{n: env.get(n) for n in names}}
    result = CliRunner().invoke(app, ["config", "--json", *args], env=runner_env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tls"] is not None, (setting, source)


@pytest.mark.original
@pytest.mark.parametrize("source", SOURCES)
def test_a_key_without_its_certificate_publishes_nothing(
    original_cluster: cluster.Cluster, tmp_path: Path, source: str
) -> None:
    key = tmp_path / "client.key"
    key.write_text(KEY_MATERIAL)
    args, env = _given(tmp_path, "tls_key", source, str(key))
    nsqd = original_cluster.nsqd_tcp[0]
    proc = run_cli([*args, "pub", "tls_key_alone", "x", "--nsqd", nsqd], env=env)
    line = assert_one_line_error(proc, 2)
    assert "--tls-key needs --tls-cert" in line and "NSQCTLSECRETKEYMATERIAL" not in line
    stats = run_cli(["stat", "--nsqd-http", original_cluster.nsqd_http[0], "-n", "1", "--json"])
    assert b"tls_key_alone" not in stats.stdout


@pytest.mark.original
def test_a_missing_ca_file_is_named_before_connecting(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-ca.pem"
    nsqd = original_cluster.nsqd_tcp[0]
    proc = run_cli(["pub", "tls_ca_missing", "x", "--nsqd", nsqd, "--tls-ca", str(missing)])
    line = assert_one_line_error(proc, 2)
    assert str(missing) in line and "No such file" in line, line
    assert "does not offer TLS" not in line and nsqd not in line
