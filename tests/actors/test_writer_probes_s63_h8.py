"""Loose ends of the writer's "first caller told" (session 63, helper h8).

A probe that asks the writer whether it is usable and keeps the refusal to itself
(``check_usable(heard=False)``, or a submission of its own with ``heard=False``) is no
caller told of a full journal: the next caller is still the first, and hears
``JournalFullError``, not "still full". And a drain that raised out of the writer actor
(a backend's bug) fails the groups it had taken, in order, with what is queued: their
callers hear it at once, not at their timeout.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors._writer import JournalWriter
from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalFailedError, JournalFullError, JournalStillFullError

from .test_writer import WAIT, GatedJournal
from .test_writer_full_s63_h3 import _FULL, _change, writer  # noqa: F401 - the fixture
from .test_writer_full_s63_h6 import _filled_by_nobody

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from cogfabric.events import Event

    from .test_writer_full_s63_h3 import GatedFullJournal


def _first_told_is_full(journal_writer: JournalWriter) -> None:
    with pytest.raises(JournalFullError) as first:
        journal_writer.submit(_change("a9"))
    assert type(first.value) is JournalFullError, first.value
    assert str(first.value) == f"the journal is full, and this change is not stored: {_FULL}"
    with pytest.raises(JournalStillFullError):
        journal_writer.submit(_change("a9"))


@pytest.mark.parametrize(
    "probe",
    [
        pytest.param(lambda w: w.check_usable(heard=False), id="check_usable"),
        pytest.param(lambda w: w.submit(_change("a1"), heard=False), id="submit"),
    ],
)
def test_a_probe_that_keeps_the_refusal_to_itself_leaves_the_next_caller_the_first_told(
    writer: tuple[JournalWriter, GatedFullJournal, threading.Event],  # noqa: F811 - the fixture
    probe: Callable[[JournalWriter], object],
) -> None:
    journal_writer, gated, failstop = writer
    _filled_by_nobody(journal_writer, gated, failstop)
    with pytest.raises(JournalFullError) as kept:
        probe(journal_writer)
    assert type(kept.value) is JournalFullError  # it was the first: told it is full, and keeps it

    _first_told_is_full(journal_writer)


def test_a_publication_applied_after_the_failure_tells_nobody(
    writer: tuple[JournalWriter, GatedFullJournal, threading.Event],  # noqa: F811 - the fixture
) -> None:
    # an agent that applied a published task context says so through the writer's
    # queue; refused on a fail-stop journal, it is dropped, and heard by nobody
    journal_writer, gated, failstop = writer
    journal_writer._publishes[7] = {"a1"}  # a publication at seq 7 that a1 has not applied
    _filled_by_nobody(journal_writer, gated, failstop)
    journal_writer.publication_applied("a1", 7)

    _first_told_is_full(journal_writer)


# ------------------------------------------------------------------ a drain that raised


class _ShortJournal(GatedJournal):
    """A real journal whose append returns one seq too few for a change keyed 'short' (a bug)."""

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:
        seqs = super().append(events, **kwargs)
        return seqs[:-1] if any(getattr(e, "key", "") == "short" for e in events) else seqs


def _note(settled: list[tuple[str, bool]], agent: str, ok: bool) -> None:
    settled.append((agent, ok))


@pytest.fixture
def short_writer(tmp_path: Path) -> Iterator[tuple[JournalWriter, _ShortJournal]]:
    with Journal.open(tmp_path / "j") as journal:
        short = _ShortJournal(journal)
        started = JournalWriter(short, group_commit_max=1, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
        try:
            yield started, short
        finally:
            short.gate.set()
            started.stop(WAIT)


def test_the_groups_of_a_drain_that_raised_are_failed_in_order_at_once(
    short_writer: tuple[JournalWriter, _ShortJournal],
) -> None:
    journal_writer, short = short_writer
    settled: list[tuple[str, bool]] = []
    journal_writer.submit_nowait(_change("a0"))  # the drain the others wait behind
    assert short.entered.wait(WAIT)
    acks = []
    for key, agent in [("short", "a1"), ("k", "a2"), ("k", "a3")]:  # one drain, three groups
        events = [PrivateSet(at=1.0, agent=agent, key=key, value=1)]
        acks.append(journal_writer.submit(events, after=functools.partial(_note, settled, agent)))
    short.gate.set()
    assert journal_writer._ended.wait(WAIT)  # the actor died of the bug; _died, then _stopped, ran

    assert settled == [("a1", False), ("a2", False), ("a3", False)]  # as handed over, none left waiting
    for ack in acks:
        assert ack is not None
        with pytest.raises(JournalFailedError, match="the journal writer stopped after an error: ValueError"):
            ack.wait(0)
    with pytest.raises(JournalFailedError):
        journal_writer.submit(_change("a4"))
