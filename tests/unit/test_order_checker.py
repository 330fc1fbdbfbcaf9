"""The ordered-subscription checker: redelivery is fine, regressions and gaps are reported."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from nsqctl.consumer import OrderChecker
from nsqctl.protocol.raw_message import RawMessage


def _msg(offset: int, internal_id: int, size: int = 50) -> RawMessage:
    return RawMessage(
        timestamp=0,
        attempts=1,
        id=bytes(16),
        body=b"x",
        internal_id=internal_id,
        trace_id=0,
        offset=offset,
        size=size,
    )


def test_in_order_stream_reports_nothing() -> None:
    checker = OrderChecker("t")
    results = [checker.check("n:1", 0, _msg(i * 50, i)) for i in range(10)]
    assert results == [None] * 10


def test_redelivery_of_same_message_is_not_a_violation() -> None:
    checker = OrderChecker("t")
    assert checker.check("n:1", 0, _msg(0, 1)) is None
    assert checker.check("n:1", 0, _msg(0, 1)) is None


def test_regression_reported_and_high_water_mark_kept() -> None:
    checker = OrderChecker("t")
    checker.check("n:1", 0, _msg(100, 3))
    v = checker.check("n:1", 0, _msg(50, 2))
    assert v is not None and v.kind == "regression"
    assert (v.previous_offset, v.offset, v.partition) == (100, 50, 0)
    # the next in-order message continues from 100, not from the regressed one
    assert checker.check("n:1", 0, _msg(150, 4)) is None


def test_gap_reported_with_expected_offset() -> None:
    checker = OrderChecker("t")
    checker.check("n:1", 1, _msg(0, 10, size=40))
    v = checker.check("n:1", 1, _msg(120, 12))
    assert v is not None and v.kind == "gap" and v.expected_offset == 40


def test_partitions_are_checked_independently() -> None:
    checker = OrderChecker("t")
    checker.check("n:1", 0, _msg(500, 9))
    assert checker.check("n:1", 1, _msg(0, 1)) is None


def test_messages_without_offsets_are_not_checked() -> None:
    checker = OrderChecker("t")
    plain = RawMessage(timestamp=0, attempts=1, id=b"0" * 16, body=b"x")
    assert checker.check("n:1", None, plain) is None


def test_a_rewind_is_one_regression_then_the_check_follows_it() -> None:
    checker = OrderChecker("t")
    for i in range(10):
        checker.check("n:1", 0, _msg(i * 50, i + 1))
    v = checker.check("n:1", 0, _msg(100, 3))  # setoffset back to the third message
    assert v is not None and v.kind == "regression" and v.previous_offset == 450
    assert [checker.check("n:1", 0, _msg(i * 50, i + 1)) for i in range(3, 12)] == [None] * 9
    gap = checker.check("n:1", 0, _msg(900, 20))
    assert gap is not None and gap.kind == "gap" and gap.expected_offset == 600


def test_the_check_holds_across_nsqds_for_one_partition() -> None:
    """After a leader failover the same partition comes from another nsqd, same offsets."""
    checker = OrderChecker("t")
    checker.check("a:1", 0, _msg(0, 1))
    checker.check("a:1", 0, _msg(50, 2))
    assert checker.check("b:1", 0, _msg(50, 2)) is None  # redelivered by the new leader
    v = checker.check("b:1", 0, _msg(0, 1))
    assert v is not None and v.kind == "regression" and v.nsqd == "b:1"


def test_rewind_right_after_a_reconnect_is_a_counted_redelivery() -> None:
    checker = OrderChecker("t")
    for i in range(6):
        checker.check("n:1", 0, _msg(i * 50, i + 1))
    checker.reconnected(0)  # new leader: it resends from its confirmed position, 100
    assert [checker.check("n:2", 0, _msg(i * 50, i + 1)) for i in range(2, 6)] == [None] * 4
    assert checker.redeliveries == 4
    # past the high water mark the check is the usual one again
    assert checker.check("n:2", 0, _msg(300, 7)) is None
    v = checker.check("n:2", 0, _msg(100, 3))
    assert v is not None and v.kind == "regression"
    assert checker.redeliveries == 4


def test_rewind_within_one_connection_stays_a_regression() -> None:
    checker = OrderChecker("t")
    for i in range(6):
        checker.check("n:1", 0, _msg(i * 50, i + 1))
    checker.reconnected(1)  # another partition's reconnect changes nothing here
    v = checker.check("n:1", 0, _msg(100, 3))
    assert v is not None and v.kind == "regression"
    assert checker.redeliveries == 0


def test_a_gap_after_the_replay_is_still_reported() -> None:
    checker = OrderChecker("t")
    for i in range(3):
        checker.check("n:1", 0, _msg(i * 50, i + 1))
    checker.reconnected(0)
    assert checker.check("n:2", 0, _msg(50, 2)) is None
    v = checker.check("n:2", 0, _msg(250, 6))
    assert v is not None and v.kind == "gap" and v.expected_offset == 150


def test_reconnect_before_any_message_changes_nothing() -> None:
    checker = OrderChecker("t")
    checker.reconnected(0)
    assert checker.check("n:1", 0, _msg(100, 3)) is None
    v = checker.check("n:1", 0, _msg(50, 2))
    assert v is not None and v.kind == "regression"


# The consumer's failover bookkeeping (nsqctl.consumer.partition_watch) feeds the checker
# above; its clock decisions are tested here without servers.


def test_partition_watch_notes_while_waiting_and_fails_after_the_window() -> None:
    from nsqctl.consumer.partition_watch import PartitionWatch
    from nsqctl.errors import FailoverTimeoutError

    watch = PartitionWatch("t", window=20.0, note_interval=5.0)
    watch.lost(1, now=100.0)
    watch.lost(1, now=103.0)  # still the first loss that counts
    assert watch.tick(104.0) == ([], None)
    notes, error = watch.tick(105.5)
    assert error is None and [n.describe() for n in notes] == [
        "waiting for a leader for t/1 (6s of 20s)"
    ]
    _, error = watch.tick(120.5)
    assert isinstance(error, FailoverTimeoutError) and "t/1" in str(error)


def test_partition_watch_resumes_within_its_window() -> None:
    from nsqctl.consumer.partition_watch import PartitionWatch

    watch = PartitionWatch("t", window=20_000.0)
    watch.lost(0, now=0.0)
    assert watch.tick(10_000.0)[1] is None
    event = watch.resumed(0, "127.0.0.1:4150", now=22.0)
    assert (
        event is not None
        and event.describe() == "t/0: consuming again on 127.0.0.1:4150 after 22.0s"
    )
    assert not watch.waiting and watch.resumed(0, "x", now=23.0) is None


def test_fin_window_is_bounded_per_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    from nsqctl.consumer import partition_watch

    monkeypatch.setattr(partition_watch, "CHUNK_IDS", 2)  # sealed every 2 ids, so the bound shows

    def msg_id(n: int) -> bytes:  # 16 bytes, as every id nsqd sends
        return n.to_bytes(8, "big") + b"trace-id"

    fins = partition_watch.FinWindow(size=3)
    for i in range(20):
        fins.add_many(0, [msg_id(i)])
        remembered = [j for j in range(i + 1) if fins.seen(0, msg_id(j))]
        # at least the last 3, at most 3 + a chunk, and always a run up to the newest
        assert 3 <= len(remembered) <= 5 or len(remembered) == i + 1, (i, remembered)
        assert remembered == list(range(i + 1 - len(remembered), i + 1)), (i, remembered)
    fins.add_many(0, [msg_id(100 + k) for k in range(10)])  # a batch larger than the window
    assert all(fins.seen(0, msg_id(100 + k)) for k in range(10))
    assert not fins.seen(0, msg_id(15)) and not fins.seen(1, msg_id(109))
    fins.add_many(0, [msg_id(200)])  # added while looked up: found at once, unsealed
    assert fins.seen(0, msg_id(200)) and fins.seen(0, msg_id(109))


def test_fin_window_keeps_sources_apart() -> None:
    """The original family's ids are unique per nsqd only: the same id FINed on one nsqd
    is no duplicate when another sends it."""
    from nsqctl.consumer.partition_watch import FinWindow

    fins = FinWindow(size=8)
    same = b"0123456789abcdef"
    fins.add_many(None, [same], nsqd="127.0.0.1:4150")
    assert fins.seen(None, same, nsqd="127.0.0.1:4150")
    assert not fins.seen(None, same, nsqd="127.0.0.1:4250")


@pytest.fixture
def switch_often() -> Iterator[None]:
    """Threads handed the GIL every microsecond: a read-then-write race shows at once."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_resends_counted_on_several_threads_at_once_are_all_counted(switch_often: None) -> None:
    """Ordered partitions read on threads of their own (nsqctl.consumer.lanes) count the
    resends of a new leader in one checker, while the loop reads the total: each counted
    once, the total never going back and never failing to read."""
    threads, resends = 4, 3000
    checker = OrderChecker("t")
    for partition in range(threads):
        for i in range(resends + 1):
            checker.check("n:1", partition, _msg(i * 50, i + 1))
        checker.reconnected(partition)
    start = threading.Barrier(threads + 1)

    def resend(partition: int) -> None:
        start.wait()
        for i in range(resends):  # at or below the mark: counted, not reported
            assert checker.check("n:2", partition, _msg(i * 50, i + 1)) is None

    workers = [threading.Thread(target=resend, args=(p,)) for p in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    seen = 0
    while any(worker.is_alive() for worker in workers):
        total = checker.redeliveries
        assert total >= seen
        seen = total
    for worker in workers:
        worker.join()
    assert checker.redeliveries == threads * resends
