"""The journal writer's queue: bounded, so producers cannot outrun the journal without limit."""

from __future__ import annotations

import gc
import logging
import math
import threading
import traceback
import weakref
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import ActorTimeoutError, RuntimeClosedError
from cogfabric.actors._writer import Ack, JournalWriter
from cogfabric.events import PrivateSet
from cogfabric.store import (
    InvalidStreamError,
    Journal,
    JournalConflictError,
    JournalFailedError,
    JournalFullError,
    JournalStillFullError,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from cogfabric.events import Event

WAIT = 10.0


class GatedJournal:
    """A real journal whose appends wait for ``gate``; it counts what each append got."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.batches: list[int] = []

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:
        self.entered.set()
        assert self.gate.wait(WAIT), "the test never opened the gate"
        self.batches.append(len(events))
        return self._journal.append(events, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


class SignallingCondition(threading.Condition):
    """The writer's room condition, which tells the test when a producer starts to wait."""

    def __init__(self, lock: Any) -> None:
        super().__init__(lock)
        self.waiting = threading.Event()

    def wait_for(self, predicate: Any, timeout: float | None = None) -> Any:
        self.waiting.set()
        return super().wait_for(predicate, timeout)


def event(i: int) -> PrivateSet:
    return PrivateSet(at=1.0, agent="a", key=f"k{i}", value=i)


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[GatedJournal]:
    with Journal.open(tmp_path / "j") as journal:
        yield GatedJournal(journal)


def start_writer(journal: GatedJournal, *, backlog_max: int, call_timeout: float = WAIT) -> JournalWriter:
    writer = JournalWriter(
        journal,  # type: ignore[arg-type]
        group_commit_max=1000,
        call_timeout=call_timeout,
        backlog_max=backlog_max,
    )
    writer._room = SignallingCondition(writer._lock)
    return writer


def fill(writer: JournalWriter, gated: GatedJournal, after: Any = None) -> Ack:
    """Leave ``writer`` stuck in an append of event 0, with event 1 waiting behind it.

    With ``backlog_max=1`` that fills the backlog. Returns event 1's acknowledgement.
    """
    writer.submit_nowait([event(0)], after=after)
    assert gated.entered.wait(WAIT)  # the writer holds event 0 and is stuck in append
    ack = writer.submit([event(1)])
    assert ack is not None
    return ack


def room(writer: JournalWriter) -> SignallingCondition:
    condition = writer._room
    assert isinstance(condition, SignallingCondition)
    return condition


def test_a_producer_waits_while_the_backlog_is_full_and_goes_on_once_the_writer_takes_it(
    gated: GatedJournal,
) -> None:
    writer = start_writer(gated, backlog_max=4, call_timeout=60.0)
    try:
        writer.submit_nowait([event(0)])
        assert gated.entered.wait(WAIT)  # the writer holds event 0 and is stuck in append
        writer.submit_nowait([event(1), event(2)])
        writer.submit_nowait([event(3), event(4)])  # four waiting: the backlog is full
        assert not room(writer).waiting.is_set()  # none of those waited
        done = threading.Event()

        def produce() -> None:
            writer.submit_nowait([event(5)])
            done.set()

        producer = threading.Thread(target=produce)
        producer.start()
        assert room(writer).waiting.wait(WAIT)
        assert not done.is_set(), "a producer queued past a full backlog"
        gated.gate.set()
        assert done.wait(WAIT)
        producer.join(WAIT)
        writer.flush(WAIT)
        assert sum(gated.batches) == 6
        assert [r.event.key for r in gated.read()] == [f"k{i}" for i in range(6)]
    finally:
        gated.gate.set()
        writer.stop(WAIT)


def test_after_call_timeout_a_producer_queues_anyway_and_nothing_is_lost(
    gated: GatedJournal, caplog: pytest.LogCaptureFixture
) -> None:
    writer = start_writer(gated, backlog_max=1, call_timeout=0.2)
    try:
        fill(writer, gated)
        with caplog.at_level(logging.WARNING, logger="cogfabric.actors._writer"):
            writer.submit_nowait([event(2)])  # waits 0.2 s, then queues with a warning
        assert "backlog" in caplog.text
        gated.gate.set()
        writer.flush(WAIT)
        assert [r.event.key for r in gated.read()] == ["k0", "k1", "k2"]
    finally:
        gated.gate.set()
        writer.stop(WAIT)


def test_the_writer_thread_itself_never_waits_for_room(gated: GatedJournal) -> None:
    # An after-commit action runs on the writer's thread; if it submits while the
    # backlog is full, waiting would deadlock the writer until call_timeout.
    writer = start_writer(gated, backlog_max=1, call_timeout=60.0)
    submitted = threading.Event()

    def after(committed: bool) -> None:
        assert committed
        writer.submit_nowait([event(2)])
        submitted.set()

    try:
        fill(writer, gated, after)  # the backlog is full when the action runs
        gated.gate.set()
        assert submitted.wait(WAIT)
        writer.flush(WAIT)
        assert sorted(r.event.key for r in gated.read()) == ["k0", "k1", "k2"]
    finally:
        gated.gate.set()
        writer.stop(WAIT)


def test_stopping_the_writer_releases_a_waiting_producer_with_a_typed_error(gated: GatedJournal) -> None:
    writer = start_writer(gated, backlog_max=1, call_timeout=60.0)
    errors: list[BaseException] = []
    stopper = threading.Thread(target=writer.stop, args=(WAIT,))
    try:
        fill(writer, gated)

        def produce() -> None:
            try:
                writer.submit_nowait([event(2)])
            except RuntimeClosedError as exc:
                errors.append(exc)

        producer = threading.Thread(target=produce)
        producer.start()
        assert room(writer).waiting.wait(WAIT)  # the producer waits for room
        stopper.start()
        producer.join(WAIT)  # stop wakes it long before its 60 s call_timeout
        assert not producer.is_alive()
        assert len(errors) == 1
    finally:
        gated.gate.set()
        if stopper.is_alive():
            stopper.join(WAIT)
        writer.stop(WAIT)
    assert [r.event.key for r in gated.read()] == ["k0", "k1"]


def test_a_writer_stopped_by_someone_else_refuses_later_changes_instead_of_dropping_them(
    gated: GatedJournal,
) -> None:
    # A host application's pykka.ActorRegistry.stop_all() stops the writer's actor
    # without JournalWriter.stop: what was queued is committed, and every later
    # submission is refused with a typed error (before, the first got Pykka's
    # ActorDeadError and the rest were queued for nobody and lost).
    writer = start_writer(gated, backlog_max=100)
    gated.gate.set()
    try:
        writer.submit([event(0)])
        writer._ref.stop(block=True)  # as stop_all does it: not through the writer's own stop
        for submit in (
            lambda: writer.submit([event(1)]),
            lambda: writer.submit_nowait([event(2)]),
            lambda: writer.submit([event(3)]),
            writer.flush,
        ):
            with pytest.raises(RuntimeClosedError, match="stopped"):
                submit()
        assert not writer._queue
    finally:
        writer.stop(WAIT)
    assert [r.event.key for r in gated.read()] == ["k0"]


def test_a_change_queued_as_the_writer_stops_is_committed_and_its_producer_told_so(
    gated: GatedJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The actor stops (Pykka marks it stopped before its on_stop runs) between the
    # change being queued and the doorbell's tell, which then raises a real
    # ActorDeadError. on_stop, waiting for the lock the ring holds, drains the change:
    # the producer gets its acknowledgement, not the error.
    writer = start_writer(gated, backlog_max=100)
    gated.gate.set()
    ref = writer._ref
    tell = ref.tell
    stopped_first = threading.Event()

    def tell_after_a_real_stop(message: Any) -> None:
        if not stopped_first.is_set():
            stopped_first.set()
            ref.stop(block=False)
            assert ref.actor_stopped.wait(WAIT)  # set before on_stop, which needs the lock held here
        tell(message)

    monkeypatch.setattr(ref, "tell", tell_after_a_real_stop)
    try:
        ack = writer.submit([event(0)])
        assert ack is not None
        seqs = ack.wait(WAIT)
    finally:
        writer.stop(WAIT)

    assert stopped_first.is_set()
    assert seqs == [1]
    assert [r.event.key for r in gated.read()] == ["k0"]


def test_stop_waits_for_a_drain_that_a_host_applications_stop_all_began(
    gated: GatedJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A host that uses Pykka for its own actors stops them all (ActorRegistry.stop_all)
    # and then closes the runtime. The writer's on_stop was still committing when
    # stop() returned at once (the writer already refused more), and close() then
    # closed the journal under that commit.
    writer = start_writer(gated, backlog_max=100)
    gated.gate.set()
    in_on_stop, release, progress = threading.Event(), threading.Event(), threading.Event()
    refuse_more = writer._refuse_more

    def refuse_then_hold() -> None:  # on_stop, on the writer's thread, before its drain
        refuse_more()
        in_on_stop.set()
        assert release.wait(WAIT)

    monkeypatch.setattr(writer, "_refuse_more", refuse_then_hold)
    ended = writer._ended
    ended_wait = ended.wait

    def wait_noted(timeout: float | None = None) -> bool:
        progress.set()  # stop() waits for the writer's end
        return ended_wait(timeout)

    monkeypatch.setattr(ended, "wait", wait_noted)
    writer._ref.stop(block=False)  # what pykka.ActorRegistry.stop_all does to each actor
    assert in_on_stop.wait(WAIT)
    done_when_stop_returned: list[bool] = []

    def close() -> None:  # what Runtime.close does, then it closes the journal
        writer.stop(WAIT)
        done_when_stop_returned.append(writer._done)
        progress.set()

    closer = threading.Thread(target=close)
    closer.start()
    try:
        assert progress.wait(WAIT)  # stop() is waiting, or it returned
    finally:
        release.set()
        closer.join(WAIT)
    assert not closer.is_alive()
    assert done_when_stop_returned == [True]  # it returned once on_stop was over, not before


class BrokenJournal(GatedJournal):
    """Its appends raise an error the writer does not expect (a bug)."""

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:  # noqa: ARG002
        msg = "a bug in the journal"
        raise RuntimeError(msg)


def test_an_unexpected_journal_error_fails_the_commit_and_makes_the_writer_fail_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Journal.open(tmp_path / "j") as journal:
        writer = start_writer(BrokenJournal(journal), backlog_max=1, call_timeout=60.0)
        try:
            with caplog.at_level(logging.ERROR, logger="cogfabric.actors._writer"):
                ack = writer.submit([event(0)])
                assert ack is not None
                with pytest.raises(JournalFailedError, match="a bug in the journal") as failed:
                    ack.wait(WAIT)  # resolved with the error, not left to time out
                assert isinstance(failed.value.__cause__, RuntimeError)
                with pytest.raises(JournalFailedError):
                    writer.submit_nowait([event(1)])  # refused at once: nothing would commit it
            assert "unexpected error" in caplog.text
        finally:
            writer.stop(WAIT)


class FullJournal(GatedJournal):
    """Its first append finds the map at max_map_size, and the journal goes fail-stop."""

    is_failed = False

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:  # noqa: ARG002
        self.is_failed = True
        msg = "reached max_map_size"
        raise JournalFullError(msg)


def _depth(error: BaseException) -> int:
    return len(traceback.extract_tb(error.__traceback__))


def test_after_a_failure_each_refusal_is_a_fresh_error_whose_traceback_does_not_grow(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j") as journal:
        writer = start_writer(FullJournal(journal), backlog_max=1000)
        try:
            ack = writer.submit([event(0)])
            assert ack is not None
            depths, seen = [], []
            for _ in range(20):  # one ack waited on again and again, as by many callers
                with pytest.raises(JournalFullError) as first:
                    ack.wait(WAIT)
                depths.append(_depth(first.value))
                seen.append(first.value)
            refusals = []
            for i in range(20):
                with pytest.raises(JournalStillFullError) as later:
                    writer.submit([event(i)])
                refusals.append(later.value)
        finally:
            writer.stop(WAIT)

    assert len(set(depths)) == 1  # re-raising one object used to add its frames each time
    assert len({id(e) for e in seen}) == len(seen)  # each waiter its own: threads never share one
    assert {(type(e), str(e)) for e in seen} == {(JournalFullError, "reached max_map_size")}
    assert len({id(e) for e in refusals}) == len(refusals)
    assert all(
        type(e.__cause__) is JournalFullError and str(e.__cause__) == str(first.value) for e in refusals
    )
    assert all(isinstance(e, JournalFailedError) and "the journal is full, and" in str(e) for e in refusals)


def test_a_writer_actor_that_dies_fails_what_waits_and_wakes_waiting_producers(
    gated: GatedJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = start_writer(gated, backlog_max=1, call_timeout=60.0)
    try:
        ack = fill(writer, gated)
        errors: list[BaseException] = []

        def produce() -> None:
            try:
                writer.submit_nowait([event(2)])
            except JournalFailedError as exc:
                errors.append(exc)

        producer = threading.Thread(target=produce)
        producer.start()
        assert room(writer).waiting.wait(WAIT)

        def broken_take() -> list[Any]:
            msg = "a bug in the writer"
            raise RuntimeError(msg)

        # The writer's next step after event 0's commit is to take the queue: make that
        # step fail, as a bug would, so that the actor dies.
        monkeypatch.setattr(writer, "_take", broken_take)
        gated.gate.set()
        producer.join(WAIT)  # woken long before its 60 s call_timeout
        assert not producer.is_alive()
        assert len(errors) == 1
        with pytest.raises(JournalFailedError, match="a bug in the writer"):
            ack.wait(WAIT)  # the queued submission is failed, not left to time out
    finally:
        gated.gate.set()
        writer.stop(WAIT)


def test_a_submission_the_journal_refuses_does_not_take_the_rest_of_its_group_with_it(
    gated: GatedJournal, caplog: pytest.LogCaptureFixture
) -> None:
    writer = start_writer(gated, backlog_max=100)
    bad = PrivateSet(at=1.0, agent="x" * 300, key="bad", value=0)  # its stream name is too long
    try:
        writer.submit_nowait([event(0)])
        assert gated.entered.wait(WAIT)  # the writer is stuck in append: the rest queue up
        acked = writer.submit([event(1)])
        writer.submit_nowait([event(2), bad])  # nobody waits for these
        refused = writer.submit([bad])
        writer.submit_nowait([event(3)])
        with caplog.at_level(logging.ERROR, logger="cogfabric.actors._writer"):
            gated.gate.set()
            writer.flush(WAIT)

        assert acked is not None
        assert refused is not None
        assert acked.wait(WAIT)
        with pytest.raises(InvalidStreamError):
            refused.wait(WAIT)
        assert [r.event.key for r in gated.read()] == ["k0", "k1", "k3"]
        assert "refused 2 events of agent/a" in caplog.text  # the unacknowledged loss is not silent
        assert writer.failure is None
    finally:
        gated.gate.set()
        writer.stop(WAIT)


def test_a_group_commit_holds_at_most_group_commit_max_events_and_never_splits_a_submission(
    gated: GatedJournal,
) -> None:
    writer = JournalWriter(gated, group_commit_max=3, call_timeout=WAIT, backlog_max=100)  # type: ignore[arg-type]
    try:
        writer.submit_nowait([event(0)])
        assert gated.entered.wait(WAIT)  # the writer is stuck in event 0's append
        sizes = [2, 2, 1, 5, 1, 1, 1]  # all wait together behind event 0
        n = 1
        for size in sizes:
            writer.submit_nowait([event(i) for i in range(n, n + size)])
            n += size
        gated.gate.set()
        writer.flush(WAIT)

        assert gated.batches == [1, 2, 3, 5, 3]  # 2 | 2+1 | 5 alone (atomic) | 1+1+1
        assert [r.event.key for r in gated.read()] == [f"k{i}" for i in range(n)]
    finally:
        gated.gate.set()
        writer.stop(WAIT)


def test_in_a_group_each_submissions_action_runs_before_the_next_ones_waiter_wakes(
    gated: GatedJournal,
) -> None:
    # A sync ctx.send is delivered by its submission's action; a request by its sender,
    # once its ack resolves. Every ack of a group was resolved before any action ran, so
    # a request could reach its recipient ahead of a send its sender had made before it.
    writer = start_writer(gated, backlog_max=100)
    seen: list[tuple[str, bool, list[bool]]] = []
    acks: list[Ack] = []

    def action(name: str) -> Any:
        return lambda committed: seen.append((name, committed, [a.done for a in acks]))

    try:
        writer.submit_nowait([event(0)])
        assert gated.entered.wait(WAIT)  # the writer is stuck in event 0's append
        writer.submit_nowait([event(1)], after=action("send 1"))
        acks.append(writer.submit([event(2)]))  # type: ignore[arg-type]
        writer.submit_nowait([event(3)], after=action("send 3"))
        acks.append(writer.submit([event(4)]))  # type: ignore[arg-type]
        gated.gate.set()
        assert acks[0].wait(WAIT) == [3]
        assert acks[1].wait(WAIT) == [5]

        assert gated.batches == [1, 4]  # the four in one group
        # each send's action ran before the request behind it was acknowledged
        assert seen == [("send 1", True, [False, False]), ("send 3", True, [True, False])]
    finally:
        gated.gate.set()
        writer.stop(WAIT)


def test_changes_waiting_for_the_writer_are_left_out_of_the_garbage_collectors_scans(
    gated: GatedJournal,
) -> None:
    # In batch durability thousands of changes wait for each commit; tracked, they were
    # promoted to the oldest generation and made every full collection scan them.
    writer = JournalWriter(gated, group_commit_max=1000, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
    try:
        writer.submit_nowait([event(0)])
        assert gated.entered.wait(WAIT)  # the writer is stuck in event 0's append
        for i in range(1, 101):
            writer.submit_nowait([event(i)])
        gc.collect()
        waiting = list(writer._queue)
        assert len(waiting) == 100
        assert not [s for s in waiting if gc.is_tracked(s) or gc.is_tracked(s.events)]
        gated.gate.set()
        writer.flush(WAIT)
        assert [r.event.key for r in gated.read()] == [f"k{i}" for i in range(101)]
    finally:
        gated.gate.set()
        writer.stop(WAIT)


def test_a_refused_change_and_its_error_are_freed_once_its_waiter_has_it(tmp_path: Path) -> None:
    # A waiting change is not tracked by the cyclic collector, so a cycle through it is
    # never freed; its ack holds the error, whose traceback leads back to it (found by
    # review: every refusal and the writer itself were kept for good).
    with Journal.open(tmp_path / "j") as journal:
        writer = JournalWriter(journal, group_commit_max=100, call_timeout=WAIT)
        stored = PrivateSet(at=1.0, agent="a", key="k", value=1, id="X")
        ack = writer.submit([stored])
        assert ack is not None
        ack.wait(WAIT)
        errors = []
        for i in range(5):
            ack = writer.submit([PrivateSet(at=1.0, agent="a", key="k", value=2 + i, id="X")])
            assert ack is not None
            with pytest.raises(JournalConflictError):
                ack.wait(WAIT)
            assert ack.error is not None
            errors.append(weakref.ref(ack.error))
        writer.stop(WAIT)
        stopped = weakref.ref(writer)
        del ack, writer
        gc.collect()

        assert [ref() for ref in errors] == [None] * 5
        assert stopped() is None


def test_an_ack_wait_of_nan_or_less_does_not_wait_and_of_inf_waits_as_long_as_it_can() -> None:
    done, pending = Ack(1), Ack(2)
    done._resolve([7], None)

    assert done.wait(math.nan) == [7]
    assert done.wait(math.inf) == [7]
    for timeout in (math.nan, 0.0, -1.0):  # NaN was a ValueError from the lock, -1 a wait for ever
        with pytest.raises(ActorTimeoutError):
            pending.wait(timeout)


def test_a_waiters_copy_of_an_error_keeps_what_its_init_set() -> None:
    from cogfabric.actors._writer import error_copy  # noqa: PLC0415
    from cogfabric.store import JournalRecordError  # noqa: PLC0415

    cause = ValueError("decode")
    error = JournalRecordError(5, "the record is malformed")
    error.__cause__ = cause

    twin = error_copy(error)

    assert twin is not error
    assert (type(twin), str(twin), twin.seq, twin.reason) == (  # type: ignore[attr-defined]
        JournalRecordError,
        "record at seq 5: the record is malformed",
        5,
        "the record is malformed",
    )
    assert twin.__cause__ is cause
    error.add_note("first")
    noted = error_copy(error)
    noted.add_note("only the copy's")
    assert error.__notes__ == ["first"]
    foreign = UnicodeEncodeError("utf-8", "\udc80", 0, 1, "surrogates not allowed")
    assert error_copy(foreign) is foreign  # its data is in C fields a copy would lose
