"""``nsqctl completion SHELL`` prints a script a real shell can load, and the shell then
completes through nsqctl itself (bash driven as a user's shell would be)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import typer
from typer.core import TyperCommand

from nsqctl import Producer
from nsqctl.cli import complete
from nsqctl.cli.gendocs import SHELLS
from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import clean_env, run_cli

NSQCTL = Path(sys.executable).parent / "nsqctl"
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_the_printed_script_is_the_committed_one(shell: str) -> None:
    out = subprocess.run(
        [str(NSQCTL), "completion", shell], capture_output=True, text=True, check=True
    )
    assert out.stdout == (REPO / "completions" / SHELLS[shell]).read_text()


def test_an_unknown_shell_is_one_line_and_exit_2() -> None:
    out = subprocess.run([str(NSQCTL), "completion", "tcsh"], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1
    assert "tcsh" in out.stderr


def test_bash_completes_commands_after_eval() -> None:
    bash = shutil.which("bash")
    assert bash is not None
    script = (
        f'PATH="{NSQCTL.parent}:$PATH"\n'
        'eval "$(nsqctl completion bash)"\n'
        "COMP_WORDS=(nsqctl ta); COMP_CWORD=1\n"
        "_nsqctl_completion nsqctl\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    out = subprocess.run([bash, "--norc", "-c", script], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "tail" in out.stdout.split()


# --------------------------------------------------------------------------- the cluster


def _complete(words: list[str], env: dict[str, str]) -> tuple[list[str], float]:
    """What bash offers at the end of ``words`` (the last one being typed), and how long
    it took: the completion script eval'ed and its function called, as bash does on TAB."""
    bash = shutil.which("bash")
    assert bash is not None
    quoted = " ".join(f"'{w}'" for w in words)
    script = (
        f'PATH="{NSQCTL.parent}:$PATH"\n'
        'eval "$(nsqctl completion bash)"\n'
        f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
        "_nsqctl_completion nsqctl\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    started = time.monotonic()
    out = subprocess.run(
        [bash, "--norc", "-c", script], capture_output=True, text=True, timeout=30, env=env
    )
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if line], took


async def test_topics_channels_and_profiles_complete_from_the_cluster(
    original_cluster: Cluster, tmp_path: Path
) -> None:
    lookupd = original_cluster.lookupd_http[0]
    topic = f"compl_{uuid.uuid4().hex[:8]}"
    async with Producer(nsqd_tcp=original_cluster.nsqd_tcp[:1]) as producer:
        await producer.publish(topic, b"x")
    made = run_cli(["channel", "create", topic, "audit", "--lookupd", lookupd])
    assert made.returncode == 0, made.stderr
    config = tmp_path / "nsqctl.toml"
    config.write_text(f'[profiles.sandbox]\nlookupd = ["{lookupd}"]\n[profiles.staging]\n')
    # What is offered, not how fast (the silent-cluster test bounds that): a loaded machine
    # can take more than the default half second to ask the lookupd, and offer nothing.
    patient = {complete.DEADLINE_ENV: "30"}
    env = clean_env({"NSQCTL_LOOKUPD": lookupd, **patient}, config=config)

    # topics from the lookupd in the environment
    offered, _ = _complete(["nsqctl", "lookup", "compl_"], env)
    assert topic in offered
    # channels of the topic on the line, from a lookupd typed on the line
    flag_env = clean_env(patient, config=config)
    words = ["nsqctl", "channel", "empty", "--lookupd", lookupd, topic, ""]
    offered, _ = _complete(words, flag_env)
    assert offered == ["audit"]
    # the cluster of a profile named on the line
    words = ["nsqctl", "channel", "empty", "--profile", "sandbox", topic, "au"]
    offered, _ = _complete(words, flag_env)
    assert offered == ["audit"]
    # tail: topics, and the channels of the topic on the line
    offered, _ = _complete(["nsqctl", "tail", "compl_"], env)
    assert topic in offered
    offered, _ = _complete(["nsqctl", "tail", topic, "-c", ""], env)
    assert offered == ["audit"]
    # nsqd nodes (their HTTP addresses, as lookup and dash show them) for topic move --to
    offered, _ = _complete(["nsqctl", "topic", "move", topic, "--to", ""], env)
    assert sorted(offered) == sorted(original_cluster.nsqd_http)
    # profiles from the config file
    offered, _ = _complete(["nsqctl", "lookup", "--profile", "s"], flag_env)
    assert offered == ["sandbox", "staging"]


def _line(**params: object) -> typer.Context:
    """A parsed command line as completion sees it: a context holding its parameters."""
    ctx = typer.Context(TyperCommand("nsqctl"))
    ctx.params = dict(params)
    return ctx


def test_an_unreachable_or_silent_cluster_completes_nothing_within_a_second() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections and never answers
    try:
        for address in (f"127.0.0.1:{silent.getsockname()[1]}", "127.0.0.1:1"):
            # the network part, in process: one deadline for all of it
            line = _line(lookupd=[address, address, address], topic="t")
            for complete_fn in (complete.topics, complete.channels, complete.nodes):
                started = time.monotonic()
                assert complete_fn(line, "") == [], (address, complete_fn)
                assert time.monotonic() - started < 1.0, (address, complete_fn)
            # and the shell: nothing offered, no error printed into it, no hang
            env = clean_env({"NSQCTL_LOOKUPD": address})
            offered, took = _complete(["nsqctl", "lookup", ""], env)
            assert offered == [] and took < 10, (address, took)
    finally:
        silent.close()


def test_the_completion_deadline_comes_from_the_environment_and_ignores_nonsense(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for raw, expected in (("", 0.5), ("2.5", 2.5), ("x", 0.5), ("0", 0.5), ("inf", 0.5)):
        monkeypatch.setenv(complete.DEADLINE_ENV, raw)
        assert complete.completion_deadline() == expected, raw
