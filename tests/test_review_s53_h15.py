"""Review of ``Runtime.backup`` and the README's backup text (session 53, helper h15)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from cogfabric.store import LmdbJournal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path


def test_a_compact_backup_survives_remaps_of_the_map_by_another_thread(tmp_path: Path) -> None:
    # a writer growing the map (as a Runtime's writer thread does while rt.backup copies)
    # remaps under the journal's lock; py-lmdb's begin of the copy's transaction racing
    # it failed with "mdb_txn_begin: Invalid argument" (JournalUnavailableError)
    with LmdbJournal.open(tmp_path / "j", map_size=1 << 20, sync=False) as journal:
        journal.append(make_events(50))
        stop = threading.Event()
        remaps = [0]

        def remap() -> None:
            while not stop.is_set():
                with journal._lock:  # as _grow, and the adoption of another process's growth
                    journal._env.set_mapsize(0)
                remaps[0] += 1

        remapper = threading.Thread(target=remap)
        remapper.start()
        try:
            seqs = [journal.backup(tmp_path / f"b{i}") for i in range(10)]
        finally:
            stop.set()
            remapper.join(10)
        assert not remapper.is_alive()
        assert remaps[0] > 0
    assert seqs == [50] * 10
    for i in (0, 9):
        with LmdbJournal.open(tmp_path / f"b{i}", readonly=True) as copied:
            assert copied.last_seq == 50
            assert copied.verify(decode=True).ok
