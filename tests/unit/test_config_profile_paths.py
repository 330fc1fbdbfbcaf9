"""``nsqctl config set-profile`` with TLS or AUTH file paths that are not files here: saved
(a profile may be written for another machine), with one warning line per path naming the
flag, the path and the profile, so the mistake is seen when it is made rather than when a
command using the profile fails on it."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.cli import clean_env, run_cli


def test_missing_paths_are_saved_with_one_warning_each(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    present = tmp_path / "ca.pem"
    present.write_text("not checked: only whether it is there")
    missing = {flag: str(tmp_path / f"gone{flag}") for flag in ("--tls-cert", "--tls-key")}
    args = ["config", "set-profile", "far", "--lookupd", "h:4161", "--tls"]
    args += ["--tls-ca", str(present), "--auth-secret-file", str(tmp_path)]  # a directory
    for flag, path in missing.items():
        args += [flag, path]
    proc = run_cli(args, env=clean_env(config=config))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.decode().splitlines()
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert len(warnings) == 3, lines
    for flag, path in missing.items():
        said = f"warning: profile far: {flag} {path} does not exist here"
        assert any(line.startswith(said) for line in warnings), warnings
    said = f"warning: profile far: --auth-secret-file {tmp_path} is not a file here"
    assert any(line.startswith(said) for line in warnings), warnings
    assert not any(str(present) in line for line in warnings)
    assert "saved profile far" in lines[-1]
    assert str(missing["--tls-key"]) in config.read_text()  # saved all the same
