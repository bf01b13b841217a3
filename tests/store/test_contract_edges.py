"""The journal's contract at its edges: what a mutation test found no test held.

Each test here failed under a small change of the store (a bound off by one, a flag
not handed to LMDB, a check left out) that every other test let through.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import lmdb
import msgspec
import pytest

from cogfabric.events import PrivateSet
from cogfabric.store import (
    InvalidStreamError,
    Journal,
    JournalFullError,
    JournalIntegrityError,
    LmdbJournal,
    Snapshot,
    VerifyReport,
)
from cogfabric.store._record import head_value
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _seq(n: int) -> bytes:
    return n.to_bytes(8, "big")


def test_read_until_past_the_last_seq_stops_at_the_last_record(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j") as journal:
        journal.append(make_events(3))

        assert [r.seq for r in journal.read(until=10)] == [1, 2, 3]
        assert [r.seq for r in journal.read(until=10, stream="agent/a0")] == [1]
        records = journal.read(until=10)  # the journal as it was when called
        streamed = journal.read(until=10, stream="agent/a0")
        journal.append(make_events(3, start=3))
        assert [r.seq for r in records] == [1, 2, 3]
        assert [r.seq for r in streamed] == [1]


def test_the_map_never_grows_past_a_max_map_size_that_is_no_doubling(tmp_path: Path) -> None:
    # doubling 1 MiB reaches 4 MiB, past the limit of 3 MiB: the last growth stops at it
    limit = 3 << 20
    sizes: list[int] = []
    with Journal.open(tmp_path / "j", map_size=1 << 20, max_map_size=limit, sync=False) as journal:
        assert isinstance(journal, LmdbJournal)
        full: JournalFullError | None = None
        for start in range(0, 10**6, 500):
            try:
                journal.append(make_events(500, start=start, value="x" * 200))
            except JournalFullError as exc:
                full = exc
                break
            sizes.append(journal.map_size)
    assert full is not None
    assert max(sizes) == limit
    assert (tmp_path / "j" / "data.mdb").stat().st_size <= limit


def test_ids_and_streams_of_exactly_255_bytes_are_stored(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j") as journal:
        event = PrivateSet(at=0.0, agent="a" * (255 - len("agent/")), key="k", value=1, id="i" * 255)
        assert len(event.stream.encode()) == 255

        assert journal.append([event]) == [1]
        assert [r.event for r in journal.read(stream=event.stream)] == [event]
        with pytest.raises(InvalidStreamError):
            journal.append([PrivateSet(at=0.0, agent="b", key="k", value=1, id="i" * 256)])
        with pytest.raises(InvalidStreamError):
            journal.append([PrivateSet(at=0.0, agent="a" * (256 - len("agent/")), key="k", value=1)])


def test_sync_and_readonly_reach_lmdb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No test can pull the power; this one checks the flags LMDB is given.
    seen: list[dict[str, Any]] = []
    real = lmdb.open

    def spy(*args: Any, **kwargs: Any) -> lmdb.Environment:
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(lmdb, "open", spy)
    Journal.open(tmp_path / "j").close()
    Journal.open(tmp_path / "j", sync=False).close()
    Journal.open(tmp_path / "j", readonly=True).close()

    flags = [(kwargs.get("sync"), kwargs.get("readonly")) for kwargs in seen]
    assert flags[:2] == [(True, False), (False, False)]
    assert flags[2][1] is True


def test_close_syncs_a_journal_opened_without_sync(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j", sync=False)
    assert isinstance(journal, LmdbJournal)
    journal.append(make_events(2))
    env = journal._env
    forced: list[bool] = []

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(env, name)

        def sync(self, force: bool = False) -> None:
            forced.append(force)
            env.sync(force)

    journal._env = Spy()  # type: ignore[assignment]
    journal.close()

    assert forced == [True]


def test_a_snapshot_at_seq_zero_is_refused(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j") as journal:
        journal.append(make_events(1))
        with pytest.raises(ValueError, match="outside 1"):
            journal.save_snapshot(Snapshot("agent/a0", 0, b"s"))


def test_verify_names_a_stream_link_that_skips_a_record_of_its_stream(tmp_path: Path) -> None:
    # An unkeyed journal re-chained by hand: record 7 of agent/a0 links to 1, not 4, so
    # a stream read (and replay) skips 4; the chain is whole again past the change.
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(20))  # agent/a0 at seqs 1, 4, 7, ...
    env = lmdb.open(str(path), max_dbs=8)
    events, meta = env.open_db(b"events"), env.open_db(b"meta")
    with env.begin(write=True) as txn:
        stored = txn.get(_seq(6), db=events)
        assert stored is not None
        prev = bytes(stored[-16:])
        for n in range(7, 21):
            record = txn.get(_seq(n), db=events)
            assert record is not None
            body = bytearray(record[:-16])
            if n == 7:
                assert bytes(body[-8:]) == _seq(4)
                body[-8:] = _seq(1)
            prev = hashlib.blake2b(prev + bytes(body), digest_size=16).digest()
            txn.put(_seq(n), bytes(body) + prev, db=events)
        txn.put(b"head", head_value(_seq(20), prev, b""), db=meta)
    env.close()

    with Journal.open(path, readonly=True) as journal:
        assert 4 not in [r.seq for r in journal.read(stream="agent/a0")]  # what replay would miss
        report = journal.verify()
    assert (report.ok, report.first_bad_seq) == (False, 7)


@pytest.mark.parametrize("key", [b"\xff", _seq(3) + b"\x00"], ids=["short", "long"])
def test_a_last_key_that_is_no_seq_is_refused_at_open(tmp_path: Path, key: bytes) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(3))
    env = lmdb.open(str(path), max_dbs=8)
    events = env.open_db(b"events")
    with env.begin(write=True) as txn:
        record = txn.get(_seq(3), db=events)
        assert record is not None
        txn.put(key, bytes(record), db=events)
    env.close()

    with pytest.raises(JournalIntegrityError, match="is no seq"):
        Journal.open(path, readonly=True).close()
    with pytest.raises(JournalIntegrityError, match="is no seq"):
        Journal.open(path).close()


def test_seq_arguments_past_what_a_seq_key_holds_are_clamped(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j") as journal:
        journal.append(make_events(3))

        assert journal.record_intact(2**70) is False
        assert list(journal.read(after=2**70)) == []
        assert [r.seq for r in journal.read(until=2**70)] == [1, 2, 3]
        report = journal.verify(after=2**70)
        assert (report.ok, report.first_bad_seq) == (False, 2**64 - 1)
        assert "past the last record" in (report.reason or "")


# ------------------------------------------------------------------ verify's edges
# Each test below failed under a change of verify (store/_verify.py, store/_record.py,
# the checks of store/_lmdb.py) that every other test let through.


def _twenty(tmp_path: Path) -> Path:
    """A closed journal of 20 records: agent/a0 at 1, 4, ..., 19; a1 at 2, ..., 20; a2 at 3, ..., 18."""
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(20))
    return path


def _edit(path: Path, edit: Callable[[Any, dict[bytes, Any]], object]) -> None:
    """Change a closed journal with the plain lmdb package, in one write transaction."""
    env = lmdb.open(str(path), max_dbs=8)
    try:
        dbs = {name: env.open_db(name) for name in (b"events", b"heads", b"ids", b"snapshots", b"meta")}
        with env.begin(write=True) as txn:
            edit(txn, dbs)
    finally:
        env.close()


def _forge(path: Path, changes: dict[int, Callable[[bytearray], object]]) -> None:
    """Change the records ``changes`` names (each record without its chain link) and
    re-chain from the first of them on, head included: what anyone can do to an unkeyed journal."""

    def forge(txn: Any, dbs: dict[bytes, Any]) -> None:
        events, n = dbs[b"events"], min(changes)
        prev = bytes(txn.get(_seq(n - 1), db=events))[-16:] if n > 1 else bytes(16)
        while (record := txn.get(_seq(n), db=events)) is not None:
            body = bytearray(record[:-16])
            if n in changes:
                changes[n](body)
            prev = hashlib.blake2b(prev + bytes(body), digest_size=16).digest()
            txn.put(_seq(n), bytes(body) + prev, db=events)
            n += 1
        txn.put(b"head", head_value(_seq(n - 1), prev, b""), db=dbs[b"meta"])

    _edit(path, forge)


def _stream_link(link: int) -> Callable[[bytearray], None]:
    def relink(body: bytearray) -> None:
        body[-8:] = _seq(link)  # a record's body ends: stream | len(stream) | link(8)

    return relink


def _verified(path: Path, after: int = 0) -> VerifyReport:
    with Journal.open(path, readonly=True) as journal:
        return journal.verify(after=after)


def _head(last: int, count: int, first: int) -> bytes:
    return _seq(last) + count.to_bytes(8, "big") + _seq(first)


def test_verify_names_a_record_whose_seq_is_framed_as_no_writer_frames_it(tmp_path: Path) -> None:
    # msgpack's int64 (0xd3) in place of the uint64 (0xcf) every record starts with: the
    # seq decodes alike, but a stream read, which checks the framing, refuses the record
    path = _twenty(tmp_path)

    def retype(body: bytearray) -> None:
        body[1] = 0xD3

    _forge(path, {9: retype})
    report = _verified(path)

    assert (report.ok, report.first_bad_seq) == (False, 9)
    assert "framing is malformed" in report.reason


def test_verify_names_a_record_whose_stream_length_disagrees_with_its_trailer(tmp_path: Path) -> None:
    # Record 3, agent/a2's first, says its stream name is a byte shorter than the trailer
    # holds: read by the length, it would be a record of 'gent/a2'.
    path = _twenty(tmp_path)

    def shorten(body: bytearray) -> None:
        body[-9] -= 1  # len(stream), before the link

    _forge(path, {3: shorten})
    report = _verified(path)

    assert (report.ok, report.first_bad_seq) == (False, 3)
    assert "framing is malformed" in report.reason


def test_verify_names_a_first_record_of_a_stream_that_links_back(tmp_path: Path) -> None:
    # agent/a1's first record (2) links to 1, agent/a0's: a stream's first record links to 0
    path = _twenty(tmp_path)
    _forge(path, {2: _stream_link(1)})

    report = _verified(path)

    assert (report.ok, report.first_bad_seq) == (False, 2)
    assert "stream link points to seq 1" in report.reason


def test_a_tail_check_names_a_first_record_of_its_tail_that_links_to_itself(tmp_path: Path) -> None:
    # in a tail check a stream's first record in the tail may link to any earlier seq, not its own
    path = _twenty(tmp_path)
    _forge(path, {11: _stream_link(11)})

    report = _verified(path, after=10)

    assert (report.ok, report.first_bad_seq) == (False, 11)
    assert "stream link points to seq 11" in report.reason


def test_a_tail_check_names_a_stream_name_no_writer_makes_at_its_first_record(tmp_path: Path) -> None:
    # agent/a1's records in the tail (11, 14, 17, 20) re-filed under a name that is not UTF-8
    path = _twenty(tmp_path)

    def rename(body: bytearray) -> None:
        assert body[-17:-9] == b"agent/a1"
        body[-17:-9] = b"agent/\xff1"

    _forge(path, dict.fromkeys((11, 14, 17, 20), rename))
    report = _verified(path, after=10)

    assert (report.ok, report.first_bad_seq) == (False, 11)
    assert "is not UTF-8" in report.reason


def test_a_tail_check_names_a_stream_head_moved_to_a_later_record_of_another_stream(tmp_path: Path) -> None:
    path = _twenty(tmp_path)
    _edit(path, lambda txn, dbs: txn.put(b"agent/a2", _head(19, 7, 3), db=dbs[b"heads"]))  # 19 is a0's

    report = _verified(path, after=10)

    assert (report.ok, report.first_bad_seq) == (False, 18)
    assert "head of 'agent/a2'" in report.reason


def test_a_tail_check_names_the_lowest_seq_of_the_stream_heads_set_back(tmp_path: Path) -> None:
    path = _twenty(tmp_path)

    def set_back(txn: Any, dbs: dict[bytes, Any]) -> None:
        txn.put(b"agent/a1", _head(17, 6, 2), db=dbs[b"heads"])
        txn.put(b"agent/a2", _head(15, 5, 3), db=dbs[b"heads"])

    _edit(path, set_back)
    report = _verified(path, after=10)

    assert (report.ok, report.first_bad_seq) == (False, 18)  # a2's last record; a1's is 20
    assert "head of 'agent/a2'" in report.reason


@pytest.mark.parametrize(
    "value",
    [_head(20, 6, 2), _head(20, 7, 2)[:16] + _seq(2)[1:]],  # a count off by one; first seq in 7 bytes
    ids=["count", "short"],
)
def test_verify_names_a_changed_head_of_the_stream_holding_the_last_record(
    tmp_path: Path, value: bytes
) -> None:
    path = _twenty(tmp_path)
    _edit(path, lambda txn, dbs: txn.put(b"agent/a1", value, db=dbs[b"heads"]))

    report = _verified(path)

    assert (report.ok, report.first_bad_seq) == (False, 20)
    assert "head of 'agent/a1'" in report.reason


def test_verify_names_the_lowest_last_record_of_the_streams_missing_from_the_index(tmp_path: Path) -> None:
    path = _twenty(tmp_path)

    def remove(txn: Any, dbs: dict[bytes, Any]) -> None:
        for name in (b"agent/a1", b"agent/a2"):
            assert txn.delete(name, db=dbs[b"heads"])

    _edit(path, remove)
    report = _verified(path)

    assert (report.ok, report.first_bad_seq) == (False, 18)  # a2's last record; a1's is 20
    assert "missing from the stream index" in report.reason


def test_verify_reports_an_id_entry_without_a_seq_sorted_after_every_true_one(tmp_path: Path) -> None:
    path = _twenty(tmp_path)
    _edit(path, lambda txn, dbs: txn.put(b"\xff\xff\xff", b"x", db=dbs[b"ids"]))

    report = _verified(path)

    assert (report.ok, report.first_bad_seq) == (False, None)  # a stray entry names no record
    assert "id index" in report.reason


def test_verify_names_the_last_record_for_a_changed_snapshot_of_it(tmp_path: Path) -> None:
    path = _twenty(tmp_path)
    with Journal.open(path) as journal:
        journal.save_snapshot(Snapshot("agent/a1", 20, b"state"))

    def forge(txn: Any, dbs: dict[bytes, Any]) -> None:
        value = bytes(txn.get(b"agent/a1", db=dbs[b"snapshots"]))
        txn.put(b"agent/a1", value[:-1] + b"X", db=dbs[b"snapshots"])

    _edit(path, forge)
    report = _verified(path)

    assert (report.ok, report.first_bad_seq) == (False, 20)
    assert "the snapshot of 'agent/a1' does not match its hash" in report.reason


def test_verify_names_a_chain_head_at_the_last_seq_that_holds_another_link(tmp_path: Path) -> None:
    # an unkeyed journal's head, tag and all, can be made by anyone: its link must be the record's
    path = _twenty(tmp_path)
    _edit(path, lambda txn, dbs: txn.put(b"head", head_value(_seq(20), bytes(16), b""), db=dbs[b"meta"]))

    report = _verified(path)

    assert (report.ok, report.first_bad_seq) == (False, 20)
    assert "the chain head does not match record 20" in report.reason


def test_verify_reports_a_chain_head_of_another_length_as_missing(tmp_path: Path) -> None:
    path = _twenty(tmp_path)

    def lengthen(txn: Any, dbs: dict[bytes, Any]) -> None:
        txn.put(b"head", bytes(txn.get(b"head", db=dbs[b"meta"])) + b"\0", db=dbs[b"meta"])

    _edit(path, lengthen)
    report = _verified(path)

    assert (report.ok, report.first_bad_seq, report.reason) == (False, None, "the chain head is missing")


def test_a_record_of_only_a_chain_link_is_not_intact(tmp_path: Path) -> None:
    # sixteen bytes that are the hash of the link before them: a "record" with nothing in it
    path = _twenty(tmp_path)

    def empty(txn: Any, dbs: dict[bytes, Any]) -> None:
        prev = bytes(txn.get(_seq(19), db=dbs[b"events"]))[-16:]
        txn.put(_seq(20), hashlib.blake2b(prev, digest_size=16).digest(), db=dbs[b"events"])

    _edit(path, empty)

    with Journal.open(path, readonly=True) as journal:
        assert journal.record_intact(19)
        assert not journal.record_intact(20)


def test_a_record_after_a_missing_one_is_not_intact(tmp_path: Path) -> None:
    path = _twenty(tmp_path)
    _edit(path, lambda txn, dbs: txn.delete(_seq(5), db=dbs[b"events"]))

    with Journal.open(path, readonly=True) as journal:
        assert [journal.record_intact(seq) for seq in (4, 5, 6, 7)] == [True, False, False, True]


def test_verify_names_a_record_whose_stream_length_would_put_its_trailer_before_the_record(
    tmp_path: Path,
) -> None:
    # Record 1 re-made with a length of its stream name of 255, far more than the record
    # holds, and the trailer header that length implies planted in its event where a
    # reading by that length would look for it: still no record of any stream.
    path = _twenty(tmp_path)

    def overlong(body: bytearray) -> None:
        event = bytearray(msgspec.msgpack.encode({"id": "forged", "pad": bytes(133)}))  # the pad last
        trailer = body[len(body) - 12 - body[-9] :]  # bin16 header | stream | len(stream) | link
        size = 10 + len(event) + len(trailer) + 16  # the record's, its chain link included
        at = size + (size - 25 - 255) - 3 - 10  # in the event: where that trailer's header would be
        assert len(event) - 133 <= at <= len(event) - 3
        event[at : at + 3] = b"\xc5" + (255 + 25).to_bytes(2, "big")
        body[10:] = event + trailer
        body[-9] = 255

    _forge(path, {1: overlong})
    report = _verified(path)

    assert (report.ok, report.first_bad_seq) == (False, 1)
    assert "framing is malformed" in report.reason


def test_a_value_stored_at_seq_zero_is_no_intact_record_whatever_it_holds(tmp_path: Path) -> None:
    # chained onto the zero link as a first record would be: seq 0 is still no record
    path = _twenty(tmp_path)

    def plant(txn: Any, dbs: dict[bytes, Any]) -> None:
        body = bytes(txn.get(_seq(1), db=dbs[b"events"]))[:-16]
        txn.put(_seq(0), body + hashlib.blake2b(bytes(16) + body, digest_size=16).digest(), db=dbs[b"events"])

    _edit(path, plant)

    with Journal.open(path, readonly=True) as journal:
        assert journal.record_intact(1)
        assert not journal.record_intact(0)
