"""The LMDB journal's append and read paths, pinned where a mutation test found no test holding them.

Each test here failed under a small change of ``store/_lmdb.py`` (a bound off by one,
a growth step, a check left out) that every other test of the store let through.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import lmdb
import pytest

from cogfabric.events import PrivateSet
from cogfabric.store import (
    InvalidStreamError,
    Journal,
    JournalClosedError,
    JournalFailedError,
    JournalIntegrityError,
    JournalRecordError,
    JournalUnavailableError,
    LmdbJournal,
    Snapshot,
    _lmdb,
)
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path


def test_a_full_map_is_doubled_not_grown_by_a_step(tmp_path: Path) -> None:
    # open() says: "when the map fills, it is doubled and the append retried"
    start = 1 << 20
    with LmdbJournal.open(tmp_path / "j", map_size=start, sync=False) as journal:
        for first in range(0, 100_000, 500):
            journal.append(make_events(500, start=first, value="x" * 200))
            if journal.map_size > start:
                break
        grown = journal.map_size
        assert journal.verify().ok

    assert grown > start
    assert grown % start == 0
    assert (grown // start) & (grown // start - 1) == 0  # 2, 4, 8 ... times the start


def _count_chunks(
    journal: LmdbJournal, monkeypatch: pytest.MonkeyPatch, step: str = "_read_chunk"
) -> list[int]:
    """The number of records of each chunk ``journal``'s reads take from now on, in order.

    ``step``: the method that reads one chunk and returns its values second
    (``_read_chunk``; ``_read_back_txn`` for ``read_back``).
    """
    chunks: list[int] = []
    read_chunk = getattr(journal, step)

    def counted(*args: Any) -> Any:
        taken = read_chunk(*args)
        chunks.append(len(taken[1]))
        return taken

    monkeypatch.setattr(journal, step, counted)
    return chunks


def test_a_read_chunk_stops_once_its_records_hold_the_byte_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # records bigger than a page (counted one by one), all of one size: a budget of
    # exactly three of them cuts every chunk at three records, not four
    events = make_events(12, agents=2, start=10, value="v" * 5000)  # keys k10 .. k21
    with Journal.open(tmp_path / "j") as journal:
        assert isinstance(journal, LmdbJournal)
        journal.append(events)
        sizes = {len(value) for _, value in journal._read_pairs(0)}
        assert len(sizes) == 1
        monkeypatch.setattr(_lmdb, "_READ_BYTES", 3 * sizes.pop())
        chunks = _count_chunks(journal, monkeypatch)
        assert [r.event for r in journal.read()] == events
        assert chunks == [3, 3, 3, 3]
        chunks.clear()
        assert [r.event for r in journal.read(stream="agent/a0")] == events[0::2]
        assert chunks == [3, 3]


def test_an_empty_event_id_is_refused_and_the_journal_goes_on(tmp_path: Path) -> None:
    # append's docstring: InvalidStreamError for an id that is empty (LMDB would refuse
    # the empty key itself, and the journal would go fail-stop over a bad argument)
    with LmdbJournal.open(tmp_path / "j") as journal:
        with pytest.raises(InvalidStreamError, match="event id ''"):
            journal.append([*make_events(2), PrivateSet(at=0.0, agent="a", key="k", value=1, id="")])

        assert not journal.is_failed
        assert journal.last_seq == 0
        assert journal.append(make_events(1)) == [1]


class _EnvThatCannotGrow:
    """An LMDB environment whose map cannot be resized (as when the address space is spent)."""

    def __init__(self, env: Any) -> None:
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def set_mapsize(self, size: int) -> None:
        msg = f"simulated: cannot map {size} bytes"
        raise lmdb.Error(msg)


def test_a_map_that_cannot_grow_makes_the_journal_fail_stop(tmp_path: Path) -> None:
    journal = LmdbJournal.open(tmp_path / "j", map_size=1 << 20, sync=False)
    try:
        env = journal._env
        journal._env = _EnvThatCannotGrow(env)  # type: ignore[assignment]
        stored = 0

        def fill() -> None:
            nonlocal stored
            for first in range(0, 100_000, 500):
                journal.append(make_events(500, start=first, value="x" * 200))
                stored = first + 500

        with pytest.raises(JournalUnavailableError, match="could not grow its map and is fail-stop"):
            fill()
        journal._env = env

        assert journal.is_failed
        with pytest.raises(JournalFailedError):
            journal.append(make_events(1, start=stored))
        assert journal.last_seq == stored
    finally:
        journal.close()
    with Journal.open(tmp_path / "j") as reopened:
        assert reopened.last_seq == stored
        assert reopened.verify().ok


def test_a_read_takes_at_most_one_chunk_of_records_per_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # read()'s docstring: chunks of _READ_CHUNK records, each in its own short read
    # transaction, so that memory stays bounded however far the read goes
    monkeypatch.setattr(_lmdb, "_READ_CHUNK", 5)
    events = make_events(24, agents=2)
    with Journal.open(tmp_path / "j") as journal:
        assert isinstance(journal, LmdbJournal)
        journal.append(events)
        chunks = _count_chunks(journal, monkeypatch)
        assert [r.event for r in journal.read()] == events
        assert chunks == [5, 5, 5, 5, 4]
        chunks.clear()
        assert [r.seq for r in journal.read(after=3, until=21)] == list(range(4, 22))
        assert chunks == [5, 5, 5, 3]


def test_a_stream_read_never_hands_out_a_record_of_another_stream(tmp_path: Path) -> None:
    # a1's records are 2, 5, ..., 20; its record 5 relinked to a0's record 4 (read
    # checks no chain): a1's replay must stop there, not take in a0's events
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(20))
    env = lmdb.open(str(path), max_dbs=8, subdir=True)
    try:
        events = env.open_db(b"events")
        with env.begin(write=True, db=events) as txn:
            record = bytearray(txn.get((5).to_bytes(8, "big")) or b"")
            record[-24:-16] = (4).to_bytes(8, "big")  # the trailer ends: link(8) | chain(16)
            txn.put((5).to_bytes(8, "big"), bytes(record))
    finally:
        env.close()

    with Journal.open(path, readonly=True) as journal:
        with pytest.raises(JournalRecordError, match="a record of another stream") as info:
            list(journal.read(stream="agent/a1"))
        assert info.value.seq == 4
        assert [r.seq for r in journal.read(stream="agent/a1", after=5)] == list(range(8, 21, 3))


def _put_raw(path: Path, db: bytes, key: bytes, value: bytes) -> None:
    """Put one entry into a closed journal's database with the plain lmdb package."""
    env = lmdb.open(str(path), max_dbs=8, subdir=True)
    try:
        handle = env.open_db(db)
        with env.begin(write=True, db=handle) as txn:
            txn.put(key, value)
    finally:
        env.close()


def test_a_snapshot_shorter_than_its_header_is_named_truncated(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(3), snapshots=[Snapshot("agent/a0", 1, b"state")])
    _put_raw(path, b"snapshots", b"agent/a0", bytes(range(20)))  # a hash and half a seq

    truncated = "the snapshot of 'agent/a0' is truncated"
    with (
        Journal.open(path, readonly=True) as journal,
        pytest.raises(JournalRecordError, match=truncated) as info,
    ):
        journal.load_snapshot("agent/a0")
    assert info.value.seq == 0  # no seq is named: the bytes that would hold it are cut off


def test_a_bool_is_no_seq_argument_of_read(tmp_path: Path) -> None:
    # read()'s docstring: TypeError when after or until is no int; True would read as 1
    with Journal.open(tmp_path / "j") as journal:
        journal.append(make_events(3))
        with pytest.raises(TypeError, match=r"after is a seq \(an int\), got bool"):
            journal.read(after=True)
        with pytest.raises(TypeError, match=r"until is a seq \(an int\), got bool"):
            journal.read(until=False)


def test_seq_of_finds_an_event_whose_id_is_of_the_longest_length(tmp_path: Path) -> None:
    longest = PrivateSet(at=0.0, agent="a", key="k", value=1, id="i" * 255)
    with Journal.open(tmp_path / "j") as journal:
        assert isinstance(journal, LmdbJournal)
        journal.append([*make_events(2), longest])
        assert journal.seq_of("i" * 255) == 3
        assert journal.seq_of("i" * 256) is None


def test_a_reader_adopts_a_map_another_process_grew(tmp_path: Path) -> None:
    # the reader maps 1 MiB; a writer in another process then grows the map past it,
    # and LMDB tells the reader (MDB_MAP_RESIZED): it adopts the new size and reads on
    path = tmp_path / "j"
    with Journal.open(path, map_size=1 << 20) as journal:
        journal.append(make_events(10))
    writer = textwrap.dedent(
        """
        import sys
        from cogfabric.store import Journal
        from cogfabric.store.testing import make_events
        with Journal.open(sys.argv[1], map_size=1 << 20, sync=False) as journal:
            for start in range(10, 10_010, 500):
                journal.append(make_events(500, start=start, value="x" * 300))
            print(journal.map_size, flush=True)
        """
    )
    with LmdbJournal.open(path, readonly=True, map_size=1 << 20) as reader:
        assert reader.last_seq == 10
        done = subprocess.run(
            [sys.executable, "-c", writer, str(path)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=120,
            check=True,
        )
        assert int(done.stdout) > reader.map_size == 1 << 20  # the writer grew the map past the reader's

        assert reader.last_seq == 10_010
        assert [r.seq for r in reader.read(after=9_990)] == list(range(9_991, 10_011))
        assert reader.map_size == int(done.stdout)


def test_a_read_left_open_across_close_raises_that_the_journal_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each chunk is read in its own transaction: one begun after close() must say so
    monkeypatch.setattr(_lmdb, "_READ_CHUNK", 2)
    journal = Journal.open(tmp_path / "j")
    journal.append(make_events(5))
    records = journal.read()
    assert [next(records).seq, next(records).seq] == [1, 2]
    journal.close()

    with pytest.raises(JournalClosedError):
        next(records)


@pytest.mark.parametrize(
    "stream", ["", "agent/a\0b", "agent/" + "x" * 250], ids=["empty", "NUL", "256 bytes"]
)
def test_a_snapshot_of_a_name_no_stream_can_have_is_refused_and_nothing_is_written(
    tmp_path: Path, stream: str
) -> None:
    # load_snapshot refuses such a name: stored, it could never be loaded (and LMDB
    # itself refuses an empty key, which would make the journal fail-stop)
    with LmdbJournal.open(tmp_path / "j") as journal:
        with pytest.raises(InvalidStreamError, match="must be 1 to 255 UTF-8 bytes without NUL"):
            journal.append(make_events(2), snapshots=[Snapshot(stream, 1, b"state")])

        assert not journal.is_failed
        assert journal.last_seq == 0
        assert journal.append(make_events(1)) == [1]


def test_a_stream_read_that_meets_a_missing_record_names_it(tmp_path: Path) -> None:
    # a1's records are 2, 5, ..., 20: with 5 gone, a replay of a1 must not skip to 8
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(20))
    env = lmdb.open(str(path), max_dbs=8, subdir=True)
    try:
        events = env.open_db(b"events")
        with env.begin(write=True, db=events) as txn:
            assert txn.delete((5).to_bytes(8, "big"))
    finally:
        env.close()

    with Journal.open(path, readonly=True) as journal:
        with pytest.raises(JournalRecordError, match="names a record that is missing") as info:
            list(journal.read(stream="agent/a1"))
        assert info.value.seq == 5
        assert [r.seq for r in journal.read(stream="agent/a1", after=5)] == list(range(8, 21, 3))


def test_an_id_entry_that_is_no_seq_key_is_damage_not_a_seq(tmp_path: Path) -> None:
    # seq_of's docstring: JournalIntegrityError when the id index names no seq of this
    # journal; a one-byte entry reads as seq 3 but is no seq key
    path = tmp_path / "j"
    events = make_events(5)
    with Journal.open(path) as journal:
        journal.append(events)
    _put_raw(path, b"ids", events[0].id.encode(), b"\x03")

    with Journal.open(path) as journal:
        assert isinstance(journal, LmdbJournal)
        with pytest.raises(JournalIntegrityError, match="event id index holds no seq"):
            journal.seq_of(events[0].id)
        with pytest.raises(JournalIntegrityError, match="event id index holds no seq"):
            journal.append([events[0]])  # a retry of it
        assert journal.last_seq == 5
