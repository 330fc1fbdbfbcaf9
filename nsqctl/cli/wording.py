"""The CLI's wording of library errors: the library names the setting that would change
an outcome (``err.setting``, a keyword argument such as ``failover_window``); a CLI user
has flags instead, so the one-line message gains the flag to reach for.

Library messages also name settings and actions in their text, in two written forms
(see :mod:`nsqctl.errors`): a setting in backquotes (`sync_every`), and an action as a
call in backquotes, in the admin actions' words (`topic_list()`,
`channel_setoffset(orders, billing, partition=2, virtual_offset=0)`). :func:`cli_words`
turns them into what a CLI user types (``--sync-every``, ``nsqctl topic list``,
``nsqctl channel setoffset orders billing --partition 2 --virtual-offset 0``).

Kept apart from the library so that its messages stay about the library (a Python caller
has no ``--failover-window``), and in tables so that a renamed flag is renamed once.
"""

from __future__ import annotations

import re
from collections.abc import Collection

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
    "start": "--from-start/--from-time/--from-offset",
    "ordered": "--ordered",
    "tls": "--tls",
    "max_in_flight": "--max-in-flight",
    "delay": "--defer",
    "tls_ca": "--tls-ca FILE (or --tls-insecure for a self-signed test server)",
    "tls_cert": "--tls-cert FILE --tls-key FILE",
    "tls_key": "--tls-key FILE",
    "tls_insecure": "--tls-insecure",
    "tls_key_password": "--tls-key-password-file FILE or NSQCTL_TLS_KEY_PASSWORD_FILE",
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


#: a library setting written in a message's text (`name`) -> the flag a CLI user gives.
#: Apart from :data:`SETTING_FLAGS` (the advice for ``err.setting``): there ``partitions``
#: is the consumer's list (``--partition``), here the admin's count (``--partitions``).
SETTING_WORDS: dict[str, str] = {
    "lookupd_http": "--lookupd",
    "partition": "--partition",
    "partitions": "--partitions",
    "replicas": "--replicas",
    "sync_every": "--sync-every",
    "retention_days": "--retention-days",
    "ext": "--ext",
    "upgrade_ext": "--ext",
    "ordered": "--ordered",
    "channel_auto_create": "--channel-auto-create/--no-channel-auto-create",
    "to": "--to",
    "source": "--from",
    "timestamp": "--timestamp",
    "virtual_offset": "--virtual-offset",
    "msgcount": "--msgcount",
    "end": "--end",
    "engine": "--engine",
    "where": "--where",
    "spark_master": "--spark-master",
    "since_ns": "--since",
    "until_ns": "--until",
    "topics": "--topic",
    "trace_id": "--trace-id",
    "grep": "--grep",
    "checkpoint": "--checkpoint",
    "restart": "--restart",
    "from_time": "--from-time",
    "from_offset": "--from-offset",
    "internal_id": "--internal-id",
    "nsqd_tcp": "--nsqd",
    "nsqd_http": "--nsqd-http",
    "key_password": "--tls-key-password-file",
    "auth_secret": "--auth-secret-file",
    "tls_ca": "--tls-ca",
    "tls_cert": "--tls-cert",
    "tls_insecure": "--tls-insecure",
}

#: an action written in a message's text (`kind_action(...)`) -> its CLI command
ACTION_COMMANDS: dict[str, str] = {
    "topic_list": "topic list",
    "topic_create": "topic create",
    "topic_delete": "topic delete",
    "topic_update": "topic update",
    "lookup": "lookup",
    "stat": "stat",
    "dash": "dash",
    "channel_list": "channel list",
    "channel_create": "channel create",
    "channel_delete": "channel delete",
    "channel_empty": "channel empty",
    "channel_pause": "channel pause",
    "channel_unpause": "channel unpause",
    "channel_setoffset": "channel setoffset",
    "node_list": "node list",
    "node_restore": "node restore",
    "config_set_profile": "config set-profile",
    "check": "check",
}

_WRITTEN = re.compile(r"`([a-z][a-z0-9_]*)(?:\(([^`()]*)\))?`")


def _flag(name: str) -> str:
    return SETTING_WORDS.get(name, "--" + name.replace("_", "-"))


def _command(action: str, arguments: str) -> str:
    words = ["nsqctl", ACTION_COMMANDS[action]]
    for argument in filter(None, (a.strip() for a in arguments.split(","))):
        name, equals, value = argument.partition("=")
        if not equals:
            words.append(argument)
        elif value == "True":
            words.append(_flag(name))
        else:
            words += [_flag(name), value]
    return "`" + " ".join(words) + "`"


def cli_words(text: str) -> str:
    """``text`` with the settings and actions it names (module doc) as a CLI user types
    them; any other backquoted word is left as it is."""

    def spelled(found: re.Match[str]) -> str:
        name, arguments = found.group(1), found.group(2)
        if arguments is not None:
            return _command(name, arguments) if name in ACTION_COMMANDS else found.group(0)
        return SETTING_WORDS.get(name, found.group(0))

    return _WRITTEN.sub(spelled, text)


def cli_message(err: NsqctlError, options: Collection[str] | None = None) -> str:
    """``str(err)`` in the CLI's words, plus the flag that corresponds to the setting it
    names, when the command that failed has that flag: ``options`` are its option names
    (None: not known, the flag is named anyway). The library names one setting whichever
    command runs it (a publish's handshake timeout is `connect_timeout` under ``tail``
    and ``pub`` alike), and a flag the command refuses is no advice."""
    text = cli_words(str(err))
    flag = SETTING_FLAGS.get(err.setting or "")
    if flag is None or flag.split()[0] in text:
        return text
    if options is not None and not set(flag.split()[0].split("/")) & set(options):
        return text
    return f"{text} (flag: {flag})"
