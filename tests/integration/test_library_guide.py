"""Every example of docs/library.md runs, as written, against a real cluster.

The guide's ```python blocks are complete programs. Each is preceded by a marker saying
which cluster it needs, and the topic it needs on the redesign (where topics are created
by an operator, before any publish):

    <!-- run: original -->
    <!-- run: redesign partitions=2 [ordered] [channel=NAME] -->
    <!-- run: tls -->

A block without a marker fails. Each block runs in its own Python process (so it is run
exactly as a reader would run it) and must exit 0; the examples assert their own
results. They run one after another, in the guide's order, with one ``TOPIC`` per
cluster, as a reader runs them on one sandbox (so an example that leaves something
behind for the next one fails here too); the original NSQ's in one test, since they
share its cluster's state. What a block gets in its environment:

* ``TOPIC``: one name for all the blocks of a cluster; each block publishes to a topic
  of its own, ``TOPIC`` plus the suffix its code adds (:data:`OWN_TOPIC`), which on the
  redesign is made as its marker says before any block runs;
* original: ``LOOKUPD_HTTP`` and ``NSQD_TCP`` of the session's original cluster;
* redesign: ``LOOKUPD_HTTP`` of the session's redesign cluster, the topic created with the
  marker's partitions (replicas 1) and its channel created before anything is published
  (a redesign channel made later starts at the end of the topic);
* tls: ``NSQD_TCP`` of an original nsqd offering TLS and requiring AUTH (through
  tests/helpers/auth_server.py), ``TLS_CA_FILE`` and ``NSQ_AUTH_SECRET``.

``NSQCTL_STATE_DIR`` points into the test's temporary directory, so examples that give up
on messages write their dead letters there.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nsqctl.servers import cluster
from tests.helpers.auth_server import AuthServer
from tests.helpers.certs import TLSFiles, make_tls_files, nsqd_tls_args
from tests.helpers.redesign import TopicSpec, create_topics

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "library.md"
KINDS = ("original", "redesign", "tls")
#: seconds one example may take (the slowest waits for a deferred message)
BLOCK_TIMEOUT = 60.0
AUTH_SECRET = f"guide-s3cret-{uuid.uuid4().hex}"

FENCE = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)
#: how a block names its own topic: TOPIC and a suffix
OWN_TOPIC = re.compile(r'^TOPIC = os\.environ\["TOPIC"\] \+ "(\w+)"', re.M)
MARKER = re.compile(r"<!--\s*run:\s*(?P<spec>[^>]*?)\s*-->\s*\Z")


@dataclass(frozen=True)
class Block:
    """One ```python block of the guide and what its marker asks for."""

    line: int
    code: str
    kind: str | None  # None: no marker
    partitions: int = 1
    ordered: bool = False
    channel: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"L{self.line}-{self.kind or 'unmarked'}"

    @property
    def suffix(self) -> str:
        """What the block adds to ``TOPIC`` for its own topic ("" when it adds nothing)."""
        match = OWN_TOPIC.search(self.code)
        return match.group(1) if match else ""


def parse_guide(text: str) -> list[Block]:
    """Every python block of ``text`` with the marker on the line(s) just before it."""
    blocks = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip()
        marker = MARKER.search(before)
        if marker is None:
            blocks.append(Block(line, match.group(1), None))
            continue
        kind, *words = marker.group("spec").split()
        options: dict[str, str] = {}
        problems = [] if kind in KINDS else [f"unknown cluster kind {kind!r}"]
        for word in words:
            name, _, value = word.partition("=")
            if name not in ("partitions", "ordered", "channel"):
                problems.append(f"unknown marker option {word!r}")
            options[name] = value
        blocks.append(
            Block(
                line,
                match.group(1),
                kind,
                partitions=int(options.get("partitions") or 1),
                ordered="ordered" in options,
                channel=options.get("channel") or None,
                problems=problems,
            )
        )
    return blocks


BLOCKS = parse_guide(GUIDE.read_text(encoding="utf-8"))
REDESIGN = [b for b in BLOCKS if b.kind == "redesign"]
ORIGINAL = [b for b in BLOCKS if b.kind == "original"]


def test_the_guide_has_examples_of_every_kind() -> None:
    """The parser found the blocks (a changed fence or marker would make it find none)."""
    kinds = [b.kind for b in BLOCKS]
    assert len(BLOCKS) >= 10, kinds
    assert {"original", "redesign", "tls"} <= set(kinds), kinds


def test_each_example_sharing_a_cluster_has_a_topic_of_its_own() -> None:
    """Run in order on one sandbox, examples sharing a topic would see each other's
    messages (or, on the original NSQ, miss their own: a channel made after a publish)."""
    for kind in ("original", "redesign"):
        suffixes = [b.suffix for b in BLOCKS if b.kind == kind]
        assert all(suffixes) and len(set(suffixes)) == len(suffixes), (kind, suffixes)


def test_the_parser_sees_markers_and_their_absence() -> None:
    text = (
        "Intro.\n\n<!-- run: redesign partitions=2 ordered channel=c1 -->\n"
        "```python\nprint(1)\n```\n\nNo marker here:\n\n```python\nprint(2)\n```\n"
        "<!-- run: tls -->\n\n```python\nprint(3)\n```\n<!-- run: nowhere x=1 -->\n"
        "```python\nprint(4)\n```\n"
    )
    first, unmarked, tls, bad = parse_guide(text)
    assert (first.kind, first.partitions, first.ordered, first.channel) == (
        "redesign",
        2,
        True,
        "c1",
    )
    assert first.code == "print(1)\n" and first.line == 4 and not first.problems
    assert unmarked.kind is None and unmarked.code == "print(2)\n"
    assert tls.kind == "tls" and (tls.partitions, tls.channel) == (1, None)
    assert bad.problems == ["unknown cluster kind 'nowhere'", "unknown marker option 'x=1'"]


# --------------------------------------------------------------------------- clusters


@pytest.fixture(scope="module")
def redesign_topic(redesign_cluster: cluster.Cluster) -> str:
    """``TOPIC`` for the redesign blocks, and each block's own topic made as its marker
    says, all at once: nsqlookupd makes new topics writable in one periodic check, so
    several cost about as much as one."""
    base = f"guide_{uuid.uuid4().hex[:10]}"

    async def create() -> None:
        await asyncio.gather(
            *(
                create_topics(
                    redesign_cluster.lookupd_http,
                    {base + b.suffix: TopicSpec(partitions=b.partitions, ordered=b.ordered)},
                    channels=(b.channel,) if b.channel else (),
                )
                for b in REDESIGN
            )
        )

    asyncio.run(create())
    return base


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls_files(tmp_path_factory.mktemp("guide-tls"))


@pytest.fixture(scope="module")
def tls_nsqd(
    original_bins: Path, tmp_path_factory: pytest.TempPathFactory, tls_files: TLSFiles
) -> Iterator[cluster.Cluster]:
    """One original nsqd offering TLS (with the test CA) and requiring AUTH."""
    with AuthServer(AUTH_SECRET) as auth:
        args = [*nsqd_tls_args(tls_files), f"--auth-http-address={auth.address}"]
        c = cluster.start(
            "original",
            tmp_path_factory.mktemp("guide-tls-nsqd"),
            nsqd=1,
            lookupd=1,
            bin_dir=original_bins,
            nsqd_args=args,
        )
        try:
            yield c
        finally:
            c.stop()


# --------------------------------------------------------------------------- the blocks


def _marks(block: Block) -> list[pytest.MarkDecorator]:
    return [pytest.mark.redesign] if block.kind == "redesign" else [pytest.mark.original]


def run_block(block: Block, env: dict[str, str], tmp_path: Path) -> None:
    """Run ``block`` as a program, as a reader would; it must exit 0."""
    script = tmp_path / f"guide_line_{block.line}.py"
    script.write_text(block.code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )
    assert proc.returncode == 0, (
        f"docs/library.md line {block.line} ({block.kind}, TOPIC {env['TOPIC']}) exited "
        f"{proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )


@pytest.mark.original
def test_the_original_examples_run_in_order_on_one_topic(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    assert len(ORIGINAL) >= 5, [b.line for b in ORIGINAL]
    env = {
        **os.environ,
        "NSQCTL_STATE_DIR": str(tmp_path / "state"),
        "LOOKUPD_HTTP": original_cluster.lookupd_http[0],
        "NSQD_TCP": original_cluster.nsqd_tcp[0],
        "TOPIC": f"guide_{uuid.uuid4().hex[:10]}",
    }
    for block in ORIGINAL:
        assert not block.problems, f"docs/library.md line {block.line}: {block.problems}"
        run_block(block, env, tmp_path)


@pytest.mark.parametrize(
    "block",
    [pytest.param(b, id=b.id, marks=_marks(b)) for b in BLOCKS if b.kind != "original"],
)
def test_guide_example_runs(block: Block, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if block.kind is None:
        pytest.fail(
            f"docs/library.md line {block.line}: a python block without a run marker "
            "(<!-- run: original|redesign|tls --> on the line before it)"
        )
    assert not block.problems, f"docs/library.md line {block.line}: {block.problems}"
    env = {**os.environ, "NSQCTL_STATE_DIR": str(tmp_path / "state")}
    if block.kind == "redesign":
        c: cluster.Cluster = request.getfixturevalue("redesign_cluster")
        topic = request.getfixturevalue("redesign_topic")
        env.update(LOOKUPD_HTTP=c.lookupd_http[0])
    else:
        c = request.getfixturevalue("tls_nsqd")
        files: TLSFiles = request.getfixturevalue("tls_files")
        topic = f"guide_{uuid.uuid4().hex[:10]}"
        env.update(
            NSQD_TCP=c.nsqd_tcp[0], TLS_CA_FILE=str(files.ca_cert), NSQ_AUTH_SECRET=AUTH_SECRET
        )
    env["TOPIC"] = topic
    run_block(block, env, tmp_path)
