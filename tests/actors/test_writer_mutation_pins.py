"""The journal writer's promises that mutation tests of actors/_writer.py found no test held.

Each test names what the writer's docstrings promise: ``wait_for_room``'s refusals,
``stop_soon`` waking a producer that waits for room, the overfull warning once per
episode, which publications cut an agent's snapshot short, a snapshot carried to the
next commit that a refused group does not lose, nor a stop with no commit after it,
and a submission's waiter woken before its post-commit action runs.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import RuntimeClosedError
from cogfabric.actors._writer import Ack, JournalWriter
from cogfabric.events import PrivateSet, TaskContextPublished
from cogfabric.store import InvalidStreamError, Journal, JournalFullError, JournalStillFullError, Snapshot

from .test_writer_pins import WAIT, GatedJournal, SignallingCondition, event, keys

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from cogfabric.events import Event


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[GatedJournal]:
    with Journal.open(tmp_path / "j") as journal:
        yield GatedJournal(journal)


def stuck_writer(
    gated: GatedJournal,
    *,
    group_commit_max: int = 1000,
    backlog_max: int | None = 100,
    call_timeout: float = WAIT,
) -> tuple[JournalWriter, SignallingCondition]:
    """A writer stuck in the append of event 0 (seq 1), whose room condition says when a producer waits."""
    writer = JournalWriter(
        gated,  # type: ignore[arg-type]
        group_commit_max=group_commit_max,
        call_timeout=call_timeout,
        backlog_max=backlog_max,
    )
    condition = SignallingCondition(writer._lock)
    writer._room = condition
    writer.submit_nowait([event(0)])
    assert gated.entered.wait(WAIT)
    return writer, condition


def test_wait_for_room_refuses_on_a_stopped_writer_even_with_room(gated: GatedJournal) -> None:
    # wait_for_room: "Raises: RuntimeClosedError: the writer was stopped." - also when
    # it would not have waited, so that its caller journals nothing it would lose.
    gated.gate.set()
    writer = JournalWriter(gated, group_commit_max=1000, call_timeout=WAIT, backlog_max=100)  # type: ignore[arg-type]
    writer.wait_for_room()  # room, and running: it returns at once
    writer.stop(WAIT)
    with pytest.raises(RuntimeClosedError, match="stopped"):
        writer.wait_for_room()


def test_wait_for_room_refuses_on_a_fail_stop_writer_even_with_room(gated: GatedJournal) -> None:
    # wait_for_room raises "JournalError: the journal is fail-stop", also with room.
    gated.gate.set()
    gated.failing = JournalFullError("reached max_map_size")
    writer = JournalWriter(gated, group_commit_max=1000, call_timeout=WAIT, backlog_max=100)  # type: ignore[arg-type]
    try:
        first = writer.submit([event(0)])
        assert first is not None
        assert first.wait(WAIT) == [1]  # the first append is the one that passes
        failed = writer.submit([event(1)])
        assert failed is not None
        with pytest.raises(JournalFullError):
            failed.wait(WAIT)
        with pytest.raises(JournalStillFullError):
            writer.wait_for_room()
    finally:
        writer.stop(WAIT)
    assert keys(gated) == ["k0"]


def test_stop_soon_releases_a_producer_waiting_for_room_at_once(gated: GatedJournal) -> None:
    # stop_soon asks the writer to stop "without waiting": a producer waiting for room
    # hears at once that the writer is stopped, not when the writer's commit ends.
    writer, condition = stuck_writer(gated, backlog_max=1, call_timeout=60.0)
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            writer.submit_nowait([event(2)])
        except RuntimeClosedError as exc:
            errors.append(exc)

    producer = threading.Thread(target=produce)
    try:
        writer.submit_nowait([event(1)])  # the backlog is full
        producer.start()
        assert condition.waiting.wait(WAIT)  # the producer waits for room
        writer.stop_soon()
        producer.join(WAIT)  # while the writer is still stuck in event 0's append
        assert not producer.is_alive()
        assert len(errors) == 1
        assert not gated.gate.is_set()
    finally:
        gated.gate.set()
        producer.join(WAIT)
        writer.stop(WAIT)
    assert keys(gated) == ["k0", "k1"]


def test_a_snapshot_carried_to_the_next_commit_is_saved_though_that_group_is_refused(
    gated: GatedJournal,
) -> None:
    # A snapshot covering an event of its own commit is "saved with the next" (_gather);
    # a refused submission in that next group is refused alone, and must not take the
    # snapshot with it either.
    writer, _ = stuck_writer(gated, group_commit_max=2)
    bad = PrivateSet(at=1.0, agent="x" * 300, key="bad", value=0)  # its stream name is too long
    try:
        writer.submit_nowait([event(1), event(2)])  # seqs 2, 3: one group with the snapshot
        writer.submit_snapshot("agent/a", b"state")  # covers seq 3, carried to the next group
        refused = writer.submit([bad])  # the next group: refused
        good = writer.submit([event(3)])  # the same group: committed at seq 4
        gated.gate.set()
        assert refused is not None
        with pytest.raises(InvalidStreamError):
            refused.wait(WAIT)
        assert good is not None
        assert good.wait(WAIT) == [4]
        writer.flush(WAIT)
        assert gated.load_snapshot("agent/a") == Snapshot("agent/a", 3, b"state")
    finally:
        gated.gate.set()
        writer.stop(WAIT)
    assert keys(gated) == ["k0", "k1", "k2", "k3"]


class SteppedJournal:
    """A real journal whose every append waits for a step of its own; ``entered[i]``: append i began."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self.steps = threading.Semaphore(0)
        self.entered = [threading.Event() for _ in range(8)]
        self.calls = 0

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:
        self.entered[self.calls].set()
        self.calls += 1
        assert self.steps.acquire(timeout=WAIT), "the test never let the append go on"
        return self._journal.append(events, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


def test_the_overfull_backlog_is_warned_of_again_each_time_it_stays_full(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A producer that waited call_timeout "queues anyway, with a warning"; once the writer
    # took the backlog, it warns "again the next time it stays full" (one warning per
    # episode, not one per producer, and not one only ever).
    with Journal.open(tmp_path / "j") as journal:
        stepped = SteppedJournal(journal)
        writer = JournalWriter(stepped, group_commit_max=1000, call_timeout=0.2, backlog_max=1)  # type: ignore[arg-type]
        try:
            with caplog.at_level(logging.WARNING, logger="cogfabric.actors._writer"):
                writer.submit_nowait([event(0)])
                assert stepped.entered[0].wait(WAIT)  # stuck in event 0's append
                writer.submit_nowait([event(1)])  # the backlog is full
                writer.submit_nowait([event(2)])  # waits 0.2 s, then queues with a warning
                writer.submit_nowait([event(3)])  # waits again, but warns no more
                stepped.steps.release()  # the writer takes events 1-3 and is stuck again
                assert stepped.entered[1].wait(WAIT)
                writer.submit_nowait([event(4)])  # full again
                writer.submit_nowait([event(5)])  # waits 0.2 s, and warns again
            stepped.steps.release(8)
            writer.flush(WAIT)
        finally:
            stepped.steps.release(8)
            writer.stop(WAIT)
        assert [r.event.key for r in journal.read() if isinstance(r.event, PrivateSet)] == [
            f"k{i}" for i in range(6)
        ]
    assert caplog.text.count("queuing past its backlog of 1 event\n") == 2


def test_a_snapshot_is_cut_short_only_by_a_later_publication_to_its_own_agent(gated: GatedJournal) -> None:
    # submit_snapshot: "if a later publication to it was committed before the snapshot's
    # own events, the snapshot is saved as covering only the seqs before that publication"
    # - not one it handled already (its publish_seq), nor one to other agents.
    gated.gate.set()
    writer = JournalWriter(gated, group_commit_max=1000, call_timeout=WAIT, backlog_max=100)  # type: ignore[arg-type]
    published = TaskContextPublished(at=1.0, task_id="t", context={}, agents=("a", "c"))
    try:
        for events, seq in (
            ([event(0)], 1),
            ([published], 2),
            ([event(1)], 3),
            ([other("b")], 4),
            ([other("c")], 5),
        ):
            ack = writer.submit(events)
            assert ack is not None
            assert ack.wait(WAIT) == [seq]
        writer.submit_snapshot("agent/a", b"a", agent_id="a", publish_seq=2)  # it handled seq 2
        writer.submit_snapshot("agent/b", b"b", agent_id="b", publish_seq=0)  # seq 2 was not to it
        writer.submit_snapshot("agent/c", b"c", agent_id="c", publish_seq=0)  # it has not handled seq 2
        writer.flush(WAIT)
        assert gated.load_snapshot("agent/a") == Snapshot("agent/a", 3, b"a")
        assert gated.load_snapshot("agent/b") == Snapshot("agent/b", 4, b"b")
        assert gated.load_snapshot("agent/c") == Snapshot("agent/c", 1, b"c")  # cut short of seq 2
    finally:
        writer.stop(WAIT)


def other(agent: str) -> PrivateSet:
    return PrivateSet(at=1.0, agent=agent, key=f"{agent}0", value=0)


def test_a_snapshot_carried_to_the_next_commit_is_saved_by_a_stop_with_nothing_after_it(
    gated: GatedJournal,
) -> None:
    # A snapshot covering an event of its own commit is "saved with the next" (_gather);
    # stop "commits what is waiting": with no submission after it, the writer saves it
    # in a commit of its own rather than drop it when it stops.
    writer, _ = stuck_writer(gated)
    try:
        writer.submit_nowait([event(1)])  # seq 2, in one group with the snapshot
        writer.submit_snapshot("agent/a", b"state")  # covers seq 2: carried to the next commit
        gated.gate.set()
    finally:
        gated.gate.set()
        writer.stop(WAIT)
    assert keys(gated) == ["k0", "k1"]
    assert gated.load_snapshot("agent/a") == Snapshot("agent/a", 2, b"state")


def test_a_submissions_waiter_is_woken_before_its_post_commit_action_runs(gated: GatedJournal) -> None:
    # _settle: "Resolve a submission's ack, run its post-commit action". The bus relies on
    # it (_Handoff): a caller whose wait timed out as the action ran finds the ack resolved
    # (``ack.wait(0.0)``), else its message, committed, would be neither its nor the
    # action's to deliver.
    writer, _ = stuck_writer(gated)
    acks: list[Ack] = []
    seen: list[object] = []
    ran = threading.Event()

    def after(committed: bool) -> None:
        ack = acks[0]  # nobody else waits on it now: a waiter holds its lock as it wakes
        seen.append((committed, ack.done, ack.wait(0.0) if ack.done else None))
        ran.set()

    try:
        ack = writer.submit([event(1)], after=after)
        assert ack is not None
        acks.append(ack)
        gated.gate.set()
        assert ran.wait(WAIT)
        assert seen == [(True, True, [2])]
        assert ack.wait(WAIT) == [2]
    finally:
        gated.gate.set()
        writer.stop(WAIT)


def test_a_resolved_ack_answers_at_once_while_another_waiter_wakes() -> None:
    # Ack.wait: "0 or less does not wait", and a second wait() "returns at once too";
    # done: "whether the submission was committed or failed". A waiter holds the ack's
    # lock for a moment as it wakes: meanwhile a resolved ack is still resolved.
    ack = Ack(1)
    ack._resolve([7], None)
    assert ack._lock.acquire(timeout=WAIT)  # another waiter, between its acquire and release
    try:
        assert ack.done
        assert ack.wait(0.0) == [7]
    finally:
        ack._lock.release()
