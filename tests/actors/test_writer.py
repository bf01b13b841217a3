"""The journal writer's queue: bounded, so producers cannot outrun the journal without limit."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import RuntimeClosedError
from cogfabric.actors._writer import JournalWriter
from cogfabric.events import PrivateSet
from cogfabric.store import Journal

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


def event(i: int) -> PrivateSet:
    return PrivateSet(at=1.0, agent="a", key=f"k{i}", value=i)


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[GatedJournal]:
    with Journal.open(tmp_path / "j") as journal:
        yield GatedJournal(journal)


def start_writer(journal: GatedJournal, *, backlog_max: int, call_timeout: float = WAIT) -> JournalWriter:
    return JournalWriter(
        journal,  # type: ignore[arg-type]
        group_commit_max=1000,
        call_timeout=call_timeout,
        backlog_max=backlog_max,
    )


def test_a_producer_waits_while_the_backlog_is_full_and_goes_on_once_the_writer_takes_it(
    gated: GatedJournal,
) -> None:
    writer = start_writer(gated, backlog_max=4)
    try:
        writer.submit_nowait([event(0)])
        assert gated.entered.wait(WAIT)  # the writer holds event 0 and is stuck in append
        writer.submit_nowait([event(1), event(2)])
        writer.submit_nowait([event(3), event(4)])  # four waiting: the backlog is full
        done = threading.Event()

        def produce() -> None:
            writer.submit_nowait([event(5)])
            done.set()

        producer = threading.Thread(target=produce)
        producer.start()
        assert not done.wait(0.3), "a producer queued past a full backlog"
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
        writer.submit_nowait([event(0)])
        assert gated.entered.wait(WAIT)
        writer.submit_nowait([event(1)])  # the backlog is full
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
        writer.submit_nowait([event(0)], after=after)
        assert gated.entered.wait(WAIT)
        writer.submit_nowait([event(1)])  # the backlog is full when the action runs
        gated.gate.set()
        assert submitted.wait(WAIT)
        writer.flush(WAIT)
        assert sorted(r.event.key for r in gated.read()) == ["k0", "k1", "k2"]
    finally:
        gated.gate.set()
        writer.stop(WAIT)


def test_stopping_the_writer_releases_a_waiting_producer_with_a_typed_error(gated: GatedJournal) -> None:
    writer = start_writer(gated, backlog_max=1)
    errors: list[BaseException] = []
    writer.submit_nowait([event(0)])
    assert gated.entered.wait(WAIT)
    writer.submit_nowait([event(1)])
    waiting = threading.Event()

    def produce() -> None:
        waiting.set()
        try:
            writer.submit_nowait([event(2)])
        except RuntimeClosedError as exc:
            errors.append(exc)

    producer = threading.Thread(target=produce)
    producer.start()
    assert waiting.wait(WAIT)
    stopper = threading.Thread(target=writer.stop, args=(WAIT,))
    stopper.start()
    producer.join(WAIT)
    assert not producer.is_alive()
    gated.gate.set()
    stopper.join(WAIT)
    assert len(errors) == 1
    assert [r.event.key for r in gated.read()] == ["k0", "k1"]
