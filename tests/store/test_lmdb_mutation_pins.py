"""The LMDB journal pinned where a second mutation test of ``store/_lmdb.py`` found no test holding it.

Each test here failed under a small change of ``store/_lmdb.py`` (a bound, a flag, a
check left out) that every test of ``tests/store``, ``tests/reliability`` and the
argument, CLI and audit tests let through.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING, Any, Final

import lmdb
import pytest

from cogfabric.events import EventCodec, IpcSubscribed, PrivateSet, UnknownEventTypeError
from cogfabric.store import (
    Journal,
    JournalFullError,
    JournalIntegrityError,
    JournalRecordError,
    JournalUnavailableError,
    LmdbJournal,
    _lmdb,
)
from cogfabric.store._record import head_value
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _fill(journal: LmdbJournal, sizes: list[int]) -> None:
    """Append until the journal refuses, noting its map size after every append."""
    for first in range(0, 1_000_000, 200):
        journal.append(make_events(200, start=first, value="x" * 200))
        sizes.append(journal.map_size)


def test_a_full_map_grows_up_to_max_map_size_and_never_past_it(tmp_path: Path) -> None:
    # open(): "it is doubled and the append retried, invisibly, up to this size": a
    # doubling that would pass max_map_size stops at it
    start = 1 << 20
    limit = start + start // 2
    sizes: list[int] = []
    journal = LmdbJournal.open(tmp_path / "j", map_size=start, max_map_size=limit, sync=False)
    try:
        with pytest.raises(JournalFullError):
            _fill(journal, sizes)
        assert journal.map_size == limit
    finally:
        journal.close()
    assert max(sizes) <= limit
    assert limit in sizes  # it grew to the limit before refusing


def test_a_full_map_far_below_max_map_size_is_doubled_not_set_to_the_maximum(tmp_path: Path) -> None:
    start = 1 << 20
    with LmdbJournal.open(tmp_path / "j", map_size=start, max_map_size=1 << 30, sync=False) as journal:
        for first in range(0, 1_000_000, 200):
            journal.append(make_events(200, start=first, value="x" * 200))
            if journal.map_size > start:
                break
        assert journal.map_size == 2 * start


def test_the_writer_lock_is_never_opened_through_a_symbolic_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # open() refuses a journal whose files are links before it takes the lock; a link
    # put in place of writer.lock after that check (a race) must not be followed either
    # (O_NOFOLLOW): the lock file is opened to write, and created where it points
    path = tmp_path / "j"
    path.mkdir()
    target = tmp_path / "elsewhere.lock"
    (path / "writer.lock").symlink_to(target)
    monkeypatch.setattr(_lmdb, "linked_file", lambda _where: None)  # the link came after the check

    with pytest.raises(JournalUnavailableError, match=r"cannot open .* for writing"):
        Journal.open(path)

    assert not target.exists()
    assert not (path / "data.mdb").exists()


def test_a_full_map_reported_by_lmdb_is_a_journal_full_error(tmp_path: Path) -> None:
    # the one place that maps LMDB's errors maps MDB_MAP_FULL to JournalFullError (the
    # writer grows the map first; what is left of it past max_map_size is full, not unavailable)
    error = _lmdb._journal_error(tmp_path, lmdb.MapFullError("full"), "; fail-stop")

    assert type(error) is JournalFullError
    assert str(error) == f"{tmp_path} is full; fail-stop"


def _seq(n: int) -> bytes:
    return n.to_bytes(8, "big")


def _edit(path: Path, edit: Callable[[Any, Any, Any], object]) -> None:
    """Change a closed journal with the plain lmdb package: ``edit(txn, events, meta)``."""
    env = lmdb.open(str(path), max_dbs=8, subdir=True)
    try:
        with env.begin(write=True) as txn:
            edit(txn, env.open_db(b"events", txn=txn), env.open_db(b"meta", txn=txn))
    finally:
        env.close()


def _refusal(path: Path, key: bytes | None = None) -> str:
    with Journal.open(path, key=key) as journal, pytest.raises(JournalIntegrityError) as caught:
        journal.append(make_events(1, start=100))
    return str(caught.value)


@pytest.mark.parametrize("edit", ["records cut off", "head rolled back"])
def test_a_refused_append_names_the_seq_the_head_names_and_where_the_records_end(
    tmp_path: Path, edit: str
) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(20))

    def change(txn: Any, events: Any, meta: Any) -> None:
        if edit == "records cut off":
            txn.delete(_seq(20), db=events)
        else:
            txn.put(b"head", head_value(_seq(10), txn.get(_seq(10), db=events)[-16:], b""), db=meta)

    _edit(path, change)
    named, end = (20, 19) if edit == "records cut off" else (10, 20)

    assert f"its chain head names seq {named}, but its records end at seq {end}" in _refusal(path)


def test_a_keyed_journal_whose_head_was_set_without_the_key_says_so(tmp_path: Path) -> None:
    # the head names the last record and its chain link, but its tag is not the key's
    path, key = tmp_path / "j", b"k" * 16
    with Journal.open(path, key=key) as journal:
        journal.append(make_events(5))

    def unkeyed_head(txn: Any, events: Any, meta: Any) -> None:
        txn.put(b"head", head_value(_seq(5), txn.get(_seq(5), db=events)[-16:], b""), db=meta)

    _edit(path, unkeyed_head)

    assert "the head was set without the journal's key" in _refusal(path, key)


_READER: Final = textwrap.dedent(
    """
    import sys
    from cogfabric.store import Journal
    journal = Journal.open(sys.argv[1], readonly=True)
    txn = journal._env.begin() if sys.argv[2] == "hold" else None  # a reader slot in use
    print("ready", flush=True)
    sys.stdin.read()
    """
)


def test_a_writer_clears_the_reader_slot_of_a_killed_reader_as_it_opens(tmp_path: Path) -> None:
    # A reader killed inside a read transaction leaves its slot in lock.mdb, pinning the
    # pages it saw: the file would grow for as long as another process keeps the lock
    # file open (PITFALLS 1.5). Opening for writing clears such slots (reader_check).
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(3))
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", _READER, str(path), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        for mode in ("hold", "idle")  # the idle one keeps lock.mdb open: LMDB does not reset it
    ]
    try:
        for reader in readers:
            assert reader.stdout is not None
            assert reader.stdout.readline() == "ready\n"
        killed = readers[0]
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)

        with Journal.open(path) as journal:
            assert isinstance(journal, LmdbJournal)
            listed = journal._env.readers().split()

        assert str(killed.pid) not in listed
    finally:
        for reader in readers:  # ends the live one (its stdin closes), closes every pipe
            reader.communicate(input="", timeout=30)


def test_the_last_seq_of_the_seq_space_is_still_given_out(tmp_path: Path) -> None:
    # a record moved (by hand) to 2**64 - 2 leaves room for exactly one more: seq 2**64 - 1
    path, top = tmp_path / "j", 2**64 - 1
    with Journal.open(path) as journal:
        journal.append(make_events(20))  # seq 20 is agent a1's

    def move(txn: Any, events: Any, meta: Any) -> None:
        record = bytes(txn.get(_seq(20), db=events))
        txn.delete(_seq(20), db=events)
        txn.put(_seq(top - 1), record, db=events)
        txn.put(b"head", head_value(_seq(top - 1), record[-16:], b""), db=meta)

    _edit(path, move)

    with Journal.open(path) as journal:
        assert journal.append(make_events(1, start=102)) == [top]  # a0's: its head is whole
        with pytest.raises(JournalIntegrityError, match="no seq is left"):
            journal.append(make_events(1, start=105))


def test_a_codec_of_some_of_the_built_in_types_refuses_a_record_of_another(tmp_path: Path) -> None:
    # Such a codec is pinned, yet a stored record must not be decoded as the union of
    # every built-in type, which would hand out an event of a type the codec lacks.
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append([*make_events(2), IpcSubscribed(at=0.0, agent="a", topic="t")])

    codec = EventCodec([PrivateSet])
    assert codec.pinned is True
    with LmdbJournal.open(path, readonly=True, codec=codec) as journal:
        records = journal.read()
        assert [next(records).seq, next(records).seq] == [1, 2]
        with pytest.raises(JournalRecordError, match="unknown event type 'IpcSubscribed'") as info:
            next(records)

    assert info.value.seq == 3
    assert isinstance(info.value, UnknownEventTypeError)
