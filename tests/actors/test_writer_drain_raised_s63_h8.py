"""A drain that raised out of the journal writer (session 63, helper h8).

A drain that raised out of the writer actor (a backend's bug) fails the groups it had
taken, in order, with what is queued: their callers hear it at once, not at their timeout.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors._writer import JournalWriter
from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalFailedError

from .test_writer import WAIT, GatedJournal
from .test_writer_full_s63_h3 import _change

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from cogfabric.events import Event


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
