"""The journal writer's promises that a mutation test found no test held.

Each test names what its docstring or README.md promises: the writer's timeouts
(``flush``, ``stop``), ``settled``, ``wait_for_room=False``, the fail-stop hook, the
post-commit actions, a refusal that stays one submission's, and the errors waiters get.
"""

from __future__ import annotations

import collections
import logging
import threading
import traceback
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import ActorTimeoutError, RuntimeClosedError
from cogfabric.actors._writer import JournalWriter, error_copy
from cogfabric.events import PrivateSet
from cogfabric.events._errors import UnencodableValueError
from cogfabric.store import (
    InvalidStreamError,
    Journal,
    JournalError,
    JournalFailedError,
    JournalFullError,
    JournalStillFullError,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from cogfabric.actors._writer import Ack, _Submission
    from cogfabric.events import Event

WAIT = 10.0


def event(i: int) -> PrivateSet:
    return PrivateSet(at=1.0, agent="a", key=f"k{i}", value=i)


class GatedJournal:
    """A real journal whose first append waits for ``gate``; ``failing`` makes later appends fail."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls = 0
        self.failing: BaseException | None = None
        self.is_failed = False

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            assert self.gate.wait(WAIT), "the test never opened the gate"
        elif self.failing is not None:
            self.is_failed = isinstance(self.failing, JournalError)  # a storage failure: fail-stop
            raise self.failing
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


class SignallingQueue(collections.deque["_Submission"]):
    """The writer's queue, which tells the test each time a submission is queued."""

    def __init__(self) -> None:
        super().__init__()
        self.appended = threading.Event()

    def append(self, submission: _Submission) -> None:
        super().append(submission)
        self.appended.set()


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[GatedJournal]:
    with Journal.open(tmp_path / "j") as journal:
        yield GatedJournal(journal)


def start_writer(
    journal: GatedJournal, *, call_timeout: float = WAIT, group_commit_max: int = 1000, backlog_max: int = 100
) -> JournalWriter:
    return JournalWriter(
        journal,  # type: ignore[arg-type]
        group_commit_max=group_commit_max,
        call_timeout=call_timeout,
        backlog_max=backlog_max,
    )


def keys(journal: GatedJournal) -> list[str]:
    return [r.event.key for r in journal.read()]


def test_flush_waits_as_long_as_its_own_timeout_not_call_timeout(gated: GatedJournal) -> None:
    # "ActorTimeoutError: not within ``timeout`` (default ``call_timeout``)": a flush given
    # more than call_timeout waits for the commit that comes within it.
    writer = start_writer(gated, call_timeout=0.0)
    queue = SignallingQueue()
    writer._queue = queue

    def open_gate() -> None:
        if queue.appended.wait(WAIT):
            gated.gate.set()

    opener = threading.Thread(target=open_gate)
    try:
        writer.submit_nowait([event(0)])
        assert gated.entered.wait(WAIT)  # the writer is stuck in event 0's append
        queue.appended.clear()
        opener.start()  # opens the gate once the flush has queued its marker
        writer.flush(WAIT)
        assert keys(gated) == ["k0"]
    finally:
        gated.gate.set()
        opener.join(WAIT)
        writer.stop(WAIT)


def test_stop_gives_up_on_a_stalled_writer_after_its_own_timeout(gated: GatedJournal) -> None:
    # stop: it waits, "but not for a writer that makes no commit for ``timeout`` seconds".
    writer = start_writer(gated, call_timeout=60.0)
    try:
        writer.submit_nowait([event(0)])
        assert gated.entered.wait(WAIT)  # stalled in event 0's append
        # gives up after 0.01 s, and ten times that for a commit under way, and says which it was
        under_way = r"did not stop: its commit has been under way for \d+\.\d s"
        with pytest.raises(ActorTimeoutError, match=under_way):
            writer.stop(0.01)
        gated.gate.set()
        writer.stop(WAIT)  # it goes on, and commits what it held
        assert keys(gated) == ["k0"]
    finally:
        gated.gate.set()
        writer.stop(WAIT)


def test_stop_keeps_waiting_while_the_writer_ends_commits_between_its_checks(
    gated: GatedJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "wait while it makes progress (a commit begun or ended within ``stall`` seconds ...)":
    # a writer that ended a commit and is between two is busy, not stalled.
    writer = start_writer(gated)
    hold, between = threading.Event(), threading.Event()
    take = writer._take

    def held_take() -> list[Any]:  # the writer, between two commits
        between.set()
        assert hold.wait(WAIT)
        return take()

    ended = writer._ended
    ended_wait = ended.wait
    checks: list[float | None] = []

    def wait(timeout: float | None = None) -> bool:
        checks.append(timeout)
        if len(checks) == 1:  # as if a whole stall passed: event 0's commit ended meanwhile
            gated.gate.set()
            assert between.wait(WAIT)
            return False
        hold.set()
        return ended_wait(timeout)

    writer.submit_nowait([event(0)])
    assert gated.entered.wait(WAIT)  # stuck in event 0's append: a commit is under way
    monkeypatch.setattr(writer, "_take", held_take)
    monkeypatch.setattr(ended, "wait", wait)
    try:
        writer.stop(WAIT)  # a commit ended since its first check: it waits again
        assert len(checks) == 2
        assert keys(gated) == ["k0"]
    finally:
        gated.gate.set()
        hold.set()
        writer.stop(WAIT)


def test_settled_is_true_once_the_journal_failed(gated: GatedJournal) -> None:
    # settled: true once everything is committed, or the journal failed (it holds what it holds).
    gated.gate.set()
    writer = start_writer(gated)
    try:
        first = writer.submit([event(0)])
        assert first is not None
        assert first.wait(WAIT) == [1]  # committed before the journal starts failing
        gated.failing = JournalFullError("reached max_map_size")
        writer.submit_nowait([event(1)])
        assert writer.settled()
        assert isinstance(writer.failure, JournalFullError)
    finally:
        writer.stop(WAIT)
    assert keys(gated) == ["k0"]


def test_a_submission_told_not_to_wait_for_room_queues_at_once_past_a_full_backlog(
    gated: GatedJournal,
) -> None:
    # submit: it waits for room "unless ``wait_for_room`` is False": that caller waited already.
    writer = start_writer(gated, backlog_max=1)
    condition = SignallingCondition(writer._lock)
    writer._room = condition
    try:
        writer.submit_nowait([event(0)])
        assert gated.entered.wait(WAIT)  # the writer holds event 0 and is stuck in append
        writer.submit_nowait([event(1)])  # the backlog is full
        ack = writer.submit([event(2)], wait_for_room=False)
        writer.submit_nowait([event(3)], wait_for_room=False)
        assert not condition.waiting.is_set()  # neither waited
        assert ack is not None
        assert not ack.done
        gated.gate.set()
        assert ack.wait(WAIT) == [3]
        writer.flush(WAIT)
        assert keys(gated) == ["k0", "k1", "k2", "k3"]
    finally:
        gated.gate.set()
        writer.stop(WAIT)


@pytest.mark.parametrize(
    "failing",
    [JournalFullError("reached max_map_size"), RuntimeError("a bug in the journal")],
    ids=["a storage failure", "an unexpected error"],
)
def test_the_fail_stop_hook_is_called_on_the_writers_thread(
    gated: GatedJournal, failing: BaseException
) -> None:
    # on_failstop: "Called on the writer's thread once a commit failed in storage (fail-stop)":
    # the runtime then has every agent take the journal's word for its state.
    gated.gate.set()
    writer = start_writer(gated)
    called: list[int] = []
    writer.on_failstop = lambda: called.append(threading.get_ident())
    try:
        first = writer.submit([event(0)])
        assert first is not None
        assert first.wait(WAIT) == [1]  # committed before the journal starts failing
        gated.failing = failing
        ack = writer.submit([event(1)])
        assert ack is not None
        with pytest.raises(JournalError):
            ack.wait(WAIT)
    finally:
        writer.stop(WAIT)  # the hook, if called, ran before the writer's thread ended
    assert called == [writer._writer_ident]


def test_a_fail_stop_hook_that_raises_leaves_no_submission_of_the_drain_unanswered(
    gated: GatedJournal,
) -> None:
    # "the failure stands; the agents reload at their next message": the other groups the
    # writer had taken are refused, not left to their waiters' timeouts.
    writer = start_writer(gated, group_commit_max=1)

    def hook() -> None:
        msg = "the runtime could not reload its agents"
        raise RuntimeError(msg)

    writer.on_failstop = hook
    try:
        writer.submit_nowait([event(0)])
        assert gated.entered.wait(WAIT)  # stuck in event 0's append: the next three queue up
        acks = [writer.submit([event(i)]) for i in (1, 2, 3)]
        gated.failing = JournalFullError("reached max_map_size")
        gated.gate.set()  # one drain takes all three: three groups of one
        first, *later = acks
        assert first is not None
        with pytest.raises(JournalFullError):
            first.wait(WAIT)
        for ack in later:
            assert ack is not None
            with pytest.raises(JournalStillFullError):
                ack.wait(WAIT)
    finally:
        gated.gate.set()
        writer.stop(WAIT)
    assert keys(gated) == ["k0"]


def test_a_value_the_journal_cannot_encode_is_refused_alone_and_the_writer_goes_on(
    gated: GatedJournal,
) -> None:
    # "The journal refused the group and stored nothing (a bad stream name, a value it
    # cannot encode): one bad submission must not take the others with it" - and such a
    # refusal is no storage failure: the writer does not go fail-stop.
    writer = start_writer(gated)
    bad = PrivateSet(at=1.0, agent="a", key="bad", value=object())
    try:
        writer.submit_nowait([event(0)])
        assert gated.entered.wait(WAIT)  # stuck in event 0's append: the rest queue up
        good = writer.submit([event(1)])
        refused = writer.submit([bad])
        gated.gate.set()
        assert good is not None
        assert refused is not None
        assert good.wait(WAIT) == [2]
        with pytest.raises(UnencodableValueError):
            refused.wait(WAIT)
        assert writer.failure is None
        later = writer.submit([event(2)])
        assert later is not None
        assert later.wait(WAIT) == [3]
    finally:
        gated.gate.set()
        writer.stop(WAIT)
    assert keys(gated) == ["k0", "k1", "k2"]


def test_a_post_commit_action_is_told_whether_its_commit_succeeded(gated: GatedJournal) -> None:
    # "``after`` runs on the writer's thread once the commit is over, with whether it succeeded"
    gated.gate.set()
    writer = start_writer(gated)
    told: list[tuple[str, bool]] = []
    bad = PrivateSet(at=1.0, agent="x" * 300, key="bad", value=0)  # its stream name is too long
    try:
        writer.submit_nowait([event(0)], after=lambda ok: told.append(("good", ok)))
        ack = writer.submit([bad], after=lambda ok: told.append(("bad", ok)))
        assert ack is not None
        with pytest.raises(InvalidStreamError):
            ack.wait(WAIT)
        writer.flush(WAIT)
    finally:
        writer.stop(WAIT)
    assert told == [("good", True), ("bad", False)]


def test_a_post_commit_action_that_raises_is_logged_and_the_writer_goes_on(
    gated: GatedJournal, caplog: pytest.LogCaptureFixture
) -> None:
    gated.gate.set()
    writer = start_writer(gated)

    def broken(committed: bool) -> None:
        msg = f"a broken action (committed={committed})"
        raise RuntimeError(msg)

    try:
        with caplog.at_level(logging.ERROR, logger="cogfabric.actors._writer"):
            first = writer.submit([event(0)], after=broken)
            assert first is not None
            assert first.wait(WAIT) == [1]
            writer.flush(WAIT)  # the action ran, and raised
        second = writer.submit([event(1)])
        assert second is not None
        assert second.wait(WAIT) == [2]
        assert writer.failure is None
        assert "a post-commit action failed" in caplog.text
    finally:
        writer.stop(WAIT)


def test_what_a_drain_that_raised_on_stop_left_behind_is_failed_at_once(
    gated: GatedJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # _stopped: "Only a drain that raised leaves submissions behind; their callers hear it
    # now rather than at their timeout."
    gated.gate.set()
    writer = start_writer(gated, call_timeout=60.0)
    refuse_more = writer._refuse_more
    queued: list[Ack | None] = []

    def broken_take() -> list[Any]:
        msg = "a bug in the writer"
        raise RuntimeError(msg)

    def queue_then_refuse() -> None:  # on_stop, on the writer's thread: one change got in first
        queued.append(writer.submit([event(1)]))
        refuse_more()
        monkeypatch.setattr(writer, "_take", broken_take)  # on_stop's drain then raises

    monkeypatch.setattr(writer, "_refuse_more", queue_then_refuse)
    try:
        committed = writer.submit([event(0)])
        assert committed is not None
        assert committed.wait(WAIT) == [1]
        writer._ref.stop(block=True, timeout=WAIT)  # as pykka's stop_all does it: on_stop may queue
    finally:
        writer.stop(WAIT)
    [ack] = queued
    assert ack is not None
    with pytest.raises(RuntimeClosedError, match="before committing it"):
        ack.wait(0.0)  # answered as the writer stopped, not left to its 60 s
    assert keys(gated) == ["k0"]


def _chain(error: BaseException) -> list[str]:
    return traceback.format_exception(error.with_traceback(None), chain=True)


def lmdb_said_no() -> None:
    msg = "lmdb said no"
    raise OSError(msg)


def _raised_in_handler(*, suppress: bool) -> JournalFailedError:
    def raise_it() -> None:
        try:
            lmdb_said_no()
        except OSError:
            if suppress:
                raise JournalFailedError("the append failed") from None  # noqa: EM101
            raise JournalFailedError("the append failed")  # noqa: B904, EM101

    with pytest.raises(JournalFailedError) as caught:
        raise_it()
    return caught.value


@pytest.mark.parametrize("suppress", [False, True], ids=["with its context", "from None"])
def test_a_waiters_copy_of_an_error_shows_the_same_chain(*, suppress: bool) -> None:
    # error_copy: the same type, message, attributes, notes and cause; and what Python
    # shows with it: its context, or none when it was raised ``from None``.
    error = _raised_in_handler(suppress=suppress)

    twin = error_copy(error)

    assert twin is not error
    assert _chain(twin) == _chain(error)
    assert ("lmdb said no" in "".join(_chain(twin))) is not suppress
