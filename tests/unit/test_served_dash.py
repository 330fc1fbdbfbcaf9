"""What a ``dash --serve`` session process is handed: the cluster and the connection
settings of the dashboard that serves it, so a borrow from a browser session connects
as one from the terminal dashboard does; the AUTH secret never in the spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqctl.cli.commands.dash_served import ServedDash
from nsqctl.cli.flags import ClusterSelection
from nsqctl.connection import TLSSettings
from nsqctl.secrets import AUTH_SECRET_ENV, Secret
from tests.helpers.certs import make_tls_files


def test_a_session_connects_as_the_serving_dashboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AUTH_SECRET_ENV, "what-the-test-started-with")  # restored after
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
