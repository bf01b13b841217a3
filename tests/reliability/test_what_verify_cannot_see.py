"""README "Guarantees": what verification leaves to others, pinned as documented.

Snapshots are outside the chain: a forger who rehashes one is caught only by
``cogfabric verify``'s comparison with the events, and recovery passes over a snapshot
that holds another agent's state; journals that share a key accept each other's
snapshots; the header's ``engine`` is a label; and LMDB's previous header page, made
current (8 bytes), undoes the last commit without a trace, keyed or not. If one of these
starts to be caught, README's list should change with it.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import struct
from typing import TYPE_CHECKING

import lmdb
import msgspec
from click.testing import CliRunner

from cogfabric.actors import Config, FakeClock, JournalConfig, Runtime
from cogfabric.cli import main
from cogfabric.store import Journal, LmdbJournal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

KEY = b"k" * 32
CONFIG = Config(journal=JournalConfig(snapshot_interval=2))


def _journal(path: Path, value: str, key: bytes | None = None) -> None:
    """Agents "a" and "b", each past a snapshot; a's "origin" is ``value``."""
    with Runtime.open(path, config=CONFIG, clock=FakeClock(), key=key) as rt:
        a, b = rt.spawn("a"), rt.spawn("b")
        a.set_private("origin", value)
        for i in range(4):
            a.set_private("v", f"{value}-{i}")
            b.set_private("v", f"{value}-{i}")


def _put(path: Path, db: bytes, key: bytes, value: bytes) -> None:
    env = lmdb.open(str(path), max_dbs=8)
    try:
        with env.begin(write=True, db=env.open_db(db, create=False)) as txn:
            txn.put(key, value)
    finally:
        env.close()


def _rehash(path: Path, stream: str, seq: int, data: bytes) -> None:
    """File ``data`` as ``stream``'s snapshot at ``seq``, its unkeyed hash recomputed."""
    seq_raw = seq.to_bytes(8, "big")
    digest = hashlib.blake2b(stream.encode() + b"\0" + seq_raw + data, digest_size=16).digest()
    _put(path, b"snapshots", stream.encode(), digest + seq_raw + data)


def test_journals_sharing_a_key_take_each_others_snapshots_and_only_cogfabric_verify_names_it(
    tmp_path: Path,
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    _journal(one, "ONE", KEY)
    _journal(two, "TWO", KEY)
    env = lmdb.open(str(one), max_dbs=8, readonly=True, lock=False)
    try:
        with env.begin(db=env.open_db(b"snapshots", create=False)) as txn:
            stored = txn.get(b"agent/a")  # hash, seq, data: copied as bytes, no key needed
    finally:
        env.close()
    assert stored is not None
    raw = bytes(stored)
    with Journal.open(two, key=KEY, readonly=True) as journal:
        assert int.from_bytes(raw[16:24], "big") <= journal.stream_head("agent/a")
    _put(two, b"snapshots", b"agent/a", raw)

    with Journal.open(two, key=KEY, readonly=True) as journal:
        assert journal.verify(decode=True).ok  # the keyed hash binds stream and seq, not journal
    with Runtime.open(two, key=KEY) as rt:
        recovered = rt.agent("a").private("origin")
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    result = CliRunner().invoke(main, ["verify", str(two), "--key-file", str(key_file)])

    assert recovered == "ONE"  # the other journal's state
    assert result.exit_code == 1, result.output
    assert "agent 'a': its snapshot at seq" in result.output


def test_a_snapshot_holding_another_agents_state_is_passed_over_logged_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "j"
    _journal(path, "x")
    with Journal.open(path, readonly=True) as journal:
        of_b = journal.load_snapshot("agent/b")
        seq = journal.stream_head("agent/a")
    assert of_b is not None
    _rehash(path, "agent/a", seq, of_b.data)  # b's state, filed as a's, at a seq a holds

    with Journal.open(path, readonly=True) as journal:
        assert journal.verify().ok
    with caplog.at_level(logging.WARNING, logger="cogfabric"), Runtime.open(path) as rt:
        private = dict(rt.agent("a").context_view().private)
    result = CliRunner().invoke(main, ["verify", str(path)])

    assert private == {"origin": "x", "v": "x-3"}  # rebuilt from its events
    assert "holds the state of agent 'b'" in caplog.text
    assert result.exit_code == 1
    assert "holds the state of agent 'b'" in result.output


def test_a_forged_snapshot_value_a_later_event_overwrites_is_neither_caught_nor_kept(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Runtime.open(path, config=CONFIG, clock=FakeClock()) as rt:
        a = rt.spawn("a")
        a.set_private("v", "real-1")  # the spawn and this: a snapshot
        a.set_private("v", "real-2")  # overwrites it, no snapshot yet
    with Journal.open(path, readonly=True) as journal:
        snapshot = journal.load_snapshot("agent/a")
        assert snapshot is not None
        assert journal.stream_head("agent/a") > snapshot.seq
    state = msgspec.msgpack.decode(snapshot.data)
    assert state["private"]["v"] == "real-1"
    state["private"]["v"] = "FORGED"
    _rehash(path, "agent/a", snapshot.seq, msgspec.msgpack.encode(state))

    verify = CliRunner().invoke(main, ["verify", str(path)])
    at = CliRunner().invoke(main, ["replay", str(path), "--agent", "a", "--at", str(snapshot.seq), "--json"])
    with Runtime.open(path) as rt:
        recovered = rt.agent("a").private("v")

    assert verify.exit_code == 0, verify.output  # the end states agree
    assert "FORGED" not in at.output  # replay works from the events alone
    assert "real-1" in at.output
    assert recovered == "real-2"  # recovery replays the later event


def test_the_headers_engine_label_can_be_changed_undetected(tmp_path: Path) -> None:
    path = tmp_path / "j"
    _journal(path, "x")
    _put(path, b"meta", b"engine", b"9.9.9-forged")

    with LmdbJournal.open(path, readonly=True) as journal:
        assert journal.verify(decode=True).ok
        assert journal.info()["engine"] == "9.9.9-forged"
    assert CliRunner().invoke(main, ["verify", str(path)]).exit_code == 0


def test_the_previous_header_page_made_current_undoes_the_last_commit_undetected(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path, key=KEY) as journal:
        journal.append(make_events(3))
        journal.append(make_events(2, start=3))
    data = path / "data.mdb"
    raw = bytearray(data.read_bytes())
    txnid = 144  # in a header page: the page header, two database records, then the txnid
    ids = [struct.unpack_from("<Q", raw, page * mmap.PAGESIZE + txnid)[0] for page in (0, 1)]
    older = ids.index(min(ids))
    struct.pack_into("<Q", raw, older * mmap.PAGESIZE + txnid, max(ids) + 1)  # 8 bytes
    data.write_bytes(raw)

    with Journal.open(path, key=KEY, readonly=True) as journal:
        assert journal.verify(decode=True).ok
        assert journal.last_seq == 3  # the last commit is gone, and nothing says so
