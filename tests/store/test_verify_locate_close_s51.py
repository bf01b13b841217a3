"""A ``close()`` that lands while ``verify()`` locates a damaged index entry.

When the anchors or the id index disagree with the records, ``verify()`` walks them a
second time to name the first bad seq. Those two walks opened their read transaction
directly, not through the journal's step that checks again, under its lock, that the
journal is still open; a ``close()`` by another thread just before raised LMDB's
refusal as ``JournalUnavailableError`` (a storage failure) rather than the documented
``JournalClosedError``, as every other read has done since session 50.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalClosedError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


class _CloseAt:
    """A journal's lock whose ``at``-th taking (counted from 1) finds ``close`` done a moment before."""

    def __init__(self, real: Any, close: Callable[[], object] | None, at: int = 0) -> None:
        self.real, self.close, self.at, self.taken = real, close, at, 0

    def __enter__(self) -> object:
        if threading.current_thread() is threading.main_thread():
            self.taken += 1
            if self.close is not None and self.taken == self.at:
                self.close()  # another thread's close(), just before this step takes the lock
        return self.real.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.real.__exit__(*exc)


def _damaged(path: Path, index: str) -> Journal:
    """A journal of 200 records of one stream, one entry of ``index`` deleted behind its back."""
    journal = Journal.open(path, sync=False)
    journal.append([PrivateSet(at=0.0, agent="a", key="k", value=n, id=f"e{n}") for n in range(200)])
    env: Any = journal._env  # type: ignore[attr-defined]
    with env.begin(write=True) as txn:
        if index == "ids":
            assert txn.delete(b"e70", db=journal._db_ids)  # type: ignore[attr-defined]
        else:
            cursor = txn.cursor(db=journal._db_anchors)  # type: ignore[attr-defined]
            assert cursor.first()
            assert cursor.delete()
    return journal


@pytest.mark.parametrize(("index", "seq"), [("ids", 71), ("anchors", 64)])
def test_verify_names_the_damaged_index_entry(tmp_path: Path, index: str, seq: int) -> None:
    with _damaged(tmp_path / "j", index) as journal:
        report = journal.verify()
    assert not report.ok
    assert report.first_bad_seq == seq


@pytest.mark.parametrize("index", ["ids", "anchors"])
def test_a_close_just_before_verify_locates_the_bad_entry_raises_journal_closed_error(
    tmp_path: Path, index: str
) -> None:
    counting = _damaged(tmp_path / "count", index)
    try:
        counter = _CloseAt(counting._lock, None)  # type: ignore[attr-defined]
        counting._lock = counter  # type: ignore[attr-defined]
        assert not counting.verify().ok
        takings = counter.taken  # before close(), which takes the lock too
    finally:
        counting.close()
    journal = _damaged(tmp_path / "j", index)
    try:
        # the last taking of the lock is the walk that names the bad seq
        journal._lock = _CloseAt(journal._lock, journal.close, takings)  # type: ignore[attr-defined]
        with pytest.raises(JournalClosedError, match="is closed"):
            journal.verify()
    finally:
        journal.close()
