"""Local Go module sources: found by their go.mod, checked against SHA256SUMS, unpacked once;
and the build's way out when the proxy refuses a module."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from nsqctl.errors import ServerSetupError
from nsqctl.servers import build, catalog, modsources


def _tarball(path: Path, top: str, module: str, extra: dict[str, bytes] | None = None) -> Path:
    files = {f"{top}/go.mod": f"module {module}\n\ngo 1.13\n".encode(), **(extra or {})}
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_modules_are_found_by_their_go_mod_not_their_file_name(tmp_path: Path) -> None:
    _tarball(tmp_path / "whatever.tar.gz", "nsq-src", "github.com/youzan/nsq")
    (tmp_path / "bolt").mkdir()
    (tmp_path / "bolt" / "go.mod").write_text('module "github.com/absolute8511/bolt"\n')
    (tmp_path / "notes.txt").write_text("not a module")
    found = modsources.scan(tmp_path)
    assert sorted(found) == ["github.com/absolute8511/bolt", "github.com/youzan/nsq"]
    assert found["github.com/absolute8511/bolt"].digest == "dir"


def test_a_checksum_mismatch_is_refused_with_the_file_named(tmp_path: Path) -> None:
    tb = _tarball(tmp_path / "nsq.tar.gz", "nsq", "github.com/youzan/nsq")
    (tmp_path / "SHA256SUMS").write_text(f"{'0' * 64}  {tb.name}\n")
    with pytest.raises(ServerSetupError, match=r"nsq\.tar\.gz does not match its SHA256SUMS"):
        modsources.scan(tmp_path)
    good = hashlib.sha256(tb.read_bytes()).hexdigest()
    (tmp_path / "SHA256SUMS").write_text(f"{good}  {tb.name}\n")
    assert "github.com/youzan/nsq" in modsources.scan(tmp_path)


def test_two_sources_for_one_module_are_an_error(tmp_path: Path) -> None:
    _tarball(tmp_path / "a.tar.gz", "a", "example.com/m")
    _tarball(tmp_path / "b.tgz", "b", "example.com/m")
    with pytest.raises(ServerSetupError, match=r"two sources for Go module example\.com/m"):
        modsources.scan(tmp_path)


def test_a_missing_folder_names_the_flag_and_variable(tmp_path: Path) -> None:
    with pytest.raises(ServerSetupError, match="NSQCTL_GO_MODULE_SOURCES"):
        modsources.scan(tmp_path / "nope")


def test_materialize_unpacks_once_and_returns_the_module_dir(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    _tarball(src / "m.tar.gz", "m-1.0", "example.com/m", {"m-1.0/main.go": b"package m\n"})
    source = modsources.scan(src)["example.com/m"]
    first = modsources.materialize(source, tmp_path / "unpacked")
    assert (first / "main.go").read_bytes() == b"package m\n"
    (first / "marker").write_text("kept")
    again = modsources.materialize(source, tmp_path / "unpacked")
    assert again == first and (again / "marker").exists()


def test_the_flag_beats_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(modsources.ENV, str(tmp_path / "env"))
    assert modsources.configured(tmp_path / "flag") == tmp_path / "flag"
    assert modsources.configured() == tmp_path / "env"
    monkeypatch.delenv(modsources.ENV)
    assert modsources.configured() is None


def test_a_refused_module_is_read_from_the_build_log(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text(
        "go: downloading github.com/x/y v1.0.0\n"
        "go: github.com/absolute8511/bolt@v1.5.1: reading https://example.invalid/github.com/"
        "absolute8511/bolt/@v/v1.5.1.zip: 403 Forbidden\n"
    )
    assert build._refused_module(log) == "github.com/absolute8511/bolt@v1.5.1"
    log.write_text("main.go:3: syntax error\n")
    assert build._refused_module(log) is None


def test_the_wrapper_replaces_local_modules_with_their_directories() -> None:
    spec = catalog.BUILDS["redesign"]
    text = build.wrapper_gomod(spec, ["github.com/youzan/nsq => /src/nsq"])
    assert f"\t{spec.module} {spec.version}" in text
    assert "replace github.com/youzan/nsq => /src/nsq" in text
