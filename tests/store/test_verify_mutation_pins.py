"""What ``verify()`` promises an auditor, pinned by a mutation test of store/_verify.py and _pages.py.

Each test here failed on a mutant of ``verify()`` (or of the page walk) that the
other tests let through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cogfabric.store import Journal
from cogfabric.store._record import head_value

from .test_contract_edges import _edit, _head, _seq, _twenty, _verified

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_a_chain_head_rolled_back_by_one_record_is_named_as_rolled_back(tmp_path: Path) -> None:
    # The last commit lost (PITFALLS: metasync off keeps ACI, loses the last commit): the
    # head names record 19 while record 20 is there. Its link is not record 20's, but the
    # reason an auditor reads must say the head was rolled back, not that it was changed.
    path = _twenty(tmp_path)

    def roll_back(txn: Any, dbs: dict[bytes, Any]) -> None:
        chain = bytes(txn.get(_seq(19), db=dbs[b"events"]))[-16:]
        txn.put(b"head", head_value(_seq(19), chain, b""), db=dbs[b"meta"])

    _edit(path, roll_back)
    report = _verified(path)

    assert (report.ok, report.first_bad_seq, report.head_seq) == (False, 20, 20)
    assert report.reason == "the chain head was rolled back to seq 19 while records go on to 20"


def test_a_tail_check_names_the_lowest_seq_of_three_stream_heads_set_back(tmp_path: Path) -> None:
    # The tail (11 on) meets agent/a1 first (11), then a2 (12), then a0 (13); their last
    # records are 20, 18 and 19: the lowest is neither the first nor the last stream met.
    path = _twenty(tmp_path)

    def set_back(txn: Any, dbs: dict[bytes, Any]) -> None:
        txn.put(b"agent/a0", _head(16, 6, 1), db=dbs[b"heads"])
        txn.put(b"agent/a1", _head(17, 6, 2), db=dbs[b"heads"])
        txn.put(b"agent/a2", _head(15, 5, 3), db=dbs[b"heads"])

    _edit(path, set_back)
    report = _verified(path, after=10)

    assert (report.ok, report.first_bad_seq, report.head_seq) == (False, 18, 20)
    assert report.reason == "the stream index's head of 'agent/a2' does not match its records"


def test_records_removed_while_verify_reads_are_named_at_the_first_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Records 15 to 20 gone after verify read the head at 20 (as a hand edit by another
    # process would make them): the report names the first missing record, not the last
    # one it checked.
    path = _twenty(tmp_path)
    with Journal.open(path, readonly=True) as journal:
        read_pairs = journal._read_pairs  # type: ignore[attr-defined]

        def cut(after: int) -> list[tuple[bytes, bytes]]:
            return [(key, value) for key, value in read_pairs(after) if int.from_bytes(key, "big") <= 14]

        monkeypatch.setattr(journal, "_read_pairs", cut)
        report = journal.verify()

    assert (report.ok, report.first_bad_seq, report.head_seq) == (False, 15, 20)
    assert (report.checked, report.reason) == (14, "record 15 is missing")


def test_an_extra_id_entry_naming_a_record_of_another_id_is_named_at_that_record(tmp_path: Path) -> None:
    # Every record's own id entry is there; one more names record 5, whose id it is not.
    path = _twenty(tmp_path)
    _edit(path, lambda txn, dbs: txn.put(b"forged-id", _seq(5), db=dbs[b"ids"]))

    report = _verified(path)

    assert (report.ok, report.first_bad_seq, report.head_seq) == (False, 5, 20)
    assert report.reason == "the event id index does not match the records"
