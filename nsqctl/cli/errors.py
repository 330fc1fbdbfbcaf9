"""The CLI's wording of library errors: the library names the setting that would change
an outcome (``err.setting``, a keyword argument such as ``failover_window``); a CLI user
has flags instead, so the one-line message gains the flag to reach for.

Kept apart from the library so that its messages stay about the library (a Python caller
has no ``--failover-window``), and in one table so that a renamed flag is renamed once.
"""

from __future__ import annotations

from nsqctl.errors import NsqctlError

#: library setting -> what a CLI user changes instead
SETTING_FLAGS: dict[str, str] = {
    "lookupd_http": "--lookupd HOST:PORT (or a profile's lookupd)",
    "nsqd_tcp": "--nsqd HOST:PORT",
    "nsqd_http": "--nsqd-http HOST:PORT",
    "failover_window": "--failover-window SECONDS",
    "connect_timeout": "--connect-timeout SECONDS",
    "partition": "--partition",
    "partitions": "--partition",
    "start": (
        "--from-start/--from-time/--from-offset; an ordered channel is moved first with "
        "`nsqctl channel setoffset TOPIC CHANNEL --partition P`, then read with --ordered"
    ),
    "ordered": "--ordered",
    "tls": "--tls",
    "max_in_flight": "--max-in-flight",
    "delay": "--defer",
    "tls_ca": "--tls-ca FILE (or --tls-insecure for a self-signed test server)",
    "tls_cert": "--tls-cert FILE --tls-key FILE",
    "tls_key": "--tls-key FILE",
    "tls_insecure": "--tls-insecure",
    "auth_secret": "--auth-secret-file FILE or NSQCTL_AUTH_SECRET",
    "compression": "--compression",
    "max_body_size": "--batch",
    "timeout": "--timeout SECONDS",
    "interval": "--interval SECONDS",
    "wait": "--wait SECONDS",
    "node": "--node NSQD",
    "borrow": "--borrow N",
    "count": "--count/-n",
    "offset": "--from-offset/--from-time",
    "samples": "--samples N",
    "key": "--sort",
}


def cli_message(err: NsqctlError) -> str:
    """``str(err)``, plus the flag that corresponds to the setting it names."""
    text = str(err)
    flag = SETTING_FLAGS.get(err.setting or "")
    if flag is None or flag.split()[0] in text:
        return text
    return f"{text} (flag: {flag})"
