"""A full map whose pages a killed reader pinned frees its slot before it grows (helper h17, session 51).

The periodic sweep is tested beside (``test_stale_readers_s51``); this is the other
place a writer frees the slots of killed readers: before it grows a full map. Without
it, a journal at its ``max_map_size`` went fail-stop (``JournalFullError``) after a
hundred appends of 200 bytes, the killed reader's snapshot keeping every page freed
since from reuse, where the same appends without the reader fill a third of the map.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cogfabric.events import PrivateSet
from cogfabric.store import LmdbJournal

from .test_stale_readers_s51 import _holds, _killed_reader

if TYPE_CHECKING:
    from pathlib import Path

_LIMIT = 4 * 1024 * 1024
_APPENDS = 1000


def test_a_full_map_frees_a_killed_readers_pages_before_it_grows(tmp_path: Path) -> None:
    with LmdbJournal.open(tmp_path / "j", sync=False, map_size=_LIMIT, max_map_size=_LIMIT) as journal:
        journal.append([PrivateSet(at=0.0, agent="a", key="k", value=0)])
        pid = _killed_reader(tmp_path / "j")
        assert _holds(journal, pid)

        for _ in range(_APPENDS):  # within the interval of the periodic sweep: only a full map frees it
            journal.append([PrivateSet(at=0.0, agent="a", key="k", value="x" * 200)])

        assert not _holds(journal, pid)
        assert journal.last_seq == _APPENDS + 1
        assert journal.verify().ok
