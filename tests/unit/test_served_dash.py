"""What a ``dash --serve`` session process is handed: the cluster and the connection
settings of the dashboard that serves it, so a borrow from a browser session connects
as one from the terminal dashboard does; the AUTH secret never in the spec."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nsqctl.cli.commands.dash_serve import TOKEN_ENV, token_warning
from nsqctl.cli.commands.dash_served import KEY_PASSWORD_ENV, ServedDash
from nsqctl.cli.flags import ClusterSelection
from nsqctl.connection import TLSSettings
from nsqctl.secrets import AUTH_SECRET_ENV, Secret
from nsqctl.stats.poller import StatsPoller
from nsqctl.stats.sources import StatsSession
from nsqctl.tui.app import DashApp
from nsqctl.tui.peekscreen import borrow_config
from tests.helpers.certs import encrypted_key, make_tls_files
from tests.helpers.cli import assert_one_line_error, run_main


def isolate_inherited_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """:meth:`ServedDash.of` writes the AUTH secret and the key's passphrase into this
    process's environment (and removes a passphrase it was not given): have ``monkeypatch``
    put both back as they were. ``delenv`` of a variable not set records nothing to undo,
    so each is set first: its undo then removes what ``of`` wrote."""
    for name in (AUTH_SECRET_ENV, KEY_PASSWORD_ENV):
        monkeypatch.setenv(name, "placeholder")
        monkeypatch.delenv(name)


def test_a_session_connects_as_the_serving_dashboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_inherited_secrets(monkeypatch)
    monkeypatch.setenv(AUTH_SECRET_ENV, "what-the-test-started-with")
    files = make_tls_files(tmp_path)
    secret = "served-s3cret-value"
    sel = ClusterSelection(
        lookupd=["127.0.0.1:4161"],
        nsqd=["127.0.0.1:4150"],
        nsqd_http=["127.0.0.1:4151"],
        tls=TLSSettings(
            ca_file=str(files.ca_cert),
            cert_file=str(files.client_cert),
            key_file=str(files.client_key),
        ),
        auth_secret=Secret(secret, "file /x"),
        compression="snappy",
    )
    spec = ServedDash.of(sel, 2.0, 1.5, None)
    sent = spec.to_env()
    assert secret not in sent
    session = ServedDash.from_env(sent)
    assert session.connection() == sel.connection_config()
    assert (session.nsqd, session.lookupd, session.nsqd_http) == (
        sel.nsqd,
        sel.lookupd,
        sel.nsqd_http,
    )


@pytest.mark.parametrize("setting", ["auto", "none", "100ms"])
@pytest.mark.parametrize("channel", ["held", "held#ephemeral"])
def test_a_borrow_asks_nsqd_for_the_output_buffer_peek_borrow_asks_for(
    setting: str, channel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard's borrow (``v`` on an original channel) is ``peek --borrow``: its
    consumer gets the same connection settings, output buffering included (``auto``:
    unbuffered on a durable channel, so a kill -9 of nsqd loses nothing borrowed), from
    a terminal dashboard and from a served session alike."""
    sel = ClusterSelection(
        lookupd=["127.0.0.1:4161"], nsqd=[], compression="snappy", output_buffer=setting
    )
    peek_borrow = sel.consumer_config(channel)
    isolate_inherited_secrets(monkeypatch)
    terminal = DashApp(
        StatsSession(StatsPoller(sel.lookupd, sel.nsqd_http)),
        connection=sel.connection_config(),
        output_buffer=sel.output_buffer,
    )
    session = ServedDash.from_env(ServedDash.of(sel, 2.0, 1.5, None).to_env())
    served = DashApp(
        StatsSession(StatsPoller(session.lookupd, session.nsqd_http)),
        connection=session.connection(),
        output_buffer=session.output_buffer,
    )
    for app in (terminal, served):
        assert borrow_config(app, channel) == peek_borrow


def test_a_session_opens_the_serving_dashboards_encrypted_client_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An encrypted client key's passphrase reaches the sessions as the AUTH secret
    does (inherited environment), never in the spec: the spec is JSON, which a
    :class:`Secret` is not, and the dashboard would not start."""
    isolate_inherited_secrets(monkeypatch)
    files = make_tls_files(tmp_path)
    passphrase = b"served-key-passphrase"
    key = encrypted_key(files.client_key, passphrase, tmp_path / "encrypted.pem")
    sel = ClusterSelection(
        lookupd=["127.0.0.1:4161"],
        nsqd=[],
        tls=TLSSettings(
            ca_file=str(files.ca_cert),
            cert_file=str(files.client_cert),
            key_file=str(key),
            key_password=Secret(passphrase, "file /x"),
        ),
    )
    sent = ServedDash.of(sel, 2.0, 1.5, None).to_env()
    assert passphrase.decode() not in sent
    connection = ServedDash.from_env(sent).connection()
    assert connection == sel.connection_config()
    assert connection.tls is not None
    connection.tls.context()  # the key opens


def test_no_passphrase_outlives_the_test_that_served_it(tmp_path: Path) -> None:
    """The passphrase ``ServedDash.of`` puts in the environment is gone once the test that
    made it has undone its changes: else later tests and their subprocesses inherit it."""
    before = os.environ.get(KEY_PASSWORD_ENV)
    with pytest.MonkeyPatch.context() as mp:
        test_a_session_opens_the_serving_dashboards_encrypted_client_key(tmp_path, mp)
        assert os.environ.get(KEY_PASSWORD_ENV) == "served-key-passphrase"
    assert os.environ.get(KEY_PASSWORD_ENV) == before


def _dash_serving(monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    """stderr of ``dash --serve`` with a CA file that does not exist: it stops at start,
    after any token warning and before anything listens."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    isolate_inherited_secrets(monkeypatch)
    where = ("--lookupd", "127.0.0.1:1", "--tls-ca", "/nonexistent/ca.pem")
    proc = run_main("dash", "--serve", "127.0.0.1:0", *where, *args)
    assert proc.returncode != 0, proc
    return proc.stderr


TOKEN = "t" * 20


def test_a_token_from_the_command_line_is_warned_of_even_when_the_environment_holds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A --token value shows in ps to every user for as long as the dashboard serves,
    whatever the environment holds; one only in the environment does not."""
    typed = _dash_serving(monkeypatch, "--token", TOKEN)
    assert f"set {TOKEN_ENV} instead" in typed and TOKEN not in typed, typed
    ambient = _dash_serving(monkeypatch)
    assert TOKEN_ENV not in ambient and "ca.pem" in ambient, ambient
    assert token_warning(False) is None


def test_a_typed_token_without_serve_is_refused_even_when_the_environment_holds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    line = assert_one_line_error(run_main("dash", "--token", TOKEN), 2)
    assert "--token applies only with --serve" in line, line
