"""The library's front door: everything a program needs at ``nsqctl.X``, one exception
tree, and an ``import nsqctl`` that stays cheap for the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest

import nsqctl
from nsqctl import errors


def test_the_documented_names_import_from_the_top() -> None:
    from nsqctl import (  # noqa: F401
        ConnectionConfig,
        Consumer,
        Message,
        NsqctlError,
        Producer,
        Receipt,
        TLSSettings,
    )


def test_every_public_name_resolves_and_all_is_the_export_table() -> None:
    assert set(nsqctl.__all__) - {"__version__"} == set(nsqctl._EXPORTS)
    for name in nsqctl.__all__:
        assert getattr(nsqctl, name) is not None, name
    assert set(nsqctl.__all__) <= set(dir(nsqctl))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        nsqctl.Nope  # noqa: B018


def test_import_nsqctl_loads_no_client() -> None:
    """The CLI imports nsqctl for every command: the clients load on first use only."""
    code = (
        "import sys, nsqctl\n"
        "heavy = [m for m in ('nsqctl.consumer', 'nsqctl.producer', 'nsqctl.connection',"
        " 'httpx', 'asyncio') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


KINDS = (
    errors.ConfigError,
    errors.TransportError,
    errors.ProtocolError,
    nsqctl.ServerError,
    errors.NsqctlTimeoutError,
    errors.LeaderUnavailableError,
    errors.NotFoundError,
    errors.PublishError,
    errors.UsageError,
    errors.AdminError,
    errors.ArchiveWriteError,
    errors.ServerSetupError,
)


@pytest.mark.parametrize(
    "name", [n for n in nsqctl.__all__ if n.endswith("Error") and n != "NsqctlError"]
)
def test_every_public_error_is_an_nsqctl_error_of_a_kind(name: str) -> None:
    cls = getattr(nsqctl, name)
    assert issubclass(cls, nsqctl.NsqctlError)
    assert any(issubclass(cls, kind) for kind in KINDS), name


def test_errors_carry_the_setting_that_would_change_the_outcome() -> None:
    err = errors.FailoverTimeoutError("no leader", 3, setting="failover_window")
    assert (err.setting, err.partition, str(err)) == ("failover_window", 3, "no leader")
    assert isinstance(err, errors.LeaderUnavailableError)
    assert isinstance(err, errors.NsqctlTimeoutError)
    assert errors.ConfigError("bad").setting is None
