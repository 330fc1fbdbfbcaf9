"""The words every view uses for the nsqlookupds it could not rely on (model only: the
real servers' cells are in tests/integration/test_degraded_views*.py)."""

from __future__ import annotations

from nsqctl.stats.coverage import coverage
from nsqctl.stats.model import ClusterSnapshot, LookupdStatus, NodeStats
from nsqctl.stats.view import build_view

NSQD = NodeStats(address="127.0.0.1:4151", fetched_at=1.0, state="up")
A, B = "127.0.0.1:4161", "127.0.0.1:4261"


def _coverage(*lookupds: LookupdStatus) -> list[str]:
    view = build_view(ClusterSnapshot(1.0, (NSQD,), lookupds=lookupds))
    seen = coverage(view)
    assert seen.complete is (not seen.warnings("x"))
    return seen.warnings("this list")


def test_every_lookupd_down_says_only_the_nsqds_were_asked() -> None:
    assert _coverage(LookupdStatus(A, ok=False), LookupdStatus(B, ok=False)) == [
        f"nsqlookupd {A}, {B} not answering: only the nsqds were asked; this list may be incomplete"
    ]


def test_one_lookupd_of_two_down_says_the_others_were_asked() -> None:
    assert _coverage(LookupdStatus(A, ok=False), LookupdStatus(B, ok=True)) == [
        f"nsqlookupd {A} not answering: the other nsqlookupds were asked; "
        "this list may be incomplete"
    ]


def test_a_lookupd_without_etcd_says_its_topology_may_be_out_of_date() -> None:
    [line] = _coverage(LookupdStatus(A, ok=True, etcd_error="etcd cluster is unavailable"))
    assert line.startswith(f"nsqlookupd {A} cannot reach etcd (etcd cluster is unavailable): ")
    assert "no partition can get a new leader" in line
    assert line.endswith("this list may be out of date")


def test_lookupds_that_answer_raise_nothing() -> None:
    assert _coverage(LookupdStatus(A, ok=True), LookupdStatus(B, ok=True)) == []
