"""The soak's short version (``bench/soak.py`` runs the same engine for 30 minutes).

Real clusters of their own (faults kill and stop servers): the redesign with 3 nsqd takes
three faults during keyed publishing read by ``tail --ordered`` and ``tail`` — kill -9 of
an nsqd, SIGSTOP of one, an nsqlookupd restart; the original with 2 nsqd takes a SIGSTOP.
Nothing OK'd may be lost, the ordered consumer may see no key out of order, the unordered
tails may answer nothing they did not print, every OK'd message must be stored, and no
nsqctl process may gain more than a few file descriptors.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from nsqctl.servers.catalog import Flavor
from tests.conftest import StartCluster
from tests.helpers.soak import SoakPlan, SoakReport, run_soak

#: open fds an nsqctl process may gain between its first and last sample (a reconnect in
#: progress holds a socket or two); a leak of one per fault and connection grows past it
FD_SLACK = 4


def check(report: SoakReport) -> None:
    for topic in report.topics:
        assert topic.pub_exit == 0, topic
        assert topic.okd == topic.written > 0, topic
        assert topic.stored >= topic.okd, topic
    for consumer in report.consumers:
        assert consumer.lost == 0, consumer.losses or consumer
        # every message the unordered tail answered (its trace log) it also printed
        assert consumer.reached_not_printed == 0, consumer
        if consumer.ordered:
            assert consumer.order_violations == 0, consumer
    for proc in report.processes:
        fds = [s[2] for s in proc.samples]
        assert len(fds) >= 3, proc.summary()
        # The first samples are taken while the processes start and connect (a tail's
        # first can come before its sockets): the baseline is the most the first third
        # held, and a leak shows as growth past it by the end.
        baseline = max(fds[: len(fds) // 3])
        assert fds[-1] - baseline <= FD_SLACK, proc.summary()


def short(family: Flavor, *faults: str) -> SoakPlan:
    """Faults one after the other as soon as the cluster is whole again; a SIGSTOP shorter
    than the 30 s heartbeat (the 30-minute soak's are longer)."""
    return SoakPlan(
        family,
        seconds=0,
        faults=faults,
        interval=(1.0, 1.0),
        first_fault=2.0,
        rate=100,
        stop_seconds=4.0,
        sample_every=1.0,
    )


def test_soak_short(start_cluster: StartCluster, tmp_path: Path) -> None:
    """Both families at once (the budget is CI's): the original's soak on a thread, the
    redesign's here, since a restarted server dies with the thread that started it."""
    redesign = start_cluster("redesign", nsqd=3)
    original = start_cluster("original", nsqd=2, nsqd_args=["--mem-queue-size=0"])
    with ThreadPoolExecutor(1) as pool:
        side = pool.submit(
            run_soak,
            original,
            short("original", "sigstop"),
            tmp_path / "original",
        )
        report = run_soak(
            redesign,
            short("redesign", "kill9", "sigstop", "lookupd"),
            tmp_path / "redesign",
        )
        original_report = side.result()
    assert [f.kind for f in report.faults] == ["kill9", "sigstop", "lookupd"]
    assert not [f for f in report.faults if f.outcome.startswith("failed")], report.faults
    assert report.faults[0].outcome.startswith("new leaders"), report.faults[0]
    check(report)
    assert [f.kind for f in original_report.faults] == ["sigstop"]
    check(original_report)
