"""The journal's contract at its edges: what a mutation test found no test held.

Each test here failed under a small change of the store (a bound off by one, a flag
not handed to LMDB, a check left out) that every other test let through.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import lmdb
import pytest

from cogfabric.events import PrivateSet
from cogfabric.store import (
    InvalidStreamError,
    Journal,
    JournalFullError,
    JournalIntegrityError,
    LmdbJournal,
    Snapshot,
)
from cogfabric.store._record import head_value
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
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


def test_a_last_key_that_is_no_seq_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(3))
    env = lmdb.open(str(path), max_dbs=8)
    events = env.open_db(b"events")
    with env.begin(write=True) as txn:
        record = txn.get(_seq(3), db=events)
        assert record is not None
        txn.put(b"\xff", bytes(record), db=events)
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
