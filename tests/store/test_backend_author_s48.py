"""What a backend author meets writing a journal of their own (session 48, helper h7).

Found writing a SQLite backend from the README and the ``cogfabric.store`` docstrings
alone. The backend is ``test_layout_pins._Defaults``: the LMDB journal's abstract
methods under every default of ``Journal``, so no backend of this file's own is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lmdb
import pytest

from cogfabric.store import InvalidStreamError, Journal, JournalClosedError, LmdbJournal
from cogfabric.store.testing import JournalContract, make_events

from .test_layout_pins import _Defaults, _seq

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from pathlib import Path

    from cogfabric.events import Event
    from cogfabric.store import Snapshot


def test_open_on_a_subclass_without_its_own_is_refused_not_an_lmdb_journal(tmp_path: Path) -> None:
    # Journal.open ignored its class: _Defaults.open(path) gave an LmdbJournal, so a
    # backend that forgot to define open() silently ran on LMDB.
    with pytest.raises(TypeError, match="does not define open"):
        _Defaults.open(tmp_path / "j")
    assert not (tmp_path / "j").exists()
    with Journal.open(tmp_path / "k", sync=False) as journal:  # the base class's own still opens LMDB
        assert isinstance(journal, LmdbJournal)


class _Reworded(LmdbJournal):
    """The LMDB journal, refusing a snapshot past the last seq in words of its own."""

    def append(
        self, events: Iterable[Event], *, snapshots: Sequence[Snapshot] = (), validate: bool = True
    ) -> list[int]:
        try:
            return super().append(events, snapshots=snapshots, validate=validate)
        except ValueError as exc:
            if "snapshot" not in str(exc):
                raise
            msg = "a snapshot may not cover a record not stored"
            raise ValueError(msg) from None


def test_the_contract_takes_any_value_error_for_a_snapshot_past_the_last_seq(tmp_path: Path) -> None:
    # Journal.append says ValueError; the contract matched LMDB's message ("outside").
    with _Reworded.open(tmp_path / "j", sync=False) as journal:
        JournalContract().test_a_snapshot_past_the_last_seq_is_refused(journal)


def test_the_default_record_intact_answers_for_the_record_not_for_every_later_one(tmp_path: Path) -> None:
    # The default verified from seq to the end and said False for an intact record
    # whenever a later one was damaged (the runtime's placement check would then name
    # the intact record as changed).
    path = tmp_path / "j"
    with LmdbJournal.open(path, sync=False) as journal:
        journal.append(make_events(6, value="v"))
    env = lmdb.open(str(path), max_dbs=8)
    try:
        with env.begin(write=True, db=env.open_db(b"events")) as txn:
            record = bytes(txn.get(_seq(4)) or b"")
            txn.put(_seq(4), record.replace(b"\xa5value\xa1v", b"\xa5value\xa1w"))  # its chain link kept
    finally:
        env.close()

    with _Defaults(LmdbJournal.open(path, readonly=True)) as journal:
        intact = [journal.record_intact(seq) for seq in range(8)]
        assert intact == [False, True, True, True, False, True, True, False]
        assert intact == [journal.inner.record_intact(seq) for seq in range(8)]  # as the LMDB journal's own


def test_the_default_read_back_before_the_first_seq_still_refuses_a_closed_journal_and_a_bad_stream(
    tmp_path: Path,
) -> None:
    # The default returned nothing at once for before <= 1, with no check: the LMDB
    # journal's own raises, and so does the default for any other before.
    with _Defaults(LmdbJournal.open(tmp_path / "j", sync=False)) as journal:
        journal.append(make_events(3))
        assert list(journal.read_back("agent/a0", before=1)) == []
        with pytest.raises(InvalidStreamError):
            journal.read_back("agent/a\0b", before=1)
    with pytest.raises(JournalClosedError):
        journal.read_back("agent/a0", before=0)
    with pytest.raises(JournalClosedError):
        journal.record_intact(0)
