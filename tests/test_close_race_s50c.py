"""A ``close()`` on another thread right after a read let go of the journal's lock (mutation round).

Session 50's close-race fix reads everything a one-shot read returns under the lock
(``info()``'s map size too): a ``close()`` that takes the lock the moment the read lets
go of it must not fail the answer already read. And the one read only a read-only
journal makes under the lock (``last_seq``) checks that it is still open as the others do.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalClosedError, Snapshot
from tests.test_close_race_s50 import _CloseFirst

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


class _CloseAfter:
    """A journal's lock whose first letting go by ``caller`` is followed at once by ``close``."""

    def __init__(self, real: Any, close: Callable[[], object], caller: threading.Thread) -> None:
        self.real, self.close, self.caller, self.armed = real, close, caller, True

    def __enter__(self) -> object:
        return self.real.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.real.__exit__(*exc)
        if self.armed and threading.current_thread() is self.caller:
            self.armed = False
            self.close()  # another thread's close(), as soon as the lock is free


ONE_SHOT: dict[str, Callable[[Journal], object]] = {
    "info": lambda j: j.info(),  # type: ignore[attr-defined]
    "map_size": lambda j: j.map_size,  # type: ignore[attr-defined]
    "stream_start": lambda j: j.stream_start("agent/a"),
    "streams": lambda j: j.streams(),
    "load_snapshot": lambda j: j.load_snapshot("agent/a"),
    "record_intact": lambda j: j.record_intact(1),
}


@pytest.mark.parametrize("name", list(ONE_SHOT))
def test_a_close_right_after_a_read_let_go_of_the_lock_leaves_its_answer(tmp_path: Path, name: str) -> None:
    journal = Journal.open(tmp_path / "j", sync=False)
    try:
        journal.append(
            [PrivateSet(at=0.0, agent="a", key="k", value=1)],
            snapshots=[Snapshot(stream="agent/a", seq=1, data=b"state")],
        )
        expected = ONE_SHOT[name](journal)
        journal._lock = _CloseAfter(journal._lock, journal.close, threading.current_thread())  # type: ignore[attr-defined]

        assert ONE_SHOT[name](journal) == expected
        assert journal.closed
    finally:
        journal.close()


def test_a_read_only_last_seq_that_a_close_overtakes_raises_journal_closed_error(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j") as writer:
        writer.append([PrivateSet(at=0.0, agent="a", key="k", value=1)])
    journal = Journal.open(tmp_path / "j", readonly=True)
    try:
        assert journal.last_seq == 1
        journal._lock = _CloseFirst(journal._lock, journal.close, threading.current_thread())  # type: ignore[attr-defined]
        with pytest.raises(JournalClosedError, match="is closed"):
            _ = journal.last_seq
    finally:
        journal.close()
