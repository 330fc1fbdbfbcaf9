"""Global flags (``--debug``, ``--profile``, ``--tls*``, ``--auth-secret-file``,
``--compression``) work after the command as well as before it, as in kubectl and gh,
with the same precedence: flag > environment > profile. Real console script; the last
test publishes and tails through a real nsqd with the flags after the command.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from nsqctl.servers import cluster
from tests.helpers.cli import assert_one_line_error, clean_env, run_cli


def _settings(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = run_cli(["config", "--json", *args], env=env or clean_env())
    assert proc.returncode == 0, proc.stderr
    settings: dict[str, Any] = json.loads(proc.stdout)
    return settings


def test_security_flags_after_the_command(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    data = _settings("--compression", "snappy", "--tls-ca", str(ca))
    assert data["compression"] == "snappy"
    assert data["tls"]["ca_file"] == str(ca)


def test_flag_after_the_command_beats_environment_and_profile(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[profiles.p]\nlookupd = ["127.0.0.1:4161"]\ncompression = "deflate"\n')
    env = clean_env({"NSQCTL_PROFILE": "p"}, config=config)
    assert _settings(env=env)["compression"] == "deflate"  # the profile
    env["NSQCTL_COMPRESSION"] = "none"
    assert _settings(env=env)["compression"] == "none"  # env beats the profile
    assert _settings("--compression", "snappy", env=env)["compression"] == "snappy"


def test_profile_flag_after_a_command_that_has_no_profile_option(tmp_path: Path) -> None:
    """``dead-letter list`` declares no --profile: the global one is accepted there."""
    proc = run_cli(
        ["dead-letter", "list", "--json", "--profile", "nope"],
        env=clean_env({"NSQCTL_STATE_DIR": str(tmp_path)}),
    )
    assert proc.returncode == 0, proc.stderr


def test_after_wins_over_before() -> None:
    assert _settings("--compression", "snappy")["compression"] == "snappy"
    proc = run_cli(["--compression", "deflate", "config", "--json", "--compression", "snappy"])
    assert json.loads(proc.stdout)["compression"] == "snappy"
    proc = run_cli(["--compression", "deflate", "config", "--json"])
    assert json.loads(proc.stdout)["compression"] == "deflate"  # not undone by the command


def test_bad_value_after_the_command_is_one_line() -> None:
    line = assert_one_line_error(run_cli(["config", "--compression", "bogus"]), 2)
    assert "bogus" in line


def test_debug_after_the_command_shows_the_traceback() -> None:
    plain = run_cli(["sandbox", "status", "--dir", "/nonexistent/sandbox"])
    assert_one_line_error(plain, 1)
    debug = run_cli(["sandbox", "status", "--dir", "/nonexistent/sandbox", "--debug"])
    assert debug.returncode == 1 and b"Traceback" in debug.stderr


@pytest.mark.original
def test_pub_and_tail_with_flags_after_the_command(original_cluster: cluster.Cluster) -> None:
    topic = f"cli_global_{uuid.uuid4().hex[:8]}"
    nsqd = ["--nsqd", original_cluster.nsqd_tcp[0]]
    pub = run_cli(["pub", topic, "one", "two", *nsqd, "--compression", "deflate", "--debug"])
    assert pub.returncode == 0, pub.stderr
    tail = run_cli(["tail", topic, *nsqd, "-n", "2", "--compression", "snappy"])
    assert tail.returncode == 0, tail.stderr
    assert tail.stdout == b"one\ntwo\n"


def test_in_process_runs_do_not_inherit_flags() -> None:
    """A flag given after the command in one in-process run is gone in the next."""
    from tests.helpers.cli import invoke

    first = invoke("config", "--json", "--compression", "snappy")
    assert first.exit_code == 0 and json.loads(first.stdout)["compression"] == "snappy"
    second = invoke("config", "--json")
    assert second.exit_code == 0 and json.loads(second.stdout)["compression"] == "none"


def test_nsqctl_log_must_name_a_level() -> None:
    import subprocess

    from tests.helpers.cli import NSQCTL

    env = {**clean_env(), "NSQCTL_LOG": "loud"}
    r = subprocess.run([NSQCTL, "version"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "nsqctl: error: NSQCTL_LOG='loud' is not a log level: use one of debug, info, warning, "
        "error"
    ]


def test_nsqctl_log_shows_the_publish_retries() -> None:
    import subprocess

    from nsqctl.servers.process import free_ports
    from tests.helpers.cli import NSQCTL

    (port,) = free_ports(1)  # nothing listens there: every attempt fails
    env = {**clean_env(), "NSQCTL_LOG": "info"}
    r = subprocess.run(
        [NSQCTL, "pub", "logged", "--nsqd", f"127.0.0.1:{port}"],
        input=b"one\n",
        env=env,
        capture_output=True,
        timeout=120,
    )
    stderr = r.stderr.decode()
    assert r.returncode == 1, stderr
    retries = [ln for ln in stderr.splitlines() if "INFO nsqctl.producer" in ln and "retry" in ln]
    assert retries, stderr  # each failed attempt, with its ticket and delay
    assert stderr.strip().splitlines()[-1].startswith("nsqctl: error: ")
