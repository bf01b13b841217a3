"""A read-only LMDB journal refuses appends up front, pinned where a mutation test found no test holding it.

``LmdbJournal.append`` checks ``readonly`` before it encodes anything. Without that
check LMDB's own refusal (its write transaction cannot begin) still reads as a
``JournalReadOnlyError``, so the tests that only ask for that type let it through;
but an empty append then returned ``[]``, and a refused append made the reader
fail-stop, its message saying the journal must be reopened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric.store import Journal, JournalReadOnlyError, LmdbJournal, Snapshot
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """A closed journal of three records (agent/a0, a1 and a2)."""
    path = tmp_path / "j"
    with Journal.open(path, sync=False) as journal:
        journal.append(make_events(3))
    return path


def test_an_empty_append_to_a_read_only_journal_is_refused_as_a_real_one_is(stored: Path) -> None:
    # append's docstring: "JournalReadOnlyError: the journal is read-only", and the
    # writer checks an empty append too ("it says what a real one would"). Kills: the
    # up-front readonly check of append dropped (an empty append returned []).
    with Journal.open(stored, readonly=True) as journal:
        with pytest.raises(JournalReadOnlyError) as info:
            journal.append([])
        assert str(info.value) == f"{stored} is open read-only"
        with pytest.raises(JournalReadOnlyError):
            journal.append(())


def test_a_refused_append_leaves_a_read_only_journal_readable_not_fail_stop(stored: Path) -> None:
    # A read-only journal is not failed: a refused append is refused before LMDB is
    # asked to write, and says nothing of reopening. Kills: the readonly check of
    # append dropped (LMDB's refusal made the reader fail-stop).
    with LmdbJournal.open(stored, readonly=True) as journal:
        with pytest.raises(JournalReadOnlyError) as info:
            journal.append(make_events(1, start=3))
        assert str(info.value) == f"{stored} is open read-only"
        with pytest.raises(JournalReadOnlyError) as snap:
            journal.save_snapshot(Snapshot("agent/a0", 1, b"state"))
        assert str(snap.value) == f"{stored} is open read-only"

        assert not journal.is_failed
        assert journal.last_seq == 3
        assert [record.seq for record in journal.read()] == [1, 2, 3]
        assert journal.load_snapshot("agent/a0") is None

    with Journal.open(stored) as journal:  # nothing of it was written
        assert journal.last_seq == 3
        assert journal.load_snapshot("agent/a0") is None
