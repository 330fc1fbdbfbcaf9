"""``sandbox up`` over a stopped sandbox's directory: refused only when the new redesign
nsqds would not be the ones the old etcd places topics on (hand-made state files: nothing
is started)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nsqctl.cli.commands.sandbox import refuse_stale_redesign
from nsqctl.errors import ConfigError
from nsqctl.servers import cluster
from nsqctl.servers.process import NodeRecord
from tests.helpers.cli import assert_one_line_error, run_main

BASE = 24100
#: an executable no process runs: the recorded PID (this test's own) is not that node's
GONE = "/nonexistent/nsqctl-stopped-server"


def stopped_sandbox(
    directory: Path, flavor: str, nsqd: int, *, became_healthy: bool = True
) -> cluster.Cluster:
    """A stopped sandbox laid out as ``sandbox up --port-base BASE --nsqd N`` lays it out."""
    c = cluster.Cluster(flavor=flavor, directory=directory, became_healthy=became_healthy)  # type: ignore[arg-type]
    for i, (host, tcp, http) in enumerate(
        cluster.planned_nsqd_addresses(flavor, nsqd, 1, BASE, False)
    ):
        c.nodes.append(
            NodeRecord(
                role="nsqd",
                name=f"nsqd{i}",
                exe=GONE,
                pid=os.getpid(),
                tcp_port=tcp,
                http_port=http,
                host=host,
            )
        )
    directory.mkdir(parents=True, exist_ok=True)
    c.save()
    return c


def planned(nsqd: int, base: int = BASE) -> list[tuple[str, int, int]]:
    return cluster.planned_nsqd_addresses("redesign", nsqd, 1, base, False)


def test_an_original_start_over_a_stopped_redesign_sandbox_is_not_refused(tmp_path: Path) -> None:
    stopped_sandbox(tmp_path, "redesign", 2)
    refuse_stale_redesign(tmp_path, "original", None)


def test_a_restart_on_the_same_ports_is_not_refused(tmp_path: Path) -> None:
    stopped_sandbox(tmp_path, "redesign", 2)
    refuse_stale_redesign(tmp_path, "redesign", planned(2))
    refuse_stale_redesign(tmp_path, "redesign", planned(3))  # more nsqds keep the old ones


def test_a_sandbox_that_never_came_up_healthy_is_not_refused(tmp_path: Path) -> None:
    stopped_sandbox(tmp_path, "redesign", 2, became_healthy=False)
    refuse_stale_redesign(tmp_path, "redesign", None)
    # and the state file says so (a failed start saves it)
    assert cluster.Cluster.load(tmp_path).became_healthy is False


@pytest.mark.parametrize(
    "ports",
    [None, "fewer", "other-base"],
    ids=["free-ports", "fewer-nsqd", "other-port-base"],
)
def test_a_redesign_start_on_other_nsqds_is_refused(tmp_path: Path, ports: str | None) -> None:
    stopped_sandbox(tmp_path, "redesign", 2)
    new = {None: None, "fewer": planned(1), "other-base": planned(2, BASE + 100)}[ports]
    with pytest.raises(ConfigError, match="--port-base"):
        refuse_stale_redesign(tmp_path, "redesign", new)


def test_a_state_file_without_the_healthy_mark_counts_as_healthy(tmp_path: Path) -> None:
    stopped_sandbox(tmp_path, "redesign", 1)
    state = tmp_path / cluster.STATE_FILE
    state.write_text(state.read_text().replace('"became_healthy": true,', ""))
    assert cluster.Cluster.load(tmp_path).became_healthy is True


def test_the_refusal_is_bad_input(tmp_path: Path) -> None:
    stopped_sandbox(tmp_path, "redesign", 2)
    proc = run_main("sandbox", "up", "--flavor", "redesign", "--nsqd", "2", "--dir", str(tmp_path))
    line = assert_one_line_error(proc, 2)
    assert "stopped redesign sandbox" in line


def test_a_redesign_start_over_etcd_data_an_original_sandbox_outlived_is_refused(
    tmp_path: Path,
) -> None:
    """redesign up, down, original up, down, redesign up on other ports: the original's
    state replaced the redesign nsqds the etcd data still places topics on, so nothing is
    left to compare the new ones with: refused, naming the way out."""
    stopped_sandbox(tmp_path, "original", 2)
    (tmp_path / "etcd" / "data" / "member").mkdir(parents=True)
    with pytest.raises(ConfigError) as info:
        refuse_stale_redesign(tmp_path, "redesign", planned(2, base=BASE + 100))
    assert "etcd data of an earlier redesign sandbox" in str(info.value)
    assert "sandbox down --purge" in str(info.value)
    refuse_stale_redesign(tmp_path, "original", None)  # an original start has no etcd
