from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import tracemalloc
import types
from typing import TYPE_CHECKING, Any

import lmdb
import msgspec
import pytest

from cogfabric.events import (
    MAX_VALUE_DEPTH,
    AgentEvent,
    CognitiveState,
    CognitiveStateSet,
    EventCodec,
    EventVersionError,
    InvalidEventError,
    LifecycleChanged,
    PrivateSet,
    UnknownEventTypeError,
)
from cogfabric.store import (
    FORMAT_VERSION,
    InvalidStreamError,
    Journal,
    JournalClosedError,
    JournalDamagedError,
    JournalFailedError,
    JournalFormatError,
    JournalFullError,
    JournalHeaderError,
    JournalIntegrityError,
    JournalKeyError,
    JournalLockedError,
    JournalNotFoundError,
    JournalReadOnlyError,
    JournalRecordDecodeError,
    JournalRecordError,
    JournalRecordVersionError,
    JournalUnavailableError,
    LmdbJournal,
    Snapshot,
    VerifyReport,
    _lmdb,
)
from cogfabric.store import _verify as verify_module
from cogfabric.store._lmdb import _short_by, _translated
from cogfabric.store._record import head_value
from cogfabric.store.testing import JournalContract, make_events

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path


class TestLmdbJournal(JournalContract):
    @pytest.fixture
    def journal(self, tmp_path: Path) -> Iterator[Journal]:
        with LmdbJournal.open(tmp_path / "journal", map_size=1 << 24) as journal:
            yield journal

    def reopen(self, journal: Journal) -> Journal:
        assert isinstance(journal, LmdbJournal)
        journal.close()
        return LmdbJournal.open(journal.path)

    def test_records_carry_a_sixteen_byte_chain_link(self, journal: Journal) -> None:
        journal.append(make_events(2))

        chains = [r.chain for r in journal.read()]

        assert [len(c) for c in chains] == [16, 16]
        assert chains[0] != chains[1]


def _raw_edit(path: Path, edit: Callable[[Any, Any, dict[bytes, Any]], object]) -> None:
    """Change a closed journal's bytes with the plain lmdb package, as an attacker would."""
    env = lmdb.open(str(path), max_dbs=8, subdir=True)
    try:
        names = (b"events", b"heads", b"anchors", b"ids", b"snapshots", b"meta")
        dbs = {name: env.open_db(name) for name in names}
        with env.begin(write=True) as txn:
            edit(txn, dbs[b"events"], dbs)
    finally:
        env.close()


def _seq(n: int) -> bytes:
    return n.to_bytes(8, "big")


@pytest.fixture
def closed_journal(tmp_path: Path) -> Path:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append(make_events(20))
        journal.save_snapshot(Snapshot("agent/a0", 9, b"state"))
    return path


def _verify(path: Path, **kwargs: Any) -> Any:
    with Journal.open(path, readonly=True, **kwargs) as journal:
        return journal.verify(decode=True)


def _cut_off_the_end(txn: Any, events: Any, dbs: dict[bytes, Any], keep: int) -> None:
    """Remove every record past ``keep`` and mend every index, without the chain key."""
    for key, _ in list(txn.cursor(db=events)):
        if int.from_bytes(key, "big") > keep:
            txn.delete(key, db=events)
    for key, value in list(txn.cursor(db=dbs[b"ids"])):
        if int.from_bytes(value, "big") > keep:
            txn.delete(key, db=dbs[b"ids"])
    for key, _ in list(txn.cursor(db=dbs[b"anchors"])):
        if int.from_bytes(key[-8:], "big") > keep:
            txn.delete(key, db=dbs[b"anchors"])
    for key, value in list(txn.cursor(db=dbs[b"snapshots"])):
        if int.from_bytes(value[16:24], "big") > keep:
            txn.delete(key, db=dbs[b"snapshots"])
    heads: dict[bytes, list[int]] = {}
    for key, value in txn.cursor(db=events):
        stream = bytes(value[-25 - value[-25] : -25])  # the trailer: stream | len | link | chain
        seq = int.from_bytes(key, "big")
        head = heads.setdefault(stream, [0, 0, seq])
        head[0], head[1] = seq, head[1] + 1
    for key, _ in list(txn.cursor(db=dbs[b"heads"])):
        txn.delete(key, db=dbs[b"heads"])
    for stream, (last, count, first) in heads.items():
        txn.put(stream, _seq(last) + count.to_bytes(8, "big") + _seq(first), db=dbs[b"heads"])
    chain = bytes(txn.get(_seq(keep), db=events))[-16:]
    txn.put(b"head", head_value(_seq(keep), chain, b""), db=dbs[b"meta"])  # no key to tag it with


class TestTamperEvidence:
    def test_a_keyed_journal_cut_short_without_the_key_fails_verification(self, tmp_path: Path) -> None:
        # Cutting records off the end needs no re-chaining: before the head had a keyed
        # tag, pointing it at the last record left (whose chain link is in the record)
        # passed verify with the key.
        path = tmp_path / "keyed"
        with Journal.open(path, key=b"secret") as journal:
            journal.append(make_events(20))

        _raw_edit(path, lambda txn, events, dbs: _cut_off_the_end(txn, events, dbs, 12))
        report = _verify(path, key=b"secret")

        assert not report.ok
        assert report.first_bad_seq == 12
        assert "without the key" in report.reason
        with Journal.open(path, key=b"secret") as journal, pytest.raises(JournalIntegrityError):
            journal.append(make_events(1))

    def test_an_unkeyed_journal_cut_short_consistently_is_not_detectable(self, closed_journal: Path) -> None:
        # what verify() documents: with no key anyone can make a head; anchor it elsewhere
        _raw_edit(closed_journal, lambda txn, events, dbs: _cut_off_the_end(txn, events, dbs, 12))

        assert _verify(closed_journal).ok

    def test_a_byte_changed_in_a_stored_value_is_reported_at_its_seq(self, closed_journal: Path) -> None:
        def flip(txn: Any, events: Any, _: Any) -> None:
            value = bytearray(txn.get(_seq(7), db=events))
            value[-3] ^= 0x01
            txn.put(_seq(7), bytes(value), db=events)

        _raw_edit(closed_journal, flip)
        report = _verify(closed_journal)

        assert not report.ok
        assert report.first_bad_seq == 7
        assert "hash chain" in report.reason
        assert report.head_seq == 20  # the last seq the journal holds, not the bad one

    def test_a_changed_chain_link_is_reported_at_its_seq(self, closed_journal: Path) -> None:
        def flip(txn: Any, events: Any, _: Any) -> None:
            value = bytearray(txn.get(_seq(3), db=events))
            value[0] ^= 0xFF
            txn.put(_seq(3), bytes(value), db=events)

        _raw_edit(closed_journal, flip)

        assert _verify(closed_journal).first_bad_seq == 3

    def test_a_deleted_record_is_reported(self, closed_journal: Path) -> None:
        _raw_edit(closed_journal, lambda txn, events, _: txn.delete(_seq(12), db=events))

        report = _verify(closed_journal)

        assert not report.ok
        assert report.first_bad_seq == 12
        assert "missing" in report.reason

    def test_reading_past_a_deleted_record_raises_naming_the_gap(self, closed_journal: Path) -> None:
        _raw_edit(closed_journal, lambda txn, events, _: txn.delete(_seq(12), db=events))

        with (
            Journal.open(closed_journal, readonly=True) as journal,
            pytest.raises(JournalRecordError) as info,
        ):
            list(journal.read())

        assert info.value.seq == 12

    def test_a_reordered_pair_is_reported(self, closed_journal: Path) -> None:
        def swap(txn: Any, events: Any, _: Any) -> None:
            five, six = txn.get(_seq(5), db=events), txn.get(_seq(6), db=events)
            txn.put(_seq(5), six, db=events)
            txn.put(_seq(6), five, db=events)

        _raw_edit(closed_journal, swap)

        assert _verify(closed_journal).first_bad_seq == 5

    def test_a_truncated_tail_is_reported_against_the_chain_head(self, closed_journal: Path) -> None:
        def truncate(txn: Any, events: Any, _: Any) -> None:
            for n in (19, 20):
                txn.delete(_seq(n), db=events)

        _raw_edit(closed_journal, truncate)
        report = _verify(closed_journal)

        assert not report.ok
        assert report.first_bad_seq == 19
        assert "removed" in report.reason

    def test_a_rolled_back_chain_head_is_reported(self, closed_journal: Path) -> None:
        def roll_back(txn: Any, events: Any, dbs: dict[bytes, Any]) -> None:
            chain = txn.get(_seq(10), db=events)[-16:]
            txn.put(b"head", head_value(_seq(10), chain, b""), db=dbs[b"meta"])

        _raw_edit(closed_journal, roll_back)
        report = _verify(closed_journal)

        assert not report.ok
        assert report.first_bad_seq == 11
        assert "rolled back" in report.reason

    @pytest.mark.parametrize("edit", ["records cut off", "head rolled back"])
    def test_a_writer_refuses_to_append_over_a_head_its_records_contradict(
        self, closed_journal: Path, edit: str
    ) -> None:
        with Journal.open(closed_journal, readonly=True) as journal:
            last_id = next(journal.read(after=19)).event.id

        def change(txn: Any, events: Any, dbs: dict[bytes, Any]) -> None:
            if edit == "records cut off":  # as an attacker would: the record and its id entry
                txn.delete(_seq(20), db=events)
                assert txn.delete(last_id.encode(), db=dbs[b"ids"])
            else:
                txn.put(
                    b"head", head_value(_seq(10), txn.get(_seq(10), db=events)[-16:], b""), db=dbs[b"meta"]
                )

        _raw_edit(closed_journal, change)
        data = (closed_journal / "data.mdb").read_bytes()

        with Journal.open(closed_journal) as journal:
            assert [r.seq for r in journal.read()][-1] == (19 if edit == "records cut off" else 20)
            assert isinstance(journal, LmdbJournal)
            assert journal.is_failed  # a writer of it goes fail-stop at once
            with pytest.raises(JournalIntegrityError, match="refuses appends: its chain head"):
                journal.append(make_events(1, start=100))
            with pytest.raises(JournalIntegrityError, match="refuses appends: its chain head"):
                journal.check_appendable()
        # a runtime could journal nothing on it: not waived by allow_unverified
        from cogfabric.actors import Runtime  # noqa: PLC0415 - the runtime's side of the same rule

        with pytest.raises(JournalIntegrityError, match="refuses appends: its chain head"):
            Runtime.open(closed_journal, allow_unverified=True)

        # the append would have overwritten the head, the one trace of the change
        assert (closed_journal / "data.mdb").read_bytes() == data
        assert not _verify(closed_journal).ok

    def test_a_last_seq_moved_to_the_end_of_the_seq_space_refuses_appends_by_type(
        self, closed_journal: Path
    ) -> None:
        # No writer gets near 2**64 - 1; a record moved there (and a head made for it,
        # which needs no key on an unkeyed journal) leaves no room for the next seq.
        top = 2**64 - 1

        def move(txn: Any, events: Any, dbs: dict[bytes, Any]) -> None:
            record = bytes(txn.get(_seq(20), db=events))
            txn.delete(_seq(20), db=events)
            txn.put(_seq(top), record, db=events)
            txn.put(b"head", head_value(_seq(top), record[-16:], b""), db=dbs[b"meta"])

        _raw_edit(closed_journal, move)
        data = (closed_journal / "data.mdb").read_bytes()

        with Journal.open(closed_journal) as journal:
            assert isinstance(journal, LmdbJournal)
            assert journal.last_seq == top
            with pytest.raises(JournalIntegrityError, match="no seq is left"):
                journal.append(make_events(1, start=100))
            assert not journal.is_failed  # refused before writing: nothing to stop for
        assert (closed_journal / "data.mdb").read_bytes() == data

    @pytest.mark.parametrize("name", [b"heads", b"ids", b"anchors", b"snapshots"])
    def test_a_removed_index_database_is_refused_not_re_created_empty(
        self, closed_journal: Path, name: bytes
    ) -> None:
        env = lmdb.open(str(closed_journal), max_dbs=8)
        with env.begin(write=True) as txn:
            txn.drop(env.open_db(name, txn=txn), delete=True)
        env.close()
        data = (closed_journal / "data.mdb").read_bytes()

        for readonly in (False, True):
            with pytest.raises(JournalIntegrityError, match=f"its {name.decode()} database is missing"):
                Journal.open(closed_journal, readonly=readonly)

        assert (closed_journal / "data.mdb").read_bytes() == data

    @pytest.mark.parametrize("value", [b"x", (99).to_bytes(8, "big") + bytes(16), (1).to_bytes(8, "big") * 3])
    def test_a_writer_refuses_to_link_a_record_onto_a_stream_head_that_names_no_record_of_it(
        self, closed_journal: Path, value: bytes
    ) -> None:
        # a wrong length, a seq past the records, a record of another stream (seq 1 is a0's)
        _raw_edit(closed_journal, lambda txn, _, dbs: txn.put(b"agent/a1", value, db=dbs[b"heads"]))

        with Journal.open(closed_journal) as journal:
            assert isinstance(journal, LmdbJournal)
            journal.append(make_events(1, start=0))  # a0's stream is untouched: it appends
            with pytest.raises(
                JournalIntegrityError, match="head of 'agent/a1' names no record of that stream"
            ):
                journal.append(make_events(1, start=1))  # a1's
            assert journal.is_failed
        assert not _verify(closed_journal).ok
        with Journal.open(closed_journal, readonly=True) as journal:
            assert [r.event.agent for r in journal.read(after=20)] == ["a0"]  # type: ignore[attr-defined]

    @pytest.mark.parametrize("key", [b"\x00", bytes(8), b"\x00" * 7])
    def test_a_key_sorted_before_seq_1_is_reported(self, closed_journal: Path, key: bytes) -> None:
        _raw_edit(closed_journal, lambda txn, events, _: txn.put(key, b"junk", db=events))

        report = _verify(closed_journal)

        assert not report.ok
        assert "a key before seq 1 that is no seq" in report.reason

    @pytest.mark.parametrize("key", [_seq(6) + b"\x00", _seq(6) + b"junk-after-it"])
    def test_a_key_that_is_no_seq_between_records_is_reported_at_the_record_after_it(
        self, closed_journal: Path, key: bytes
    ) -> None:
        # sorted between seq 6 and seq 7: a reader stops there, so verify must not pass it over
        _raw_edit(closed_journal, lambda txn, events, _: txn.put(key, b"junk", db=events))

        report = _verify(closed_journal)

        assert not report.ok
        assert report.first_bad_seq == 7
        assert report.checked == 6
        assert f"a key that is no seq, {key.hex()}, after record 6" in report.reason
        with Journal.open(closed_journal, readonly=True) as journal:
            assert [r.seq for r in journal.read(until=6)] == [1, 2, 3, 4, 5, 6]
            with pytest.raises(JournalRecordError, match=f"seq 7: a key that is no seq, {key.hex()}"):
                list(journal.read())

    @pytest.mark.parametrize(("stray_after", "first_bad"), [(15, 16), (10, 11)])
    def test_a_tail_check_reports_a_key_that_is_no_seq_in_its_tail(
        self, closed_journal: Path, stray_after: int, first_bad: int
    ) -> None:
        # right after the record the tail starts from, too: a read from there must not jump it
        _raw_edit(
            closed_journal, lambda txn, events, _: txn.put(_seq(stray_after) + b"\x00", b"junk", db=events)
        )

        with Journal.open(closed_journal, readonly=True) as journal:
            report = journal.verify(after=10)

        assert not report.ok
        assert report.first_bad_seq == first_bad
        assert f"no seq, {(_seq(stray_after) + bytes(1)).hex()}" in report.reason

    def test_a_key_that_is_no_seq_where_verify_reads_its_next_chunk_is_reported(self, tmp_path: Path) -> None:
        path = tmp_path / "journal"
        with Journal.open(path) as journal:
            journal.append(make_events(1500))
        _raw_edit(path, lambda txn, events, _: txn.put(_seq(1024) + b"\x00", b"junk", db=events))

        report = _verify(path)

        assert not report.ok
        assert report.first_bad_seq == 1025
        assert report.checked == 1024

    def test_a_removed_stream_head_is_reported(self, closed_journal: Path) -> None:
        _raw_edit(closed_journal, lambda txn, _, dbs: txn.delete(b"agent/a1", db=dbs[b"heads"]))

        report = _verify(closed_journal)

        assert not report.ok
        assert report.first_bad_seq == 20  # a1's last record: 2, 5, ..., 20
        assert "stream index" in report.reason

    def test_a_stream_head_naming_an_earlier_record_is_reported(self, closed_journal: Path) -> None:
        def rewind(txn: Any, _: Any, dbs: dict[bytes, Any]) -> None:
            txn.put(b"agent/a2", _seq(15) + (5).to_bytes(8, "big"), db=dbs[b"heads"])

        _raw_edit(closed_journal, rewind)
        report = _verify(closed_journal)

        assert not report.ok
        assert report.first_bad_seq == 18  # a2's real last record
        assert "head of 'agent/a2'" in report.reason

    @pytest.mark.parametrize("first", [6, 1, 99])  # a later a2 record, another stream's, none
    def test_a_stream_head_naming_another_first_record_is_reported_and_not_trusted(
        self, closed_journal: Path, first: int
    ) -> None:
        def refirst(txn: Any, _: Any, dbs: dict[bytes, Any]) -> None:
            txn.put(b"agent/a2", _seq(18) + (6).to_bytes(8, "big") + _seq(first), db=dbs[b"heads"])

        _raw_edit(closed_journal, refirst)
        report = _verify(closed_journal)
        with Journal.open(closed_journal, readonly=True) as journal:
            start = journal.stream_start("agent/a2")  # a2's records: 3, 6, ..., 18

        assert not report.ok
        assert report.first_bad_seq == 18
        assert "head of 'agent/a2'" in report.reason
        assert start == 3  # found by walking the back links instead

    @pytest.mark.parametrize("head", [15, 9])  # set back within the tail, and to before it
    def test_a_tail_check_reports_a_stream_head_set_back(self, closed_journal: Path, head: int) -> None:
        def rewind(txn: Any, _: Any, dbs: dict[bytes, Any]) -> None:
            txn.put(b"agent/a2", _seq(head) + (head // 3).to_bytes(8, "big") + _seq(3), db=dbs[b"heads"])

        _raw_edit(closed_journal, rewind)
        with Journal.open(closed_journal, readonly=True) as journal:
            report = journal.verify(after=10)  # a2's records: 3, 6, ..., 18

        assert not report.ok
        assert report.first_bad_seq == 18
        assert "head of 'agent/a2'" in report.reason

    def test_a_stream_head_for_a_stream_without_records_is_reported(self, closed_journal: Path) -> None:
        ghost = _seq(3) + _seq(1)
        _raw_edit(closed_journal, lambda txn, _, dbs: txn.put(b"agent/ghost", ghost, db=dbs[b"heads"]))

        report = _verify(closed_journal)

        assert not report.ok
        assert "'agent/ghost', which has no records" in report.reason

    def test_a_removed_or_moved_anchor_is_reported(self, tmp_path: Path) -> None:
        path = tmp_path / "journal"
        with Journal.open(path) as journal:
            journal.append(make_events(300, agents=2))  # a0: 1, 3, ...; its 64th record is 127
        _raw_edit(path, lambda txn, _, dbs: txn.delete(b"agent/a0\0" + _seq(127), db=dbs[b"anchors"]))

        report = _verify(path)

        assert not report.ok
        assert report.first_bad_seq == 127
        assert "stream index" in report.reason

        def move(txn: Any, _: Any, dbs: dict[bytes, Any]) -> None:
            txn.put(b"agent/a1\0" + _seq(127), b"", db=dbs[b"anchors"])

        _raw_edit(path, move)
        assert _verify(path).first_bad_seq == 127

    def test_an_anchor_given_a_value_is_reported(self, tmp_path: Path) -> None:
        # No reader uses an anchor's value (always empty), but it is a stored byte:
        # changing it must not pass verify as an untouched journal.
        path = tmp_path / "journal"
        with Journal.open(path) as journal:
            journal.append(make_events(300, agents=2))  # a0's 64th record is 127
        _raw_edit(path, lambda txn, _, dbs: txn.put(b"agent/a0\0" + _seq(127), b"x", db=dbs[b"anchors"]))

        report = _verify(path)

        assert not report.ok
        assert report.first_bad_seq == 127
        assert "stream index holds an anchor with a value" in report.reason

        # With other damage to the index, the lowest seq is named, whichever kind it is.
        _raw_edit(path, lambda txn, _, dbs: txn.delete(b"agent/a1\0" + _seq(128), db=dbs[b"anchors"]))
        _raw_edit(path, lambda txn, _, dbs: txn.put(b"agent/a0\0" + _seq(255), b"x", db=dbs[b"anchors"]))
        assert _verify(path).first_bad_seq == 127
        _raw_edit(path, lambda txn, _, dbs: txn.put(b"agent/a0\0" + _seq(127), b"", db=dbs[b"anchors"]))
        report = _verify(path)
        assert (report.first_bad_seq, report.reason) == (128, "the stream index does not match the records")

    @pytest.mark.parametrize("value", [b"", b"x"])
    def test_an_anchor_past_the_last_record_names_no_seq(self, tmp_path: Path, value: bytes) -> None:
        # an index entry past the journal's end names no seq (first_bad_seq <= head_seq)
        path = tmp_path / "journal"
        with Journal.open(path) as journal:
            journal.append(make_events(300, agents=2))
        _raw_edit(path, lambda txn, _, dbs: txn.put(b"agent/a0\0" + _seq(5000), value, db=dbs[b"anchors"]))

        report = _verify(path)

        assert (report.ok, report.first_bad_seq, report.head_seq) == (False, None, 300)
        assert "stream index" in report.reason

    def test_a_stale_index_entry_met_by_an_append_during_verify_names_no_seq_past_the_check(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # an anchor of another stream at seq 301, then a record 301 appended between the
        # scan of the records and the check of the indexes: the report stays within head_seq
        path = tmp_path / "journal"
        with Journal.open(path) as journal:
            journal.append(make_events(300, agents=2))
        _raw_edit(path, lambda txn, _, dbs: txn.put(b"agent/zz\0" + _seq(301), b"", db=dbs[b"anchors"]))
        real = verify_module._verify_indexes

        with Journal.open(path) as journal:

            def append_meanwhile(*args: Any) -> Any:
                journal.append(make_events(1))
                return real(*args)

            monkeypatch.setattr(verify_module, "_verify_indexes", append_meanwhile)
            report = journal.verify()

        assert (report.ok, report.first_bad_seq, report.head_seq) == (False, None, 300)
        assert "stream index" in report.reason

    def test_a_stream_read_refuses_a_link_that_does_not_point_back(self, closed_journal: Path) -> None:
        def loop(txn: Any, events: Any, _: dict[bytes, Any]) -> None:
            value = bytearray(txn.get(_seq(8), db=events))  # a1's third record, linked to 5
            value[-24:-16] = _seq(8)  # the trailer ends: stream link(8) | chain(16)
            txn.put(_seq(8), bytes(value), db=events)

        _raw_edit(closed_journal, loop)

        with Journal.open(closed_journal, readonly=True) as journal:
            with pytest.raises(JournalRecordError, match=r"seq 8: the record's stream link does not"):
                list(journal.read(stream="agent/a1"))
            report = journal.verify()
        assert report.first_bad_seq == 8

    def test_a_changed_id_index_is_reported(self, closed_journal: Path) -> None:
        def repoint(txn: Any, _: Any, dbs: dict[bytes, Any]) -> None:
            key, _value = next(iter(txn.cursor(db=dbs[b"ids"])))
            txn.put(key, _seq(99), db=dbs[b"ids"])

        _raw_edit(closed_journal, repoint)
        report = _verify(closed_journal)

        assert not report.ok
        assert "id index" in report.reason

    def test_a_repointed_or_removed_id_entry_is_reported_at_its_seq(self, closed_journal: Path) -> None:
        with Journal.open(closed_journal, readonly=True) as journal:
            ids = {r.seq: r.event.id.encode() for r in journal.read()}
        repointed, removed = closed_journal.parent / "repointed", closed_journal.parent / "removed"
        shutil.copytree(closed_journal, repointed)
        shutil.copytree(closed_journal, removed)
        _raw_edit(repointed, lambda txn, _, dbs: txn.put(ids[5], _seq(7), db=dbs[b"ids"]))
        _raw_edit(removed, lambda txn, _, dbs: txn.delete(ids[12], db=dbs[b"ids"]))

        assert (_verify(repointed).first_bad_seq, _verify(removed).first_bad_seq) == (5, 12)

    def test_a_changed_snapshot_is_reported_and_refused_on_load(self, closed_journal: Path) -> None:
        def forge(txn: Any, _: Any, dbs: dict[bytes, Any]) -> None:
            value = txn.get(b"agent/a0", db=dbs[b"snapshots"])
            txn.put(b"agent/a0", value[:-1] + b"X", db=dbs[b"snapshots"])

        _raw_edit(closed_journal, forge)
        report = _verify(closed_journal)

        assert not report.ok
        assert report.first_bad_seq == 9
        assert "snapshot" in report.reason
        with (
            Journal.open(closed_journal, readonly=True) as journal,
            pytest.raises(JournalRecordError) as info,
        ):
            journal.load_snapshot("agent/a0")
        assert info.value.seq == 9

    def test_a_snapshot_whose_seq_was_changed_past_the_head_names_no_seq(self, closed_journal: Path) -> None:
        def forge(txn: Any, _: Any, dbs: dict[bytes, Any]) -> None:
            value = txn.get(b"agent/a0", db=dbs[b"snapshots"])
            txn.put(b"agent/a0", value[:16] + _seq(65686) + value[24:], db=dbs[b"snapshots"])

        _raw_edit(closed_journal, forge)
        report = _verify(closed_journal)

        assert (report.ok, report.first_bad_seq) == (False, None)
        assert "the snapshot of 'agent/a0' does not match its hash" in report.reason

    def test_a_keyed_chain_rejects_a_journal_rechained_without_the_key(self, tmp_path: Path) -> None:
        path = tmp_path / "keyed"
        with Journal.open(path, key=b"secret") as journal:
            journal.append(make_events(5))

        def rechain(txn: Any, events: Any, dbs: dict[bytes, Any]) -> None:
            prev = bytes(16)
            for n in range(1, 6):
                body = bytearray(txn.get(_seq(n), db=events)[:-16])  # the chain link is last
                if n == 3:
                    body[len(body) // 2] ^= 0x01
                prev = hashlib.blake2b(prev + bytes(body), digest_size=16).digest()
                txn.put(_seq(n), bytes(body) + prev, db=events)
            txn.put(b"head", head_value(_seq(5), prev, b""), db=dbs[b"meta"])

        _raw_edit(path, rechain)
        report = _verify(path, key=b"secret")

        assert not report.ok
        assert report.first_bad_seq == 1

    def test_the_wrong_key_or_a_missing_key_is_refused_at_open(self, tmp_path: Path) -> None:
        path = tmp_path / "keyed"
        with Journal.open(path, key="secret") as journal:
            journal.append(make_events(1))

        with pytest.raises(JournalKeyError, match="with a chain key"):
            Journal.open(path)
        with pytest.raises(JournalKeyError, match="different"):
            Journal.open(path, readonly=True, key="other")
        with Journal.open(path, key="secret") as journal:
            assert journal.verify().ok

    def test_a_key_is_refused_for_a_journal_written_without_one(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path / "j") as journal:
            journal.append(make_events(1))

        with pytest.raises(JournalKeyError, match="without a chain key"):
            Journal.open(tmp_path / "j", key="k")


class _FutureSet(AgentEvent, frozen=True, kw_only=True, tag="PrivateSet"):
    """A PrivateSet as a newer version of cogfabric would write it."""

    v: int = 2
    key: str
    value: Any = None
    origin: str = "future"


class _Renamed(AgentEvent, frozen=True, kw_only=True, tag="Renamed"):
    """An event type at version 2, whose field ``val`` was renamed ``value``."""

    v: int = 2
    value: str


class _RenamedV1(AgentEvent, frozen=True, kw_only=True, tag="Renamed"):
    """The same type as version 1 wrote it."""

    val: str


class _Alien(AgentEvent, frozen=True, kw_only=True):
    """An event type this code has never heard of."""

    what: str


class TestRecordIntact:
    def test_a_changed_record_is_not_intact_and_its_neighbours_are(self, closed_journal: Path) -> None:
        def flip(txn: Any, events: Any, _: Any) -> None:
            value = bytearray(txn.get(_seq(7), db=events))
            value[len(value) // 2] ^= 0x01  # a byte of the event
            txn.put(_seq(7), bytes(value), db=events)

        _raw_edit(closed_journal, flip)

        with Journal.open(closed_journal, readonly=True) as journal:
            assert [journal.record_intact(seq) for seq in (6, 7, 8)] == [True, False, True]

    def test_a_keyed_journal_checks_with_its_key(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path / "j", key="k") as journal:
            journal.append(make_events(3))
            assert all(journal.record_intact(seq) for seq in (1, 2, 3))


class TestSeqOf:
    def test_it_finds_a_stored_event_by_its_id(self, tmp_path: Path) -> None:
        events = make_events(5)
        with Journal.open(tmp_path / "j") as journal:
            journal.append(events)
            assert isinstance(journal, LmdbJournal)
            assert [journal.seq_of(e.id) for e in events] == [1, 2, 3, 4, 5]
            assert journal.seq_of("no such id") is None
            assert journal.seq_of("") is None
            assert journal.seq_of("x" * 256) is None  # longer than any stored id
            assert journal.seq_of("\udc80") is None
            with pytest.raises(TypeError):
                journal.seq_of(5)  # type: ignore[arg-type]


class TestSchemaVersionsOnRead:
    def test_a_record_of_a_newer_schema_version_is_refused_by_name(self, tmp_path: Path) -> None:
        path = tmp_path / "j"
        with LmdbJournal.open(path, codec=EventCodec([_FutureSet])) as journal:
            journal.append([_FutureSet(at=0.0, agent="a", key="k")])

        with Journal.open(path, readonly=True) as journal:
            with pytest.raises(
                JournalRecordError, match=r"'PrivateSet' is at version 2.*known version 1"
            ) as info:
                list(journal.read())
            report = journal.verify(decode=True)

        assert info.value.seq == 1
        assert isinstance(info.value, EventVersionError)  # the event layer's type, too
        assert (info.value.type_name, info.value.stored, info.value.known) == ("PrivateSet", 2, 1)
        assert report.first_bad_seq == 1
        assert "version 2" in report.reason

    def test_a_stored_cognitive_state_of_a_newer_schema_version_is_refused_naming_its_seq(
        self, tmp_path: Path
    ) -> None:
        # stored by a writer that skipped the read-back check (or an older one that had none)
        path = tmp_path / "j"
        with Journal.open(path) as journal:
            journal.append(make_events(1))
            future = CognitiveStateSet(at=1.0, agent="a", state=CognitiveState(schema_version=99))
            journal.append([future], validate=False)

        with Journal.open(path, readonly=True) as journal:
            newer = r"CognitiveStateSet\.state .* version 99"
            with pytest.raises(JournalRecordVersionError, match=newer) as info:
                list(journal.read())
            report = journal.verify(decode=True)

        assert info.value.seq == 2
        assert (info.value.stored, info.value.known) == (99, 1)
        assert (report.ok, report.first_bad_seq) == (False, 2)

    @pytest.mark.parametrize("version", [True, 1.0], ids=["bool", "float"])
    def test_an_event_whose_version_is_no_int_is_refused_even_unvalidated(
        self, tmp_path: Path, version: object
    ) -> None:
        # True and 1.0 equal 1, but no reader decodes them as a version: stored, the
        # record would stop every replay at its seq
        odd = PrivateSet(at=1.0, agent="a", key="k", value=1, v=version)  # type: ignore[arg-type]
        with Journal.open(tmp_path / "j") as journal:
            journal.append(make_events(1))
            with pytest.raises(TypeError, match="must be an int"):
                journal.append([odd], validate=False)
            assert journal.last_seq == 1
            assert journal.verify(decode=True).ok

    def test_a_record_of_an_unknown_type_is_refused_by_name(self, tmp_path: Path) -> None:
        path = tmp_path / "j"
        with LmdbJournal.open(path, codec=EventCodec([_Alien, PrivateSet])) as journal:
            journal.append([*make_events(2), _Alien(at=0.0, agent="a", what="?")])

        with Journal.open(path, readonly=True) as journal:
            records = journal.read()
            assert [next(records).seq, next(records).seq] == [1, 2]
            with pytest.raises(JournalRecordError, match="unknown event type '_Alien'") as info:
                next(records)

        assert info.value.seq == 3
        assert isinstance(info.value, UnknownEventTypeError)
        assert info.value.type_name == "_Alien"

    def test_an_upcaster_is_applied_on_read(self, tmp_path: Path) -> None:
        path = tmp_path / "j"
        with LmdbJournal.open(path, codec=EventCodec([_RenamedV1])) as journal:
            journal.append([_RenamedV1(at=0.0, agent="a", val="old")])

        def rename(raw: dict[str, Any]) -> dict[str, Any]:
            raw["value"] = raw.pop("val")
            return raw

        codec = EventCodec([_Renamed], upcasters={("Renamed", 1): rename})
        with LmdbJournal.open(path, readonly=True, codec=codec) as journal:
            (record,) = list(journal.read())

        assert isinstance(record.event, _Renamed)
        assert record.event.value == "old"
        assert record.event.v == 2


class TestAppendRefusesWhatItCouldNotReadBack:
    """msgspec checks ``v`` and the type only on decode: append checks them, so replay never fails on them."""

    def test_an_event_at_a_newer_version_is_refused_and_nothing_is_stored(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path / "j") as journal:
            journal.append(make_events(1))
            future = PrivateSet(at=0.0, agent="a", key="k", v=2)

            with pytest.raises(EventVersionError, match=r"'PrivateSet' is at version 2.*version 1") as info:
                journal.append([*make_events(2), future])

            assert (info.value.type_name, info.value.stored, info.value.known) == ("PrivateSet", 2, 1)
            assert journal.last_seq == 1  # the whole batch was refused, and the journal goes on
            assert journal.append(make_events(1)) == [2]
            assert [r.seq for r in journal.read()] == [1, 2]

    def test_an_event_at_an_older_version_is_refused(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path / "j") as journal, pytest.raises(EventVersionError, match="version 0"):
            journal.append([PrivateSet(at=0.0, agent="a", key="k", v=0)])

    def test_an_event_type_the_codec_does_not_know_is_refused_by_name(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path / "j") as journal:
            with pytest.raises(UnknownEventTypeError, match="'_Alien'"):
                journal.append([_Alien(at=0.0, agent="a", what="?")])
            assert journal.last_seq == 0

    def test_a_codec_with_an_upcaster_stores_its_current_version_only(self, tmp_path: Path) -> None:
        class RenamedToo(AgentEvent, frozen=True, kw_only=True, tag="Renamed"):
            v: int = 2
            value: str

        codec = EventCodec([_Renamed], upcasters={("Renamed", 1): lambda raw: raw})
        with LmdbJournal.open(tmp_path / "j", codec=codec) as journal:
            assert journal.append([_Renamed(at=0.0, agent="a", value="new")]) == [1]
            with pytest.raises(EventVersionError, match="'Renamed' is at version 1"):
                journal.append([_RenamedV1(at=0.0, agent="a", val="old")])  # read only through the upcaster
            with pytest.raises(TypeError, match="RenamedToo is not the class this codec decodes 'Renamed'"):
                journal.append([RenamedToo(at=0.0, agent="a", value="x")])
            assert journal.last_seq == 1

    def test_something_that_is_not_an_event_is_a_type_error(self, tmp_path: Path) -> None:
        with Journal.open(tmp_path / "j") as journal:
            with pytest.raises(TypeError, match="only events can be stored, not dict"):
                journal.append([*make_events(1), {"type": "PrivateSet"}])  # type: ignore[list-item]
            assert journal.last_seq == 0


def _read_within(fd: int, size: int, timeout: float = 30.0) -> bytes:
    """``os.read(fd, size)`` of what a forked child writes, failing the test if it says nothing in time."""
    ready, _, _ = select.select([fd], [], [], timeout)
    assert ready, f"the child wrote nothing within {timeout} s"
    return os.read(fd, size)


def _reap(pid: int, timeout: float = 30.0) -> int:
    """Wait for a forked child's end, killing it (and failing) past ``timeout``; its wait status."""
    pidfd = os.pidfd_open(pid)
    try:
        ended, _, _ = select.select([pidfd], [], [], timeout)
        if not ended:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(pidfd)
    assert ended, f"the child did not end within {timeout} s"
    return status


@contextlib.contextmanager
def _idle_child() -> Iterator[None]:
    """Fork a child that does other work (never a journal) until the block ends.

    The block begins once the child runs: its at-fork hooks have run by then.
    """
    hold_r, hold_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(hold_w)
        os.write(ready_w, b"r")
        os.read(hold_r, 1)  # end of file once the parent closes its end
        os._exit(0)
    os.close(hold_r)
    os.close(ready_w)
    try:
        assert _read_within(ready_r, 1) == b"r"
        yield
    finally:
        os.close(hold_w)
        os.close(ready_r)
        _reap(pid)


class TestFilesAndFormat:
    def test_journal_files_are_owner_only(self, tmp_path: Path) -> None:
        path = tmp_path / "j"
        with Journal.open(path) as journal:
            journal.append(make_events(1))

        assert stat.S_IMODE(path.stat().st_mode) == 0o700
        for name in ("data.mdb", "lock.mdb", "writer.lock"):
            assert stat.S_IMODE((path / name).stat().st_mode) == 0o600

    def test_a_journal_of_a_newer_format_is_refused(self, closed_journal: Path) -> None:
        _raw_edit(
            closed_journal,
            lambda txn, _, dbs: txn.put(b"format", (FORMAT_VERSION + 1).to_bytes(4, "big"), db=dbs[b"meta"]),
        )

        with pytest.raises(JournalFormatError, match=f"format version {FORMAT_VERSION + 1}"):
            Journal.open(closed_journal, readonly=True)
        with pytest.raises(JournalFormatError, match="newer"):
            Journal.open(closed_journal)

    def test_a_journal_of_an_older_format_is_refused_and_left_unchanged(self, closed_journal: Path) -> None:
        _raw_edit(
            closed_journal,
            lambda txn, _, dbs: txn.put(b"format", (FORMAT_VERSION - 1).to_bytes(4, "big"), db=dbs[b"meta"]),
        )
        before = (closed_journal / "data.mdb").read_bytes()

        with pytest.raises(JournalFormatError, match=f"format version {FORMAT_VERSION - 1}, older"):
            Journal.open(closed_journal)

        assert (closed_journal / "data.mdb").read_bytes() == before

    def test_a_header_naming_another_hash_is_refused_as_changed(self, closed_journal: Path) -> None:
        # the chain does not cover the header's labels; the one that names the hash is checked instead
        _raw_edit(closed_journal, lambda txn, _, dbs: txn.put(b"hash", b"sha1", db=dbs[b"meta"]))

        with pytest.raises(JournalHeaderError, match="hash 'sha1', not this format's 'blake2b-128'") as info:
            Journal.open(closed_journal, readonly=True)
        with pytest.raises(JournalHeaderError, match="header changed"):
            Journal.open(closed_journal)

        assert isinstance(info.value, JournalIntegrityError)  # tampering, not a user's mistake

    @pytest.mark.parametrize("stored", [b"5", b"\x00\x00\x05", bytes(7) + b"\x05", b""])
    def test_a_format_of_other_than_four_bytes_is_refused_as_a_changed_header(
        self, closed_journal: Path, stored: bytes
    ) -> None:
        # b"5" read as version 53 told the user to upgrade; 3 or 8 bytes holding 5 opened as format 5
        _raw_edit(closed_journal, lambda txn, _, dbs: txn.put(b"format", stored, db=dbs[b"meta"]))
        before = (closed_journal / "data.mdb").read_bytes()

        with pytest.raises(JournalHeaderError, match=f"holds a format of {len(stored)} bytes .*changed"):
            Journal.open(closed_journal, readonly=True)
        with pytest.raises(JournalHeaderError, match="not 4: header changed"):
            Journal.open(closed_journal)

        assert (closed_journal / "data.mdb").read_bytes() == before

    def test_an_lmdb_database_that_is_not_a_journal_is_refused(self, tmp_path: Path) -> None:
        env = lmdb.open(str(tmp_path / "other"))
        with env.begin(write=True) as txn:
            txn.put(b"hello", b"world")
        env.close()

        with pytest.raises(JournalFormatError, match="not a cogfabric journal"):
            Journal.open(tmp_path / "other")
        with pytest.raises(JournalFormatError, match="not a cogfabric journal"):
            Journal.open(tmp_path / "other", readonly=True)

    @pytest.mark.parametrize("name", [b"meta", b"events"])
    def test_an_lmdb_file_whose_plain_key_has_a_journal_database_name_is_refused(
        self, tmp_path: Path, name: bytes
    ) -> None:
        # LMDB cannot open a database whose name is a plain key (MDB_INCOMPATIBLE)
        env = lmdb.open(str(tmp_path / "other"))
        with env.begin(write=True) as txn:
            txn.put(name, b"not a database")
        env.close()
        data = (tmp_path / "other" / "data.mdb").read_bytes()

        for readonly in (False, True):
            with pytest.raises(JournalFormatError, match="not a cogfabric journal"):
                Journal.open(tmp_path / "other", readonly=readonly)
        assert (tmp_path / "other" / "data.mdb").read_bytes() == data

    def test_databases_left_empty_by_a_crash_before_the_header_are_taken_over(self, tmp_path: Path) -> None:
        # what an older version left when killed between creating its databases one by
        # one and writing the header; a journal is now created in one transaction
        env = lmdb.open(str(tmp_path / "j"), max_dbs=8)
        for name in (b"events", b"heads"):
            env.open_db(name, create=True)
        env.close()

        with Journal.open(tmp_path / "j") as journal:
            assert journal.append(make_events(2)) == [1, 2]
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            assert journal.verify(decode=True).ok

    def test_a_database_of_the_journals_name_holding_data_is_not_taken_over(self, tmp_path: Path) -> None:
        env = lmdb.open(str(tmp_path / "j"), max_dbs=8)
        with env.begin(write=True, db=env.open_db(b"events", create=True)) as txn:
            txn.put(b"k", b"v")
        env.close()
        data = (tmp_path / "j" / "data.mdb").read_bytes()

        with pytest.raises(JournalFormatError, match="not a cogfabric journal"):
            Journal.open(tmp_path / "j")

        assert (tmp_path / "j" / "data.mdb").read_bytes() == data

    def test_opening_a_missing_journal_read_only_raises_not_found(self, tmp_path: Path) -> None:
        with pytest.raises(JournalNotFoundError):
            Journal.open(tmp_path / "nothing", readonly=True)

        assert not (tmp_path / "nothing").exists()

    def test_an_lmdb_file_nothing_was_committed_to_is_no_journal_read_only_and_a_new_one_for_writing(
        self, tmp_path: Path
    ) -> None:
        # What a creation that failed leaves (a map too small for the databases)
        with pytest.raises(JournalFullError, match="cannot hold a new journal"):
            Journal.open(tmp_path / "j", max_map_size=16384)

        with pytest.raises(JournalNotFoundError, match="nothing was ever committed"):
            Journal.open(tmp_path / "j", readonly=True)
        with Journal.open(tmp_path / "j") as journal:
            assert journal.append(make_events(2)) == [1, 2]
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            assert journal.last_seq == 2

    def test_a_file_where_the_journal_directory_should_be_is_refused_by_type(self, tmp_path: Path) -> None:
        plain = tmp_path / "plain"
        plain.write_bytes(b"not a journal")

        with pytest.raises(JournalFormatError, match="a journal is a directory"):
            Journal.open(plain)
        with pytest.raises(JournalNotFoundError):
            Journal.open(plain, readonly=True)
        with pytest.raises(JournalUnavailableError, match="cannot create the journal directory"):
            Journal.open(plain / "inside")

        assert plain.read_bytes() == b"not a journal"

    def test_a_damaged_lmdb_page_is_a_journal_damaged_error_naming_the_path(
        self, tmp_path: Path, damage_page: Callable[[Path, bytes], None]
    ) -> None:
        path = tmp_path / "j"
        with Journal.open(path) as journal:
            journal.append(make_events(40))
            link = next(r.chain for r in journal.read() if r.seq == 20)
        damage_page(path, link)  # the leaf page that holds seq 20

        def read_everything() -> None:
            with Journal.open(path, readonly=True) as journal:
                list(journal.read())
                journal.verify()

        with pytest.raises(JournalDamagedError, match=f"{path} is damaged") as info:
            read_everything()

        assert isinstance(info.value, JournalIntegrityError)  # Runtime.open refuses it as such

    def test_a_read_only_journal_refuses_appends_and_never_changes_its_data_file(
        self, closed_journal: Path
    ) -> None:
        before = hashlib.sha256((closed_journal / "data.mdb").read_bytes()).hexdigest()

        with Journal.open(closed_journal, readonly=True) as journal:
            assert journal.readonly
            assert sum(1 for _ in journal.read()) == 20
            assert journal.verify(decode=True).ok
            with pytest.raises(JournalReadOnlyError):
                journal.append(make_events(1, start=20))

        assert hashlib.sha256((closed_journal / "data.mdb").read_bytes()).hexdigest() == before

    def test_a_second_writer_in_the_same_process_is_refused_saying_so(self, tmp_path: Path) -> None:
        # "held by another writer" sent the user looking for another process
        with (
            Journal.open(tmp_path / "j"),
            pytest.raises(JournalLockedError, match="open for writing in this process"),
        ):
            Journal.open(tmp_path / "j")

    def test_a_journal_another_process_holds_is_not_said_to_be_open_in_this_one(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # a thread of this process opening it too (its lock noted, not yet taken) made
        # the refusal blame this process while another one held the journal
        Journal.open(tmp_path / "j").close()
        hold = "import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
        hold += "print('locked', flush=True)\nsys.stdin.read()\n"
        holder = subprocess.Popen(
            [sys.executable, "-c", hold, str(tmp_path / "j" / "writer.lock")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        assert holder.stdin is not None
        assert holder.stdout is not None
        real_flock = fcntl.flock
        paused, go_on = threading.Event(), threading.Event()
        failures: list[BaseException] = []

        def flock(fd: int, operation: int) -> None:
            if threading.current_thread().name == "first":
                paused.set()  # its lock is noted in this process, not yet taken
                assert go_on.wait(10)
            real_flock(fd, operation)

        def first() -> None:
            try:
                Journal.open(tmp_path / "j").close()
            except JournalLockedError as exc:
                failures.append(exc)

        try:
            assert holder.stdout.readline().strip() == "locked"
            monkeypatch.setattr(fcntl, "flock", flock)
            opener = threading.Thread(target=first, name="first")
            opener.start()
            assert paused.wait(10)
            try:
                with pytest.raises(JournalLockedError, match="held by another writer"):
                    Journal.open(tmp_path / "j")
            finally:
                go_on.set()
                opener.join(10)
        finally:
            holder.stdin.close()
            holder.wait(10)
            holder.stdout.close()
        assert [str(exc) for exc in failures] == [f"{tmp_path / 'j'} is held by another writer"]

    def test_a_forked_child_keeps_no_writer_lock_after_the_parent_closes(self, tmp_path: Path) -> None:
        journal = Journal.open(tmp_path / "j")
        journal.append(make_events(1))
        with _idle_child():
            journal.close()
            with Journal.open(tmp_path / "j") as reopened:  # the child still lives
                assert reopened.last_seq == 1

    def test_a_fork_while_another_thread_opens_a_journal_leaves_the_child_no_lock(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        Journal.open(tmp_path / "j").close()
        walk = _lmdb._walk_pages
        walking, go_on = threading.Event(), threading.Event()

        def slow_walk(*args: Any) -> None:  # a large journal's walk of its pages takes seconds
            walking.set()
            assert go_on.wait(10)
            walk(*args)

        monkeypatch.setattr(_lmdb, "_walk_pages", slow_walk)
        opened: list[Journal] = []
        opener = threading.Thread(target=lambda: opened.append(Journal.open(tmp_path / "j")))
        opener.start()
        assert walking.wait(10)  # the writer lock is taken, the journal not yet made
        try:
            with _idle_child():
                go_on.set()
                opener.join(10)
                opened[0].close()
                with Journal.open(tmp_path / "j"):  # the child still lives
                    pass
        finally:
            go_on.set()

    def test_a_directory_whose_name_is_not_utf8_holds_a_journal(self, tmp_path: Path) -> None:
        where = tmp_path / os.fsdecode(b"\xffdir")  # any name the file system holds
        with Journal.open(where) as journal:
            journal.append(make_events(2))
        with Journal.open(where, readonly=True) as journal:
            assert journal.last_seq == 2
            assert journal.verify().ok

    def test_a_journal_collected_unclosed_lets_go_of_its_writer_lock(self, tmp_path: Path) -> None:
        journal = Journal.open(tmp_path / "j")
        journal.append(make_events(1))
        del journal
        gc.collect()

        with Journal.open(tmp_path / "j") as reopened:
            assert reopened.last_seq == 1

    def test_a_journal_whose_data_file_this_user_cannot_write_says_so(
        self, closed_journal: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        real_access = os.access

        def access(where: object, mode: int, **kwargs: object) -> bool:
            if str(where).endswith("data.mdb") and mode == os.W_OK:
                return False  # another user's 0600 file (tests run as root, who may write anything)
            return real_access(where, mode, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "access", access)
        advice = r"\(to read it, open it readonly, or run an audit command: cogfabric verify"
        with pytest.raises(JournalUnavailableError, match=r"its data\.mdb is not writable " + advice):
            Journal.open(closed_journal)  # LMDB's own word was "read-only", as if asked for
        with Journal.open(closed_journal, readonly=True) as journal:
            assert journal.last_seq == 20

    def test_a_second_writer_process_is_refused(self, tmp_path: Path) -> None:
        code = textwrap.dedent(
            """
            import sys
            from cogfabric.store import Journal, JournalLockedError
            try:
                Journal.open(sys.argv[1])
            except JournalLockedError as exc:
                print("locked:", exc)
            """
        )
        with Journal.open(tmp_path / "j"):
            out = subprocess.run(
                [sys.executable, "-c", code, str(tmp_path / "j")],
                capture_output=True,
                text=True,
                encoding="utf-8",
                timeout=60,
                check=True,
            )

        holder = f"process {os.getpid()}, as its writer.lock says"
        assert out.stdout.strip() == f"locked: {tmp_path / 'j'} is held by another writer ({holder})"

    def test_reopen_after_close_keeps_everything(self, tmp_path: Path) -> None:
        events = make_events(100)
        with Journal.open(tmp_path / "j") as journal:
            journal.append(events[:60])
        with Journal.open(tmp_path / "j") as journal:
            journal.append(events[60:])
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            assert [r.event for r in journal.read()] == events
            assert journal.verify(decode=True).ok

    @pytest.mark.parametrize(
        ("raised", "expected"),
        [
            (lmdb.ReadonlyError("ro"), JournalReadOnlyError),
            (lmdb.Error("x is already open in this process"), JournalLockedError),
            (lmdb.InvalidError("bad file"), JournalFormatError),
            (lmdb.VersionMismatchError("old"), JournalFormatError),
            (lmdb.DiskError("io"), JournalUnavailableError),
            (lmdb.Error("anything else"), JournalUnavailableError),
        ],
    )
    def test_lmdb_errors_are_translated_in_one_place(
        self, tmp_path: Path, raised: lmdb.Error, expected: type[Exception]
    ) -> None:
        with pytest.raises(expected) as info, _translated(tmp_path):
            raise raised

        assert info.value.__cause__ is raised


class TestShortDataFile:
    """A data file shorter than its header names never makes LMDB read past its end (a SIGBUS)."""

    OPEN = textwrap.dedent(
        """
        import sys
        from cogfabric.store import Journal
        try:
            with Journal.open(sys.argv[1], readonly=sys.argv[2] == "ro") as journal:
                report = journal.verify()
                print("verified", report.ok, report.checked)
        except Exception as exc:
            print(type(exc).__name__, exc)
        """
    )

    def _open(self, path: Path, mode: str) -> str:
        done = subprocess.run(  # a child: were the check missing, LMDB would kill it, not the tests
            [sys.executable, "-c", self.OPEN, str(path), mode],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, (done.returncode, done.stderr)
        return done.stdout.strip()

    @staticmethod
    def _journal(path: Path) -> None:
        with Journal.open(path) as journal:
            for start in range(0, 3000, 500):
                journal.append(make_events(500, start=start, value="v" * 200))

    @pytest.mark.parametrize("mode", ["ro", "rw"])
    def test_a_truncated_data_file_is_reported_damaged_not_a_crash(self, tmp_path: Path, mode: str) -> None:
        path = tmp_path / "j"
        self._journal(path)
        data = path / "data.mdb"
        whole = data.read_bytes()
        data.write_bytes(whole[: len(whole) // 2])
        before = hashlib.sha256(data.read_bytes()).hexdigest()

        outcome = self._open(path, mode)

        assert outcome.startswith("JournalDamagedError"), outcome
        assert "short of what its header names" in outcome
        assert "(it was truncated)" in outcome
        # never changed: a writable open padded it before its walk refused the zeroed
        # pages, and every later audit saw zeroed pages, not the cut
        assert hashlib.sha256(data.read_bytes()).hexdigest() == before

    def test_pages_freed_before_they_were_written_leave_a_healthy_short_file(self, tmp_path: Path) -> None:
        path = tmp_path / "j"
        self._journal(path)
        env = lmdb.open(str(path), max_dbs=8)  # as LMDB may leave it: a value put and deleted in one txn
        scratch = env.open_db(b"scratch")
        with env.begin(write=True, db=scratch) as txn:
            txn.put(b"big", b"x" * 500_000)
            txn.delete(b"big")
        env.close()
        assert _short_by(path, readonly=True)[1] > 0  # shorter than its header names, and healthy

        before = hashlib.sha256((path / "data.mdb").read_bytes()).hexdigest()
        read = self._open(path, "ro")  # the walk of its pages proves the pages past its end free
        audit = subprocess.run(
            [sys.executable, "-m", "cogfabric", "verify", str(path)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=120,
            check=False,
        )
        unchanged = hashlib.sha256((path / "data.mdb").read_bytes()).hexdigest() == before
        assert (audit.returncode, audit.stdout.startswith("ok: 3000 records verified")) == (0, True), (
            audit.stderr
        )
        padded = self._open(path, "rw")  # writing pads it with pages that are free

        assert (read, unchanged) == ("verified True 3000", True)
        assert padded == "verified True 3000"
        assert _short_by(path, readonly=True)[1] == 0
        assert self._open(path, "ro") == "verified True 3000"

    @pytest.mark.parametrize(
        ("meta_key", "meta_value", "key", "error"),
        [
            (b"format", (6).to_bytes(4, "big"), None, JournalFormatError),  # a newer format
            (b"format", (4).to_bytes(4, "big"), None, JournalFormatError),  # an older one
            (None, b"", b"k" * 16, JournalKeyError),  # written without a key, opened with one
        ],
    )
    def test_a_refused_writable_open_leaves_a_short_file_unpadded(
        self,
        tmp_path: Path,
        meta_key: bytes | None,
        meta_value: bytes,
        key: bytes | None,
        error: type[Exception],
    ) -> None:
        path = tmp_path / "j"
        self._journal(path)
        env = lmdb.open(str(path), max_dbs=8)
        if meta_key is not None:
            with env.begin(write=True, db=env.open_db(b"meta", create=False)) as txn:
                txn.put(meta_key, meta_value)
        with env.begin(write=True, db=env.open_db(b"snapshots", create=False)) as txn:
            txn.put(b"big", b"x" * 500_000)  # pages allocated and freed in one txn: never written
            txn.delete(b"big")
        env.close()
        data = path / "data.mdb"
        before = (data.stat().st_size, hashlib.sha256(data.read_bytes()).hexdigest())
        assert _short_by(path, readonly=True)[1] > 0

        with pytest.raises(error):
            Journal.open(path, key=key)

        assert (data.stat().st_size, hashlib.sha256(data.read_bytes()).hexdigest()) == before

    @staticmethod
    def _shorten(path: Path, db: bytes = b"snapshots") -> None:
        """End the file short of its header, as LMDB may leave it (pages allocated and freed in one txn)."""
        env = lmdb.open(str(path), max_dbs=8)
        with env.begin(write=True) as txn:
            handle = env.open_db(db, txn=txn)
            txn.put(b"big", b"x" * 500_000, db=handle)
            txn.delete(b"big", db=handle)
        env.close()
        assert _short_by(path, readonly=True)[1] > 0

    def test_a_short_file_opened_without_its_lock_file_gets_an_owner_only_one(self, tmp_path: Path) -> None:
        path = tmp_path / "j"
        self._journal(path)
        self._shorten(path)
        (path / "lock.mdb").unlink()  # the data file alone, as a copy of it would be
        umask = os.umask(0o002)
        try:
            with Journal.open(path) as journal:
                assert journal.verify().ok
        finally:
            os.umask(umask)

        assert stat.S_IMODE((path / "lock.mdb").stat().st_mode) == 0o600

    def test_a_short_file_of_empty_journal_databases_without_a_header_is_taken_over(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "j"
        env = lmdb.open(str(path), max_dbs=8)  # what a creation that made them one by one leaves
        for name in (b"events", b"heads", b"anchors", b"ids", b"snapshots", b"meta"):
            with env.begin(write=True) as txn:
                db = env.open_db(name, txn=txn)
                if name == b"snapshots":  # and pages allocated and freed in one txn: the file ends short
                    txn.put(b"big", b"x" * 500_000, db=db)
                    txn.delete(b"big", db=db)
        env.close()
        assert _short_by(path, readonly=True)[1] > 0

        with Journal.open(path) as journal:
            assert journal.append(make_events(3)) == [1, 2, 3]

    def test_a_short_file_is_walked_read_only_even_with_check_pages_false(self, tmp_path: Path) -> None:
        path = tmp_path / "j"
        self._journal(path)
        data = path / "data.mdb"
        data.write_bytes(data.read_bytes()[: -3 * 4096])  # cut pages in use off the end
        code = self.OPEN.replace('readonly=sys.argv[2] == "ro"', "readonly=True, check_pages=False")
        assert code != self.OPEN

        done = subprocess.run(
            [sys.executable, "-c", code, str(path), "ro"],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=False,
        )

        assert done.returncode == 0, (done.returncode, done.stderr)
        assert done.stdout.startswith("JournalDamagedError"), done.stdout
        assert "short of what its header names, and not only free pages lie past its end" in done.stdout

    @pytest.mark.parametrize("page", [0, 1])
    def test_a_header_page_holding_a_transaction_of_the_other_page_is_damage(
        self, tmp_path: Path, page: int
    ) -> None:
        path = tmp_path / "j"
        self._journal(path)  # LMDB writes transaction N's header to page N % 2; readers read that page
        data = path / "data.mdb"
        raw = bytearray(data.read_bytes())
        at = page * 4096 + 16 + 4 + 4 + 8 + 8 + 48 + 48 + 8  # the meta record's txnid
        txnid = int.from_bytes(raw[at : at + 8], "little")
        raw[at : at + 8] = (txnid + 1).to_bytes(8, "little")  # the other parity
        data.write_bytes(bytes(raw))

        read, written = self._open(path, "ro"), self._open(path, "rw")

        for outcome in (read, written):
            assert outcome.startswith("JournalDamagedError"), outcome
            assert (
                f"LMDB's header page {page} holds transaction {txnid + 1}, which LMDB writes to page"
                in outcome
            )

    def test_an_empty_data_file_is_not_a_journal(self, tmp_path: Path) -> None:
        (tmp_path / "j").mkdir()
        (tmp_path / "j" / "data.mdb").write_bytes(b"")

        assert self._open(tmp_path / "j", "ro").startswith("JournalFormatError")


class TestPathsThatAreNoJournal:
    @pytest.mark.parametrize("readonly", [True, False], ids=["read-only", "read-write"])
    def test_a_data_file_that_is_a_fifo_is_refused_not_waited_on(
        self, tmp_path: Path, readonly: bool
    ) -> None:
        (tmp_path / "j").mkdir()
        os.mkfifo(tmp_path / "j" / "data.mdb")  # opening it to read would wait for a writer

        with pytest.raises(JournalFormatError, match="not a regular file"):
            Journal.open(tmp_path / "j", readonly=readonly)

    @pytest.mark.parametrize("name", ["lock.mdb", "writer.lock", "data.mdb"])
    @pytest.mark.parametrize("readonly", [True, False], ids=["read-only", "read-write"])
    @pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
    def test_a_journal_file_that_is_a_symbolic_link_is_refused_and_its_target_left_alone(
        self, tmp_path: Path, name: str, readonly: bool, dangling: bool
    ) -> None:
        # A journal someone else made could point its lock file at a file of the
        # auditor's: LMDB opens it to write (even to read) and would write its header there.
        path = tmp_path / "j"
        with Journal.open(path) as journal:
            journal.append(make_events(3))
        target = tmp_path / "precious.txt"
        if not dangling:
            target.write_bytes(b"mine")
        if (path / name).exists():
            (path / name).replace(tmp_path / f"moved-{name}")
        (path / name).symlink_to(target)

        with pytest.raises(JournalFormatError, match=f"its {name} is a symbolic link"):
            Journal.open(path, readonly=readonly)

        assert (target.read_bytes() == b"mine") if not dangling else not target.exists()

    def test_a_path_too_long_to_reach_is_a_journal_error_naming_it(self, tmp_path: Path) -> None:
        too_long = tmp_path.joinpath(*["a"] * 3000)

        with pytest.raises(JournalUnavailableError, match="cannot reach its data file"):
            Journal.open(too_long, readonly=True)


class TestMapGrowth:
    def test_a_one_mib_map_grows_past_fifty_mib_of_events(self, tmp_path: Path) -> None:
        value = "x" * 200
        with LmdbJournal.open(tmp_path / "j", map_size=1 << 20, sync=False) as journal:
            for start in range(0, 220_000, 2000):
                journal.append(make_events(2000, start=start, agents=50, value=value))
            grown = journal.map_size
            report = journal.verify()

        assert grown > 50 << 20
        assert (tmp_path / "j" / "data.mdb").stat().st_size > 50 << 20
        assert report.ok
        assert report.checked == 220_000

    def test_a_map_too_small_for_a_new_journal_grows_as_for_an_append(self, tmp_path: Path) -> None:
        with LmdbJournal.open(tmp_path / "j", map_size=4096) as journal:
            assert journal.map_size > 4096
            assert journal.append(make_events(3)) == [1, 2, 3]
        with pytest.raises(JournalFullError, match="cannot hold a new journal"):
            Journal.open(tmp_path / "k", map_size=4096, max_map_size=8192)
        with Journal.open(tmp_path / "k") as journal:  # nothing was created: a new journal
            assert journal.last_seq == 0

    def test_past_max_map_size_appends_fail_and_the_journal_is_fail_stop(self, tmp_path: Path) -> None:
        path = tmp_path / "j"
        journal = LmdbJournal.open(path, map_size=1 << 20, max_map_size=2 << 20, sync=False)
        stored = 0

        def fill() -> None:
            nonlocal stored
            for start in range(0, 100_000, 500):
                journal.append(make_events(500, start=start, value="y" * 200))
                stored = start + 500

        with pytest.raises(JournalFullError):
            fill()
        with pytest.raises(JournalFailedError) as later:
            journal.append(make_events(1, start=stored))
        assert isinstance(later.value, JournalFullError)  # still full, and fail-stop
        assert "max_map_size" in str(later.value)
        with pytest.raises(JournalFullError):  # an empty append too: it says what a real one would
            journal.append([])
        journal.close()

        with Journal.open(path, map_size=16 << 20) as reopened:
            assert reopened.last_seq == stored
            assert reopened.verify().ok
            assert reopened.append(make_events(1, start=stored)) == [stored + 1]


def test_a_reader_in_a_second_process_sees_consistent_prefixes_while_a_writer_appends(tmp_path: Path) -> None:
    path = tmp_path / "j"
    total = 6000
    reader = textwrap.dedent(
        """
        import sys, time
        from cogfabric.store import Journal
        path, total = sys.argv[1], int(sys.argv[2])
        deadline = time.monotonic() + 60
        reads = 0
        with Journal.open(path, readonly=True) as journal:
            print("ready", flush=True)
            while time.monotonic() < deadline:
                seqs = [r.seq for r in journal.read()]
                assert seqs == list(range(1, len(seqs) + 1)), "not a prefix"
                reads += 1
                if len(seqs) == total:
                    break
            assert journal.verify().ok
        print(reads, len(seqs), flush=True)
        """
    )
    with Journal.open(path) as journal:
        journal.append(make_events(1))
        child = subprocess.Popen(
            [sys.executable, "-c", reader, str(path), str(total)],
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        for start in range(1, total, 50):
            journal.append(make_events(min(50, total - start), start=start))
        out, _ = child.communicate(timeout=90)

    assert child.returncode == 0
    reads, seen = map(int, out.split())
    assert seen == total
    assert reads >= 1


def test_a_record_is_one_msgpack_array_of_its_seq_event_and_trailer(tmp_path: Path) -> None:
    events = make_events(4)
    with Journal.open(tmp_path / "j") as journal:
        journal.append(events)
        replayed = list(journal.read())
    env = lmdb.open(str(tmp_path / "j"), max_dbs=8, readonly=True)
    with env.begin(db=env.open_db(b"events", create=False)) as txn:
        values: list[Any] = [bytes(txn.get(_seq(n)) or b"") for n in (1, 4)]
    env.close()

    for value, seq, back, event in zip(values, (1, 4), (0, 1), (events[0], events[3]), strict=True):
        stored_seq, stored_event, trailer = msgspec.msgpack.decode(value)
        assert value[:2] == b"\x93\xcf"  # the seq at a fixed width, so the layout is fixed too
        assert stored_seq == seq
        assert stored_event["type"] == "PrivateSet"
        assert stored_event["id"] == event.id
        # trailer: stream | len(stream) | link(8) | chain(16), the chain last
        assert value.endswith(trailer)
        stream = b"agent/a0"
        assert trailer[:-16] == stream + bytes([len(stream)]) + back.to_bytes(8, "big")
        assert trailer[-16:] == replayed[seq - 1].chain
        assert replayed[seq - 1].raw == trailer


def test_a_record_holding_another_seq_is_named_by_verify_and_refused_by_read(closed_journal: Path) -> None:
    def forge(txn: Any, events: Any, dbs: dict[bytes, Any]) -> None:
        # record 20 claims to be record 7, re-chained as a forger of an unkeyed journal could
        value = bytes(txn.get(_seq(20), db=events))
        body = value[:2] + _seq(7) + value[10:-16]
        prev = bytes(txn.get(_seq(19), db=events))[-16:]
        chain = hashlib.blake2b(prev + body, digest_size=16).digest()
        txn.put(_seq(20), body + chain, db=events)
        txn.put(b"head", head_value(_seq(20), chain, b""), db=dbs[b"meta"])

    _raw_edit(closed_journal, forge)

    with Journal.open(closed_journal, readonly=True) as journal:
        report = journal.verify()
        seen: list[int] = []
        with pytest.raises(JournalRecordError, match="seq 20") as info:
            seen.extend(record.seq for record in journal.read())

    assert not report.ok
    assert report.first_bad_seq == 20
    assert "holds seq 7" in report.reason
    assert info.value.seq == 20
    assert seen == list(range(1, 20))  # the good records before it are handed out


@pytest.mark.parametrize("edit", ["copy", "swap"])
def test_read_refuses_a_record_moved_within_a_chunk(closed_journal: Path, edit: str) -> None:
    def move(txn: Any, events: Any, _: dict[bytes, Any]) -> None:
        fourth, sixth = bytes(txn.get(_seq(4), db=events)), bytes(txn.get(_seq(6), db=events))
        if edit == "copy":
            txn.put(_seq(5), fourth, db=events)
        else:
            txn.put(_seq(4), sixth, db=events)
            txn.put(_seq(6), fourth, db=events)

    _raw_edit(closed_journal, move)

    with Journal.open(closed_journal, readonly=True) as journal:
        seen: list[int] = []
        with pytest.raises(JournalRecordError, match="is not its key's") as info:
            seen.extend(record.seq for record in journal.read())

    bad = 5 if edit == "copy" else 4
    assert info.value.seq == bad
    assert seen == list(range(1, bad))


def test_verify_passes_while_another_process_appends(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(10))
    writer = textwrap.dedent(
        """
        import sys
        from cogfabric.store import Journal
        from cogfabric.store.testing import make_events
        with Journal.open(sys.argv[1], sync=False) as journal:
            print("ready", flush=True)
            for start in range(10, 40010, 5):
                journal.append(make_events(5, start=start))
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", writer, str(path)], stdout=subprocess.PIPE, text=True, encoding="utf-8"
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    reports: list[VerifyReport] = []
    with Journal.open(path, readonly=True) as journal:
        while child.poll() is None and len(reports) < 50:
            reports.append(journal.verify())
            # a tail check from where the writer is right now: the record may land meanwhile
            reports.append(journal.verify(after=journal.last_seq + 1))
    child.communicate(timeout=60)

    assert child.returncode == 0
    assert reports
    assert all(r.ok or "past the last record" in r.reason for r in reports), [r for r in reports if not r.ok][
        :1
    ]


def test_entries_past_the_last_record_are_reported(closed_journal: Path) -> None:
    far = _seq(10**6)
    edits: dict[str, Callable[[Any, Any, dict[bytes, Any]], object]] = {
        "head": lambda txn, _, dbs: txn.put(b"agent/a1", far + _seq(7), db=dbs[b"heads"]),
        "id": lambda txn, _, dbs: txn.put(b"forged-id", far, db=dbs[b"ids"]),
        "anchor": lambda txn, _, dbs: txn.put(b"agent/a1\0" + far, b"", db=dbs[b"anchors"]),
    }
    for name, edit in edits.items():
        copy = closed_journal.parent / name
        shutil.copytree(closed_journal, copy)
        _raw_edit(copy, edit)

        report = _verify(copy)

        assert not report.ok, name
        assert report.first_bad_seq in (10**6, None), (name, report)


def test_stream_links_survive_a_refused_batch_and_a_cleared_head_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cogfabric.store._lmdb._HEADS_CACHE", 4)
    with Journal.open(tmp_path / "j") as journal:
        journal.append(make_events(30, agents=7))
        bad = PrivateSet(at=0.0, agent="a\0b", key="k", value=1)
        with pytest.raises(InvalidStreamError):
            journal.append([*make_events(5, agents=7, start=30), bad])
        journal.append(make_events(40, agents=7, start=30))

        assert journal.verify().ok
        assert [r.seq for r in journal.read(stream="agent/a3")] == list(range(4, 71, 7))
    with Journal.open(tmp_path / "j") as journal:
        assert journal.stream_head("agent/a3") == 67  # from the database: nothing cached yet
        journal.append(make_events(7, agents=7, start=70))
        assert journal.verify().ok
        assert journal.stream_head("agent/a3") == 74
        assert [r.seq for r in journal.read(stream="agent/a3")] == list(range(4, 78, 7))


def test_an_interrupt_after_the_commit_makes_the_journal_fail_stop_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Journal.open(tmp_path / "j") as journal:
        assert isinstance(journal, LmdbJournal)
        events = make_events(5)
        journal.append(events[:3])

        def interrupted(*_: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(journal, "_committed", interrupted)
        with pytest.raises(KeyboardInterrupt):
            journal.append(events[3:])
        monkeypatch.undo()

        assert journal.is_failed
        with pytest.raises(JournalFailedError):
            journal.append(make_events(1, start=5))
    with Journal.open(tmp_path / "j") as journal:
        assert journal.verify().ok
        assert [r.event.id for r in journal.read()] == [e.id for e in events]  # the batch did land


@pytest.mark.parametrize(
    ("failure", "expected"),
    [(lmdb.CorruptedError, JournalDamagedError), (lmdb.DiskError, JournalUnavailableError)],
    ids=["damaged page", "I/O error"],
)
def test_an_append_that_fails_in_lmdb_gets_the_error_a_read_would_and_goes_fail_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: type[lmdb.Error], expected: type[Exception]
) -> None:
    with Journal.open(tmp_path / "j") as journal:
        assert isinstance(journal, LmdbJournal)

        def fails(*_: object) -> None:
            msg = "simulated"
            raise failure(msg)

        monkeypatch.setattr(journal, "_write", fails)
        with pytest.raises(expected, match="fail-stop until reopened") as info:
            journal.append(make_events(1))
        monkeypatch.undo()

        assert isinstance(info.value.__cause__, failure)
        with pytest.raises(JournalFailedError):
            journal.append(make_events(1))


def test_an_append_never_skips_records_the_file_holds_already(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j") as journal:
        assert isinstance(journal, LmdbJournal)
        journal.append(make_events(3))
        journal._head_seq = 1  # a position behind the file, as a lost update would leave it

        with pytest.raises(JournalUnavailableError, match="past this journal's last seq 1"):
            journal.append(make_events(2, start=3))

        assert journal.is_failed
    with Journal.open(tmp_path / "j") as journal:
        assert journal.verify().ok
        assert journal.last_seq == 3


def test_a_forked_child_cannot_use_its_parents_journal_and_makes_ids_of_its_own(tmp_path: Path) -> None:
    from cogfabric.events import new_event_id  # noqa: PLC0415

    with Journal.open(tmp_path / "j") as journal:
        journal.append(make_events(1))
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report, and leave without running anything of the parent's
            code = 2
            try:
                try:
                    journal.append(make_events(1, start=1))
                except JournalUnavailableError:
                    code = 0
                journal.close()  # leaves the parent's environment alone
                os.write(write_end, new_event_id().encode())
            finally:
                os._exit(code)
        os.close(write_end)
        child_id = _read_within(read_end, 200).decode()
        os.close(read_end)
        status = _reap(pid)

        assert os.waitstatus_to_exitcode(status) == 0  # the child's append was refused
        assert child_id.split("-")[0] != new_event_id().split("-")[0]  # a prefix of its own
        assert journal.append(make_events(1, start=1)) == [2]  # the parent's journal goes on
        assert journal.verify().ok


def test_a_forked_child_is_told_how_to_open_its_parents_journal_as_it_cannot_open_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The child's refusal said "open the journal again in this process", which py-lmdb
    # refuses too (it keeps the files it has open across a fork): it names the way out,
    # also to a child that changed directory after its parent opened a relative path.
    monkeypatch.chdir(tmp_path)
    with Journal.open("j") as journal:
        journal.append(make_events(1))
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            messages = []
            try:
                try:
                    journal.read()
                except JournalUnavailableError as exc:
                    messages.append(str(exc))
                journal.close()
                os.chdir("/")
                try:
                    Journal.open(tmp_path / "j", readonly=True)
                except JournalLockedError as exc:
                    messages.append(str(exc))
                os.write(write_end, "\n".join(messages).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        told = _read_within(read_end, 4000).decode().splitlines()
        os.close(read_end)
        _reap(pid)

    assert len(told) == 2, told
    assert "open the journal again in this process" not in told[0]
    advice = "open the journal in a process that did not (multiprocessing's 'spawn' or 'forkserver'"
    for message in told:
        assert advice in message
    assert f"was opened by process {os.getpid()}, which forked this one" in told[1]


def test_a_forked_child_that_closes_its_copy_leaves_the_parent_its_lock(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j")
    from_child, to_parent = os.pipe()
    from_parent, to_child = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            journal.close()  # the child's copy only
            os.write(to_parent, b"closed")
            os.read(from_parent, 1)  # stay alive until the parent has reopened
        finally:
            os._exit(0)
    try:
        assert _read_within(from_child, 6) == b"closed"
        journal.close()
        with Journal.open(tmp_path / "j") as reopened:  # the child lives on, without the lock
            assert reopened.last_seq == 0
    finally:
        os.write(to_child, b"x")
        _reap(pid)
        for fd in (from_child, to_parent, from_parent, to_child):
            os.close(fd)


@pytest.mark.parametrize(
    "snapshot",
    [
        Snapshot("agent/a0", 1, 5),  # type: ignore[arg-type]  # bytes(5) would store five NULs
        Snapshot("agent/a0", True, b"s"),
        Snapshot("agent/a0", 1.5, b"s"),  # type: ignore[arg-type]
        ("agent/a0", 1, b"s"),
    ],
    ids=["int data", "bool seq", "float seq", "a tuple"],
)
def test_a_snapshot_of_the_wrong_types_is_refused_and_nothing_is_written(
    tmp_path: Path, snapshot: Any
) -> None:
    with Journal.open(tmp_path / "j") as journal:
        with pytest.raises(TypeError, match="snapshot"):
            journal.append(make_events(1), snapshots=[snapshot])

        assert journal.last_seq == 0
        assert journal.load_snapshot("agent/a0") is None
        assert journal.append(make_events(1)) == [1]  # still usable


def test_a_lifecycle_no_agent_can_be_in_is_refused_on_append_and_named_on_read(tmp_path: Path) -> None:
    bogus = LifecycleChanged(at=1.0, agent="a", state="BOGUS", previous="IDLE")  # type: ignore[arg-type]
    with Journal.open(tmp_path / "j") as journal:
        with pytest.raises(InvalidEventError, match=r"\$\.state"):
            journal.append([bogus])
        journal.append([bogus], validate=False)  # as a forger could
        with pytest.raises(JournalRecordDecodeError, match="seq 1"):
            list(journal.read())
        assert journal.verify(decode=True).first_bad_seq == 1


def test_reads_take_big_records_a_few_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = make_events(60, agents=2, value="v" * 3000)  # ~3 kB records; chunks of ~30 kB below
    with Journal.open(tmp_path / "j") as journal:
        journal.append(events)
        monkeypatch.setattr(_lmdb, "_READ_BYTES", 30_000)
        chunks: list[int] = []
        read_chunk = journal._read_chunk  # type: ignore[attr-defined]

        def counted(*args: Any) -> Any:
            taken = read_chunk(*args)
            chunks.append(len(taken[1]))
            return taken

        monkeypatch.setattr(journal, "_read_chunk", counted)
        assert [r.event for r in journal.read()] == events
        assert sum(chunks) == 60
        assert max(chunks) <= 10
        chunks.clear()
        assert [r.event for r in journal.read(stream="agent/a1")] == events[1::2]
        assert sum(chunks) == 30
        assert max(chunks) <= 10
        assert journal.verify(decode=True).ok


def test_a_full_file_system_refuses_a_journal_lmdb_would_die_opening(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Journal.open(tmp_path / "used") as journal:  # its lock file is on disk
        journal.append(make_events(2))
    full = types.SimpleNamespace(f_bavail=0, f_frsize=4096, f_flag=0)
    monkeypatch.setattr(os, "statvfs", lambda _where: full)

    with pytest.raises(
        JournalUnavailableError, match="no space left on its file system for LMDB's lock file"
    ):
        Journal.open(tmp_path / "new")  # LMDB's first write to its new lock file would be SIGBUS
    with Journal.open(tmp_path / "used", readonly=True) as journal:
        assert journal.last_seq == 2
    (tmp_path / "copy").mkdir()  # a copy of its data file alone, as mdb_copy makes
    shutil.copyfile(tmp_path / "used" / "data.mdb", tmp_path / "copy" / "data.mdb")
    read_only_media = types.SimpleNamespace(f_bavail=0, f_frsize=4096, f_flag=os.ST_RDONLY)
    monkeypatch.setattr(os, "statvfs", lambda _where: read_only_media)  # squashfs, iso9660: "no room"
    with Journal.open(tmp_path / "copy", readonly=True) as journal:  # LMDB needs no lock file there
        assert journal.last_seq == 2


def test_values_nested_past_max_value_depth_are_refused_on_append_and_named_by_verify(tmp_path: Path) -> None:
    deep: list[Any] = []
    for _ in range(MAX_VALUE_DEPTH + 50):  # decodable from a shallow stack, not from every one
        deep = [deep]
    event = PrivateSet(at=1.0, agent="a", key="k", value=deep)
    with Journal.open(tmp_path / "j") as journal:
        with pytest.raises(InvalidEventError, match=f"deeper than {MAX_VALUE_DEPTH} levels"):
            journal.append([event])
        journal.append(make_events(1))
        journal.append([event], validate=False)  # as a forger could
        report = journal.verify(decode=True)

    assert (report.ok, report.first_bad_seq) == (False, 2)
    assert f"deeper than {MAX_VALUE_DEPTH} levels" in report.reason


def test_what_append_accepts_at_the_depth_limit_verify_accepts(tmp_path: Path) -> None:
    def nested(levels: int) -> list[Any]:
        value: list[Any] = []
        for _ in range(levels - 1):
            value = [value]
        return value

    deepest = MAX_VALUE_DEPTH + 3  # the event's own levels around a value leave this much room
    with Journal.open(tmp_path / "j") as journal:
        journal.append([PrivateSet(at=1.0, agent="a", key="k", value=nested(deepest))])
        with pytest.raises(InvalidEventError):
            journal.append([PrivateSet(at=1.0, agent="a", key="k", value=nested(deepest + 1))])
        assert journal.verify(decode=True).ok


def test_verify_reads_the_snapshots_one_at_a_time(tmp_path: Path) -> None:
    # Forty streams' snapshots of 1 MB each: verify checks each one's hash without holding
    # them all (an agent's snapshot holds its whole state; thousands of agents weigh GBs).
    with Journal.open(tmp_path / "j", map_size=1 << 28) as journal:
        events = [PrivateSet(at=0.0, agent=f"a{i}", key="k", value=i) for i in range(40)]
        journal.append(events)
        for i, event in enumerate(events):
            journal.save_snapshot(Snapshot(event.stream, i + 1, bytes([i]) * (1 << 20)))
        tracemalloc.start()
        try:
            report = journal.verify()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

    assert report.ok, report
    assert peak < 8 << 20, f"verify held {peak:,} bytes at its peak"


def test_read_holds_one_chunk_of_big_records_at_a_time(tmp_path: Path) -> None:
    # 24 records of 4 MiB: a chunk stops at about 16 MiB (4 of them, and their decoded
    # events); the next is read once the last one is handed out, not beside it (a
    # helper's hunt: the reader held the chunk before while it read the next)
    with Journal.open(tmp_path / "j", sync=False) as journal:
        for i in range(24):
            journal.append([PrivateSet(at=0.0, agent="a", key=f"k{i}", value="x" * (4 << 20))])
        tracemalloc.start()
        try:
            count = sum(1 for _ in journal.read())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

    assert count == 24
    assert peak < 42 << 20, f"read held {peak:,} bytes at its peak"  # two chunks: about 48 MiB


def test_entering_a_closed_journal_raises_as_any_other_use_of_it(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j")
    journal.close()

    with pytest.raises(JournalClosedError), journal:
        pass
