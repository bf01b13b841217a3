"""What ``verify()`` promises an auditor at the last record, pinned by a mutation test (session 49).

Each test here failed on a mutant of store/_verify.py that every other test let
through: most of them a bound off by one at ``head_seq``, the last record the check
reads, where a journal's newest damage lies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cogfabric.store import Journal
from cogfabric.store.testing import make_events

from .test_contract_edges import _edit, _seq, _twenty, _verified
from .test_lmdb_journal import _raw_edit

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_the_last_record_removed_while_verify_reads_is_named_within_the_records_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Record 20 gone after verify read the head at 20: the report names it missing, and
    # its head_seq is the last record read with the head, not the one before it (a
    # first_bad_seq past head_seq would name a record the report says it never reached).
    path = _twenty(tmp_path)
    with Journal.open(path, readonly=True) as journal:
        read_pairs = journal._read_pairs  # type: ignore[attr-defined]

        def cut(after: int) -> list[tuple[bytes, bytes]]:
            return [(key, value) for key, value in read_pairs(after) if int.from_bytes(key, "big") != 20]

        monkeypatch.setattr(journal, "_read_pairs", cut)
        report = journal.verify()

    assert (report.ok, report.first_bad_seq, report.head_seq) == (False, 20, 20)
    assert (report.checked, report.reason) == (19, "record 20 is missing")


def test_records_removed_under_a_record_appended_since_are_named_once_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Records 15 to 20 gone and a record 21 there after verify read the head at 20 (a
    # hand edit, then another process's append): the record after 14 is one past the
    # head, which verify reads once, names 15 missing, and does not read again.
    path = _twenty(tmp_path)
    with Journal.open(path, readonly=True) as journal:
        read_pairs = journal._read_pairs  # type: ignore[attr-defined]
        reads: list[int] = []

        def cut(after: int) -> list[tuple[bytes, bytes]]:
            reads.append(after)
            assert len(reads) < 10, f"verify read the records after {after} again and again"
            kept = [(key, value) for key, value in read_pairs(after) if int.from_bytes(key, "big") <= 14]
            return [*kept, (_seq(21), read_pairs(19)[0][1])]

        monkeypatch.setattr(journal, "_read_pairs", cut)
        report = journal.verify()

    assert (report.ok, report.first_bad_seq, report.head_seq) == (False, 15, 20)
    assert (report.checked, report.reason) == (14, "record 15 is missing")


def test_an_extra_id_entry_naming_the_last_record_is_named_at_it(tmp_path: Path) -> None:
    path = _twenty(tmp_path)
    _edit(path, lambda txn, dbs: txn.put(b"forged-id", _seq(20), db=dbs[b"ids"]))

    report = _verified(path)

    assert (report.ok, report.first_bad_seq, report.head_seq) == (False, 20, 20)
    assert report.reason == "the event id index does not match the records"


def test_a_missing_anchor_of_the_last_record_is_named_at_it(tmp_path: Path) -> None:
    # One stream of 64 records: its 64th, the journal's last, is anchored.
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(64, agents=1))
    _raw_edit(path, lambda txn, _, dbs: txn.delete(b"agent/a0\0" + _seq(64), db=dbs[b"anchors"]))

    report = _verified(path)

    assert (report.ok, report.first_bad_seq, report.head_seq) == (False, 64, 64)
    assert report.reason == "the stream index does not match the records"
