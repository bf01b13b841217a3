"""The journal writer's promises that round 3 of mutation tests of actors/_writer.py found no test held.

Each test names what the writer's docstrings promise: a group commit filled to
``group_commit_max`` events and no further, however many small submissions wait; a
submission larger than that as one append of its own; the default backlog of four group
commits' worth, a backlog of at least one event, and no wait for room for what adds
no events to it (a snapshot, a flush); a snapshot that would cover
nothing left out rather than refused (with the group or the snapshots beside it); a
carried snapshot saved once the writer has nothing else to commit, or dropped if the
journal refuses it, the writer going on; a writer fail-stop
on its first failure (a later bug does not replace it), and fail-stop before any
waiter of the failed commit hears of it; and ``hand_over_and_flush``, which returns on a
fail-stop journal even once the writer is stopped, raises any other journal error, and
gives up after ``call_timeout``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from cogfabric import ActorTimeoutError
from cogfabric.actors._writer import JournalWriter
from cogfabric.events import TaskContextPublished
from cogfabric.store import (
    Journal,
    JournalError,
    JournalFailedError,
    JournalFullError,
    JournalStillFullError,
    Snapshot,
)

from .test_writer import GatedJournal as CountingJournal
from .test_writer_mutation_pins import SteppedJournal, other, stuck_writer
from .test_writer_pins import WAIT, GatedJournal, SignallingCondition, event, keys, start_writer

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[GatedJournal]:
    with Journal.open(tmp_path / "j") as journal:
        yield GatedJournal(journal)


@pytest.fixture
def counting(tmp_path: Path) -> Iterator[CountingJournal]:
    with Journal.open(tmp_path / "j") as journal:
        yield CountingJournal(journal)


def test_small_submissions_fill_each_group_to_the_limit_and_a_large_first_one_is_one_append(
    counting: CountingJournal,
) -> None:
    # _drain: "At most group_commit_max events a commit; ... one larger than the limit is
    # a commit of its own": one append of its events, then the small ones add up to
    # the limit and no further, however many of them wait.
    writer = JournalWriter(counting, group_commit_max=3, call_timeout=WAIT, backlog_max=100)  # type: ignore[arg-type]
    try:
        writer.submit_nowait([event(0)])
        assert counting.entered.wait(WAIT)  # the writer is stuck in event 0's append
        n = 1
        for size in (5, 1, 1, 1, 1):  # all wait together behind event 0, taken in one drain
            writer.submit_nowait([event(i) for i in range(n, n + size)])
            n += size
        done = writer.submit([])  # in the last group: no append of its own
        assert done is not None
        counting.gate.set()
        assert done.wait(WAIT) == []
        assert counting.batches == [1, 5, 3, 1]  # 5 alone (atomic) | 1+1+1 | 1
        assert [r.event.key for r in counting.read()] == [f"k{i}" for i in range(n)]
    finally:
        counting.gate.set()
        writer.stop(WAIT)


def test_by_default_the_backlog_holds_four_group_commits_worth_of_events(gated: GatedJournal) -> None:
    # JournalWriter: "backlog_max bounds the events waiting for the writer (default: four
    # times group_commit_max)" - the runtime's writer is made with that default.
    writer, condition = stuck_writer(gated, group_commit_max=2, backlog_max=None)
    waited = threading.Event()

    def produce() -> None:
        writer.submit_nowait([event(9)])
        waited.set()

    producer = threading.Thread(target=produce)
    try:
        writer.submit_nowait([event(i) for i in range(1, 8)])  # 7 of 8 waiting: room
        writer.submit_nowait([event(8)])  # lets in: the backlog is full now
        assert not condition.waiting.is_set()
        producer.start()
        assert condition.waiting.wait(WAIT)  # the ninth event waits for room
        assert not waited.is_set()
        gated.gate.set()
        assert waited.wait(WAIT)
    finally:
        gated.gate.set()
        producer.join(WAIT)
        writer.stop(WAIT)
    assert keys(gated) == [f"k{i}" for i in range(10)]


def test_a_backlog_of_no_events_lets_one_in_as_a_backlog_of_one_would(gated: GatedJournal) -> None:
    # "a submission is let in while fewer than backlog_max events wait": a backlog_max of
    # 0 (or less) bounds the queue at one event, rather than have every producer wait.
    gated.gate.set()
    writer = start_writer(gated, backlog_max=0)
    condition = SignallingCondition(writer._lock)
    writer._room = condition
    try:
        ack = writer.submit([event(0)])
        assert not condition.waiting.is_set()
        assert ack is not None
        assert ack.wait(WAIT) == [1]
    finally:
        writer.stop(WAIT)


@pytest.mark.parametrize(
    "failing",
    [JournalFullError("reached max_map_size"), RuntimeError("a bug in the journal")],
    ids=["a storage failure", "an unexpected error"],
)
def test_a_commit_that_fails_makes_the_writer_fail_stop_before_its_waiters_hear_of_it(
    gated: GatedJournal, failing: BaseException
) -> None:
    # hand_over_and_flush returns "unless the journal is fail-stop, before or meanwhile"; it
    # tells a fail-stop journal's error from another by ``failure``, so the failure is
    # set before any waiter of the failed commit wakes, or its post-commit action runs.
    gated.gate.set()
    writer = start_writer(gated)
    seen: list[tuple[bool, BaseException | None]] = []

    def after(committed: bool) -> None:
        seen.append((committed, writer.failure))

    try:
        first = writer.submit([event(0)])
        assert first is not None
        assert first.wait(WAIT) == [1]  # committed before the journal starts failing
        gated.failing = failing
        ack = writer.submit([event(1)], after=after)
        assert ack is not None
        with pytest.raises(JournalError):
            ack.wait(WAIT)
    finally:
        writer.stop(WAIT)
    assert len(seen) == 1
    committed, failure = seen[0]
    assert not committed
    assert isinstance(failure, JournalError)
    assert failure is writer.failure


def fail_stop(gated: GatedJournal, writer: JournalWriter) -> None:
    """Commit event 0, then have ``writer``'s next commit fail in storage: fail-stop."""
    first = writer.submit([event(0)])
    assert first is not None
    assert first.wait(WAIT) == [1]
    gated.failing = JournalFullError("reached max_map_size")
    ack = writer.submit([event(1)])
    assert ack is not None
    with pytest.raises(JournalFullError):
        ack.wait(WAIT)


def test_hand_over_and_flush_returns_on_a_fail_stop_journal_also_once_its_writer_is_stopped(
    gated: GatedJournal,
) -> None:
    # hand_over_and_flush: "Unless the journal is fail-stop, before or meanwhile: then it returns, and
    # what the journal holds is what a reader finds" - a stopped writer adds nothing to
    # wait for, and each hand-over step is still made.
    gated.gate.set()
    writer = start_writer(gated)
    steps: list[int] = []
    try:
        fail_stop(gated, writer)
    finally:
        writer.stop(WAIT)
    writer.hand_over_and_flush((lambda: steps.append(1), lambda: steps.append(2)))
    assert steps == [1, 2]
    assert keys(gated) == ["k0"]


def test_hand_over_and_flush_raises_a_journal_error_that_did_not_come_of_a_fail_stop_journal(
    gated: GatedJournal,
) -> None:
    # hand_over_and_flush raises a JournalError "that did not come of a fail-stop journal".
    gated.gate.set()
    writer = start_writer(gated)

    def hand_over() -> None:
        msg = "not a fail-stop"
        raise JournalFailedError(msg)

    try:
        with pytest.raises(JournalFailedError, match="not a fail-stop"):
            writer.hand_over_and_flush((hand_over,))
        assert writer.failure is None
    finally:
        writer.stop(WAIT)


def test_hand_over_and_flush_gives_up_on_a_commit_that_takes_longer_than_call_timeout(
    gated: GatedJournal,
) -> None:
    # hand_over_and_flush raises ActorTimeoutError when the changes are "not committed within call_timeout".
    writer, _ = stuck_writer(gated, call_timeout=0.2)
    try:
        with pytest.raises(ActorTimeoutError):
            writer.hand_over_and_flush()
        assert not gated.gate.is_set()  # the commit it waited for is still under way
    finally:
        gated.gate.set()
        writer.stop(WAIT)
    assert keys(gated) == ["k0"]


def test_a_snapshot_cut_short_to_nothing_is_left_out_and_the_snapshot_beside_it_saved(
    gated: GatedJournal,
) -> None:
    # submit_snapshot: a snapshot is "saved as covering only the seqs before that
    # publication": before the first seq that is nothing, and it is left out, not sent
    # to the journal (which refuses a snapshot at seq 0) with another agent's.
    published = TaskContextPublished(at=1.0, task_id="t", context={}, agents=("a",))
    writer = start_writer(gated)
    try:
        writer.submit_nowait([published])  # seq 1
        assert gated.entered.wait(WAIT)  # stuck in its append: the rest is one group
        writer.submit_nowait([event(0), other("b")])  # seqs 2, 3
        writer.submit_snapshot("agent/a", b"a", agent_id="a", publish_seq=0)  # cut short of seq 1
        writer.submit_snapshot("agent/b", b"b", agent_id="b", publish_seq=0)
        gated.gate.set()
        writer.flush(WAIT)
        writer.flush(WAIT)  # past the commit that saves what the group's commit carried
        assert gated.load_snapshot("agent/a") is None
        assert gated.load_snapshot("agent/b") == Snapshot("agent/b", 3, b"b")
    finally:
        gated.gate.set()
        writer.stop(WAIT)


def test_a_snapshot_of_a_stream_with_no_events_is_left_out_and_its_group_is_one_append(
    counting: CountingJournal,
) -> None:
    # A snapshot covers "its events submitted so far": with none, there is nothing to
    # save, and the group it came in is still one write transaction.
    writer = JournalWriter(counting, group_commit_max=1000, call_timeout=WAIT, backlog_max=100)  # type: ignore[arg-type]
    try:
        writer.submit_nowait([event(0)])
        assert counting.entered.wait(WAIT)  # stuck in its append: the rest is one group
        writer.submit_nowait([event(1)])
        writer.submit_snapshot("agent/nobody", b"n")
        done = writer.submit([event(2)])
        assert done is not None
        counting.gate.set()
        assert done.wait(WAIT) == [3]
        assert counting.batches == [1, 2]
        assert counting.load_snapshot("agent/nobody") is None
    finally:
        counting.gate.set()
        writer.stop(WAIT)


def test_a_carried_snapshot_the_journal_refuses_is_dropped_and_the_writer_goes_on(
    gated: GatedJournal,
) -> None:
    # _refused_group: the snapshots carried from the last commit "are saved on their own
    # first (dropped if refused too)": a refusal, not a failure of the writer.
    writer, _ = stuck_writer(gated)
    try:
        writer.submit_nowait([event(1)])  # seq 2, in one group with the snapshot
        writer.submit_snapshot("agent/a", "not bytes")  # type: ignore[arg-type]
        gated.gate.set()
        writer.flush(WAIT)
        writer.flush(WAIT)  # past the commit that tried the carried snapshot
        assert writer.failure is None
        later = writer.submit([event(2)])
        assert later is not None
        assert later.wait(WAIT) == [3]
        assert gated.load_snapshot("agent/a") is None
    finally:
        gated.gate.set()
        writer.stop(WAIT)
    assert keys(gated) == ["k0", "k1", "k2"]


def test_a_writer_that_dies_after_a_fail_stop_keeps_the_failure_that_made_it_fail_stop(
    gated: GatedJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # failure: "The error that made the journal fail-stop" - a full journal's, whose
    # refusals say it is still full (reopen with a larger max_map_size), also once the
    # writer actor died of a bug after it (_died).
    gated.gate.set()
    writer = start_writer(gated)
    try:
        fail_stop(gated, writer)

        def broken_drain() -> None:
            msg = "a bug in the writer"
            raise RuntimeError(msg)

        monkeypatch.setattr(writer, "_drain", broken_drain)
        writer._ref.tell("flush")  # the doorbell: the actor dies of the bug
        assert writer._ended.wait(WAIT)
        assert isinstance(writer.failure, JournalFullError)
        with pytest.raises(JournalStillFullError):
            writer.submit([event(2)])
    finally:
        writer.stop(WAIT)
    assert keys(gated) == ["k0"]


def test_a_carried_snapshot_is_saved_once_nothing_else_waits_not_only_at_the_next_change(
    tmp_path: Path,
) -> None:
    # _drain: when it finds nothing more to take, it saves the snapshots the last commit
    # carried in a commit of their own, rather than leave them to the next change (which
    # may never come before a crash) or to the writer's stop.
    with Journal.open(tmp_path / "j") as journal:
        stepped = SteppedJournal(journal)
        writer = JournalWriter(stepped, group_commit_max=1000, call_timeout=WAIT, backlog_max=100)  # type: ignore[arg-type]
        try:
            writer.submit_nowait([event(0)])
            assert stepped.entered[0].wait(WAIT)  # stuck in its append: the rest is one group
            writer.submit_nowait([event(1)])  # seq 2
            writer.submit_snapshot("agent/a", b"state")  # covers seq 2: carried
            stepped.steps.release(8)
            assert stepped.entered[2].wait(WAIT)  # a third append, with nothing submitted
            writer.flush(WAIT)
            assert journal.load_snapshot("agent/a") == Snapshot("agent/a", 2, b"state")
        finally:
            stepped.steps.release(8)
            writer.stop(WAIT)


def test_what_adds_no_events_to_a_full_backlog_does_not_wait_for_room(gated: GatedJournal) -> None:
    # _enqueue: "Queue one submission (waiting for room if it has events)": a snapshot or
    # a flush adds none to the backlog, and a flush waits only its own timeout.
    writer, condition = stuck_writer(gated, backlog_max=1)
    try:
        writer.submit_nowait([event(1)])  # the backlog is full
        writer.submit_snapshot("agent/a", b"state")
        with pytest.raises(ActorTimeoutError):
            writer.flush(0.05)
        assert not condition.waiting.is_set()
    finally:
        gated.gate.set()
        writer.stop(WAIT)
    assert keys(gated) == ["k0", "k1"]
