"""``LmdbJournal.read_back``: a stream's records newest first, by its links, in short reads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import lmdb
import pytest

from cogfabric.store import Journal, JournalRecordError, LmdbJournal
from cogfabric.store._record import LINK_AT
from cogfabric.store.testing import make_events
from tests.store.test_lmdb_pins import _count_chunks

if TYPE_CHECKING:
    from pathlib import Path


def _edit_record(path: Path, seq: int, edit: Any) -> None:
    """Replace record ``seq``'s stored bytes with ``edit(bytes)`` (None deletes it), with plain lmdb."""
    env = lmdb.open(str(path), max_dbs=8, subdir=True)
    try:
        events = env.open_db(b"events")
        with env.begin(write=True, db=events) as txn:
            key = seq.to_bytes(8, "big")
            changed = edit(bytes(txn.get(key) or b""))
            if changed is None:
                assert txn.delete(key)
            else:
                txn.put(key, changed)
    finally:
        env.close()


def test_a_walk_back_reads_what_its_caller_takes_in_short_transactions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LmdbJournal.open(tmp_path / "j") as journal:
        journal.append(make_events(2600, agents=2))  # a1: 1,300 records
        walks = _count_chunks(journal, monkeypatch, "_read_back_txn")

        newest = journal.read_back("agent/a1")
        assert next(newest).seq == 2600
        assert walks == [256]  # one transaction, not the whole stream

        assert sum(1 for _ in newest) == 1299
        assert walks == [256] * 5 + [20]


def test_a_walk_back_from_before_starts_at_the_streams_next_anchor(tmp_path: Path) -> None:
    # The stream's records later than ``before`` that it walks over are fewer than one
    # anchor stride (64 records of the stream), not the rest of the stream.
    with LmdbJournal.open(tmp_path / "j") as journal:
        journal.append(make_events(2600, agents=2))
        with journal._env.begin() as txn:
            start = journal._back_start(txn, b"agent/a1", 1001)
            head = journal._back_start(txn, b"agent/a1", 2601)
            past = journal._back_start(txn, b"agent/a1", 5000)
            first = journal._back_start(txn, b"agent/a1", 1)

        assert 1001 <= start <= 1001 + 2 * 64
        assert start % 2 == 0  # a record of a1's
        assert head == past == 2600
        assert first == 0
        assert [r.seq for r in journal.read_back("agent/a1", before=1001)][:2] == [1000, 998]


def test_a_missing_record_is_named_once_every_newer_one_is_handed_out(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(20))  # a1: 2, 5, ..., 20
    _edit_record(path, 11, lambda _: None)

    with Journal.open(path, readonly=True) as journal:
        seen: list[int] = []
        with pytest.raises(
            JournalRecordError, match="stream link of record 14 names a record that is missing"
        ) as info:
            seen.extend(r.seq for r in journal.read_back("agent/a1"))
        assert info.value.seq == 11
        assert seen == [20, 17, 14]


def test_a_link_that_does_not_point_back_is_named_not_followed(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(20))
    # record 14 of a1 links to 17, after it: followed, the walk would loop forever
    _edit_record(path, 14, lambda v: v[:LINK_AT] + (17).to_bytes(8, "big") + v[LINK_AT + 8 :])

    with Journal.open(path, readonly=True) as journal:
        seen: list[int] = []
        with pytest.raises(JournalRecordError, match="does not point back") as info:
            seen.extend(r.seq for r in journal.read_back("agent/a1"))
        assert info.value.seq == 14
        assert seen == [20, 17]


def test_a_link_to_another_streams_record_is_named(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(20))
    # record 14 of a1 links to 12, a2's
    _edit_record(path, 14, lambda v: v[:LINK_AT] + (12).to_bytes(8, "big") + v[LINK_AT + 8 :])

    with Journal.open(path, readonly=True) as journal:
        with pytest.raises(
            JournalRecordError, match="link of record 14 names a record of another stream"
        ) as info:
            list(journal.read_back("agent/a1"))
        assert info.value.seq == 12


def test_a_walk_back_sees_the_journal_as_it_was_when_called(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j") as journal:
        journal.append(make_events(6))
        newest = journal.read_back("agent/a0")

        journal.append(make_events(6, start=6))

        assert [r.seq for r in newest] == [4, 1]
        with pytest.raises(TypeError, match="before is a seq"):
            journal.read_back("agent/a0", before="3")  # type: ignore[arg-type]
