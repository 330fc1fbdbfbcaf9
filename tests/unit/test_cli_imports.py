"""What each command imports: the deterministic guard of nsqctl's start-up time.

``nsqctl --help`` and ``nsqctl version --client`` must not load any heavy dependency, and
each command's ``--help`` loads exactly the heavy modules listed in :data:`EXPECTED` (its
own module and what that module needs to parse its options), so a stray top-level import
shows up here as a failure instead of as 100 ms nobody notices. The modules are read from
``python -X importtime`` running the real console script. Speed itself is measured in
``bench/bench_startup.py``, never here.
"""

from __future__ import annotations

import json

import pytest

from nsqctl.cli.app import COMMANDS, Entry, load
from tests.helpers.cli import NSQCTL, clean_env, run_cli, run_python

#: Dependencies (and nsqctl parts) that cost tens of milliseconds or more to import.
HEAVY = (
    "asyncio",
    "click",
    "h11",
    "httpx",
    "nsqctl.admin",
    "nsqctl.connection",
    "nsqctl.consumer",
    "nsqctl.pipeline",
    "nsqctl.producer",
    "nsqctl.profiles",
    "nsqctl.protocol",
    "nsqctl.stats",
    "msgspec",
    "pyarrow",
    "pydantic",
    "pyspark",
    "rich",
    "textual",
    "tui",
)

# The client commands look topics up over h11 (nsqctl/lookup/fetch.py), never httpx, and
# load it with their first lookup, not with their options. The package nsqctl.protocol
# (every codec, reply and frame type) loads with what speaks NSQ or names its topics, never
# with the read-only guard every command loads.
_CLIENT = {"asyncio", "nsqctl.connection", "nsqctl.producer", "nsqctl.protocol"}
_STATS = {"asyncio", "h11", "httpx", "msgspec", "nsqctl.protocol", "nsqctl.stats"}
_ADMIN = {"asyncio", "h11", "httpx", "nsqctl.admin", "nsqctl.protocol"}

#: The heavy modules each command's ``--help`` may load (no more, no fewer).
EXPECTED: dict[str, set[str]] = {
    "pub": _CLIENT,
    "tail": {"asyncio", "nsqctl.connection", "nsqctl.consumer", "nsqctl.protocol"},
    "peek": {"asyncio", "nsqctl.protocol"},  # the message type its formats print
    "lookup": _ADMIN,
    "version": set(),
    "stat": _STATS,
    "top": _STATS,  # rich loads only to draw the table
    "dash": _STATS,
    "check": _STATS,
    "exporter": _STATS,  # prometheus_client loads only when it serves
    "archive": {"asyncio", "nsqctl.protocol"},  # pyarrow and the archiver: when it runs
    "replay": {"asyncio", "nsqctl.protocol"},  # pyspark loads only when it runs
    "trace": set(),  # pyspark loads only when it runs
    "sandbox": _ADMIN | {"rich"},
    "config": {"nsqctl.profiles", "nsqctl.protocol", "rich"},
    "topic": _ADMIN,
    "channel": _ADMIN,
    "dead-letter": _CLIENT | {"rich"},
    "completion": set(),
    "node": _ADMIN,  # the drain (and the stats model) loads only when it runs
}


def heavy_imports(*args: str) -> set[str]:
    """The :data:`HEAVY` packages ``nsqctl ARGS`` imports (top-level names, or the nsqctl
    sub-package), from ``-X importtime`` of the console script."""
    proc = run_python("-X", "importtime", NSQCTL, *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    modules = _own_imports(proc.stderr)
    return {h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in modules)}


def _own_imports(importtime: str) -> set[str]:
    """Modules named in ``-X importtime`` output. Everything counts, third-party imports
    included: httpx would load click and rich (its own CLI) where click is installed, which
    nsqctl's entry point prevents (``skip_httpx_cli``), and this is where that shows."""
    names = set()
    for line in importtime.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def test_top_level_help_imports_nothing_heavy() -> None:
    assert heavy_imports("--help") == set()


def test_client_version_imports_nothing_heavy() -> None:
    assert heavy_imports("version", "--client") == set()


def test_every_command_has_an_expectation() -> None:
    assert {e.name for e in COMMANDS} == set(EXPECTED), "add the new command to EXPECTED"


@pytest.mark.parametrize("name", [e.name for e in COMMANDS])
def test_command_help_imports(name: str) -> None:
    assert heavy_imports(name, "--help") == EXPECTED[name]


def test_the_guard_sees_imports() -> None:
    """The parser finds heavy modules when they are imported (the test above can fail)."""
    assert "httpx" in heavy_imports("topic", "--help")


@pytest.mark.parametrize("entry", COMMANDS, ids=[e.name for e in COMMANDS])
def test_listed_help_is_the_command_own(entry: Entry) -> None:
    """``nsqctl --help`` lists each command from :data:`COMMANDS` without importing it:
    the text there must be what the command itself says."""
    assert load(entry).get_short_help_str(limit=200) == entry.help


def test_client_version_asks_no_server() -> None:
    """``--client`` prints the version alone even with a cluster configured (unreachable
    here): no connection attempt, no hint."""
    from nsqctl import __version__

    env = clean_env({"NSQCTL_LOOKUPD": "127.0.0.1:1", "NSQCTL_NSQD_HTTP": "127.0.0.1:1"})
    proc = run_cli(["version", "--client"], env=env)
    assert proc.returncode == 0 and proc.stderr == b""
    assert proc.stdout.decode() == f"nsqctl {__version__}\n"
    as_json = json.loads(run_cli(["version", "--client", "--json"], env=env).stdout)
    # no server asked, so none went unread: complete, as version --json always says
    assert as_json == {
        "client": {"name": "nsqctl", "version": __version__},
        "servers": [],
        "complete": True,
    }


def test_httpx_own_cli_still_loads_when_called() -> None:
    """The placeholder for httpx's CLI module hands over to the real one on first use."""
    code = (
        "import sys\n"
        "from nsqctl.cli.app import skip_httpx_cli\n"
        "skip_httpx_cli()\n"
        "import httpx\n"
        "assert 'rich.console' not in sys.modules and 'click' not in sys.modules\n"
        "try:\n"
        "    httpx.main(['--help'])\n"
        "except SystemExit as done:\n"
        "    assert done.code == 0, done.code\n"
        "assert sys.modules['httpx._main'].__file__.endswith('_main.py')\n"
    )
    proc = run_python("-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Usage: httpx" in proc.stdout


def test_the_client_lookup_path_imports_no_httpx() -> None:
    """A consumer's or producer's lookups (and a consumer's resume, until it reads /stats)
    go over h11 (nsqctl/lookup/fetch.py): httpx, httpcore and anyio stay out of tail's and
    pub's start-up. h11 is the only HTTP path a lookup takes."""
    code = (
        "import sys, asyncio, nsqctl.lookup.client, nsqctl.consumer.resume, "
        "nsqctl.producer.discovery\n"
        "async def main():\n"
        "    async with nsqctl.lookup.client.LookupClient(['127.0.0.1:1'], timeout=1):\n"
        "        pass\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in ('httpx', 'httpcore', 'anyio') if m in sys.modules))"
    )
    proc = run_python("-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_consumer_loads_its_dead_letter_file_only_to_give_up() -> None:
    """``nsqctl tail`` builds a Consumer, whose default giving-up hook is the dead-letter
    file: the module (and its state directory's) loads with the first message given up
    on, not at start-up (that it still writes there: tests/integration/test_consumer.py)."""
    code = (
        "import sys\n"
        "from nsqctl.consumer import Consumer\n"
        "Consumer('t', 'c', lambda msg: None, nsqd_tcp=['127.0.0.1:1'])\n"
        "print(sorted(m for m in ('nsqctl.deadletter', 'nsqctl.paths') if m in sys.modules))\n"
        "from nsqctl.consumer import DeadLetterFile\n"
        "print(DeadLetterFile.__module__)"
    )
    proc = run_python("-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["[]", "nsqctl.deadletter"]


#: The dataclasses nsqctl builds on ``nsqctl tail``'s path, and why each is one. Python 3.11
#: compiles a dataclass's methods as its module loads (about a millisecond a class, at
#: every start): a private record that needs none of what a dataclass gives
#: (``replace``, ``fields``, ``asdict``, default factories, a generated ``__eq__`` or
#: ``__repr__`` someone reads) is a NamedTuple or a plain class with ``__slots__``.
TAIL_PATH_DATACLASSES = {
    # public (nsqctl.__all__), or handed out by a public class (Topology, LookupClient):
    # a caller may replace(), fields() or asdict() them
    "nsqctl.connection.config.ConnectionConfig",
    "nsqctl.connection.config.TLSSettings",
    "nsqctl.consumer.options.ConsumerOptions",
    "nsqctl.consumer.order.OrderViolation",
    "nsqctl.consumer.stats.ConsumerStats",
    "nsqctl.failover.FailoverEvent",
    "nsqctl.lookup.topology.Topology",
    "nsqctl.lookup.topology.LookupAnswer",
    "nsqctl.lookup.topology.LookupdList",
    "nsqctl.lookup.topology.LookupdNode",
    "nsqctl.lookup.topology.PartitionInfo",
    "nsqctl.lookup.topology.PartitionSlot",
    "nsqctl.lookup.topology.Peer",  # LookupClient.nodes is asdict() of them
    "nsqctl.lookup.topology.SourceStatus",
    "nsqctl.lookup.topology.TopicMeta",
    "nsqctl.addresses.HostPort",  # ordered, hashed and compared everywhere
    # built with default factories, or read with fields()/replace()
    "nsqctl.protocol.replies.IdentifyResponse",
    # tail's --grep/--jq-field filter
    "nsqctl.cli.commands.tail.MessageFilter",
    # validated in __post_init__, hashed (a NamedTuple cannot check its fields)
    "nsqctl.protocol.raw_message.MessageLayout",
    # its field ``count`` would hide tuple.count in a NamedTuple
    "nsqctl.flow.rdy.RdyUpdate",
}


def test_tail_path_builds_only_the_listed_dataclasses() -> None:
    """The modules ``nsqctl tail`` loads (its command and what it loads as it runs: the
    profiles, the lookups, the resume) build exactly the dataclasses listed in
    :data:`TAIL_PATH_DATACLASSES`: a new one on that path is a choice made here, with its
    reason, not a millisecond nobody notices."""
    code = (
        "import dataclasses\n"
        "built = []\n"
        "process = dataclasses._process_class\n"
        "def record(cls, *args, **kwargs):\n"
        "    built.append(f'{cls.__module__}.{cls.__qualname__}')\n"
        "    return process(cls, *args, **kwargs)\n"
        "dataclasses._process_class = record\n"
        "import nsqctl.cli.app, nsqctl.cli.commands.tail, nsqctl.consumer.resume\n"
        "import nsqctl.lookup.client, nsqctl.lookup.wire, nsqctl.profiles\n"
        "print('\\n'.join(n for n in built if n.startswith('nsqctl.')))"
    )
    proc = run_python("-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set(proc.stdout.split()) == TAIL_PATH_DATACLASSES


def test_a_given_config_path_loads_no_platformdirs() -> None:
    """platformdirs (its import costs more than the rest of nsqctl.profiles) loads only to
    find the default config path: with ``NSQCTL_CONFIG`` set, reading the config does not
    load it; without, it still names the platform's config directory."""
    code = (
        "import os, sys\n"
        "from nsqctl.profiles import config_path, load_config\n"
        "load_config()\n"
        "print('platformdirs' in sys.modules)\n"
        "del os.environ['NSQCTL_CONFIG']\n"
        "import platformdirs\n"
        "print(config_path().parent == __import__('pathlib').Path("
        "platformdirs.user_config_dir('nsqctl')))"
    )
    proc = run_python("-c", code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["False", "True"]
