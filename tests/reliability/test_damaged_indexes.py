"""Damage outside the records (indexes, header, snapshots), found by fuzzing: typed errors, never accepted."""

from __future__ import annotations

import hashlib
import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
from typing import TYPE_CHECKING, Any

import lmdb
import msgspec
import pytest
from click.testing import CliRunner

from cogfabric import CogfabricError
from cogfabric._audit import agent_view, open_for_audit
from cogfabric.actors import FakeClock, Runtime
from cogfabric.cli import main
from cogfabric.events import PrivateSet
from cogfabric.store import (
    Journal,
    JournalDamagedError,
    JournalFormatError,
    JournalHeaderError,
    JournalIntegrityError,
    JournalUnavailableError,
    LmdbJournal,
    _lmdb,
)
from cogfabric.store._record import PREFIX, head_value, stream_part
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _put(path: Path, db: bytes, key: bytes, value: bytes) -> None:
    env = lmdb.open(str(path), max_dbs=8)
    try:
        handle = env.open_db(db)
        with env.begin(write=True, db=handle) as txn:
            txn.put(key, value)
    finally:
        env.close()


def _get(path: Path, db: bytes, key: bytes) -> bytes:
    env = lmdb.open(str(path), max_dbs=8, readonly=True)
    try:
        with env.begin(db=env.open_db(db, create=False)) as txn:
            value = txn.get(key)
            assert value is not None
            return bytes(value)
    finally:
        env.close()


def _journal_of_three(tmp_path: Path) -> Path:
    """A journal of three events at ``tmp_path / "j"``."""
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(3))
    return path


def test_an_id_index_entry_without_a_seq_is_reported_by_verify_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "j"
    events = make_events(10)
    with Journal.open(path) as journal:
        journal.append(events)
    _put(path, b"ids", events[0].id.encode(), b"")

    with Journal.open(path, readonly=True) as journal:
        report = journal.verify()

    assert not report.ok
    assert report.first_bad_seq == 1
    assert "id index" in report.reason
    with Runtime.open(path, clock=FakeClock(), allow_unverified=True):
        pass


@pytest.mark.parametrize("stored", [b"\xff" * 9, b"", (99).to_bytes(8, "big")])
def test_a_retry_whose_id_entry_names_no_seq_is_refused_as_damage(tmp_path: Path, stored: bytes) -> None:
    path = tmp_path / "j"
    event = PrivateSet(at=1.0, agent="a", key="k", value=1)
    with Journal.open(path) as journal:
        journal.append([event])
    _put(path, b"ids", event.id.encode(), stored)

    with Journal.open(path) as journal, pytest.raises(JournalIntegrityError, match="event id index"):
        journal.append([event])


def test_a_stream_head_with_an_impossible_count_refuses_appends_with_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        runtime.spawn("a").set_private("k", 1)
    head = _get(path, b"heads", b"agent/a")
    _put(path, b"heads", b"agent/a", head[:8] + (2**64 - 1).to_bytes(8, "big") + head[16:])

    with Journal.open(path) as journal, pytest.raises(JournalIntegrityError, match="agent/a"):
        journal.append([PrivateSet(at=1.0, agent="a", key="k", value=2)])
    with (
        Runtime.open(path, clock=FakeClock(), allow_unverified=True) as runtime,
        pytest.raises(CogfabricError),
    ):
        runtime.agent("a").set_private("k", 3)


def test_a_header_database_recreated_with_duplicates_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j"
    key = b"k" * 32  # a keyed header: LMDB keeps no empty value under duplicates
    with Journal.open(path, key=key) as journal:
        journal.append(make_events(3))
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True) as txn:
        meta = env.open_db(b"meta", txn=txn)
        items = list(txn.cursor(db=meta).iternext())
        txn.drop(meta, delete=True)
        dup = env.open_db(b"meta", txn=txn, dupsort=True)
        for key, value in items:
            txn.put(key, value, db=dup)
    env.close()

    for readonly in (True, False):
        with pytest.raises(JournalHeaderError, match="meta database has LMDB flags"):
            Journal.open(path, readonly=readonly, key=key)


def _forge_snapshot(path: Path, stream: bytes, change: Callable[[dict[str, Any], bytes], bytes]) -> None:
    """Rewrite a snapshot of an unkeyed journal and its hash, as anyone can (no re-chaining)."""
    value = _get(path, b"snapshots", stream)
    seq_raw, data = value[16:24], value[24:]
    forged = change(msgspec.msgpack.decode(data), data)
    digest = hashlib.blake2b(stream + b"\0" + seq_raw + forged, digest_size=16).digest()
    _put(path, b"snapshots", stream, digest + seq_raw + forged)


def _two_agents_with_snapshots(path: Path) -> None:
    with Runtime.open(path, clock=FakeClock(), config={"journal": {"snapshot_interval": 5}}) as runtime:
        a, b = runtime.spawn("a", task_id="t"), runtime.spawn("b", task_id="t")
        for i in range(12):
            a.set_private("balance", i)
            b.set_private("owner", "b")


def test_a_snapshot_holding_another_agents_state_is_passed_over(tmp_path: Path) -> None:
    path = tmp_path / "j"
    _two_agents_with_snapshots(path)
    data_b = _get(path, b"snapshots", b"agent/b")[24:]
    _forge_snapshot(path, b"agent/a", lambda _state, _data: data_b)

    with Runtime.open(path, clock=FakeClock()) as runtime:
        assert sorted(runtime.agents()) == ["a", "b"]
        assert runtime.agent("a").context_view().private == {"balance": 11}


def test_the_audit_replay_rebuilds_an_agent_from_its_events_not_a_forged_snapshot(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j"
    _two_agents_with_snapshots(path)

    def approve(state: dict[str, Any], _data: bytes) -> bytes:
        state["private"]["approved_by"] = "mallory"
        return msgspec.msgpack.encode(state)

    _forge_snapshot(path, b"agent/a", approve)

    with LmdbJournal.open(path, readonly=True) as journal:
        view = agent_view(journal, "a", None)
    assert view is not None
    assert view["private"] == {"balance": 11}


def test_a_tail_check_of_a_journal_whose_stream_index_was_emptied_refuses_it(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        runtime.spawn("lead").set_private("k", 1)
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"heads", txn=txn), delete=False)
    env.close()

    with pytest.raises(JournalIntegrityError, match="missing from the stream index"):
        Runtime.open(path, clock=FakeClock(), verify="tail")


_META_OFFSETS = {"page size": 16 + 24, "last page": 16 + 120}


def _page_size(path: Path) -> int:
    """The data file's page size, from its first meta page (``mm_dbs[0].md_pad``)."""
    with (path / "data.mdb").open("rb") as data:
        (size,) = struct.unpack("<I", data.read(64)[16 + 24 : 16 + 28])
    return int(size)


@pytest.mark.parametrize("field", _META_OFFSETS)
def test_a_damaged_header_length_is_refused_and_the_file_left_as_it_is(tmp_path: Path, field: str) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(20))
    data = path / "data.mdb"
    raw = bytearray(data.read_bytes())
    at = _META_OFFSETS[field]
    for meta in (0, _page_size(path)):  # both meta pages, so that the newer one is damaged too
        (value,) = struct.unpack_from("<I" if field == "page size" else "<Q", raw, meta + at)
        struct.pack_into("<I" if field == "page size" else "<Q", raw, meta + at, value ^ (1 << 28))
    data.write_bytes(bytes(raw))
    size = data.stat().st_size

    for readonly in (True, False):
        with pytest.raises(JournalDamagedError, match="is damaged"):
            Journal.open(path, readonly=readonly)
    assert data.stat().st_size == size


def test_an_audit_reports_a_page_lmdb_would_crash_on_instead_of_dying(tmp_path: Path) -> None:
    # A zeroed B-tree page makes LMDB abort the process (an assertion): the audit
    # commands read every page in a child first and report the damage, exit 1.
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        for _ in range(20):
            journal.append(make_events(50))
    with (path / "data.mdb").open("r+b") as data:
        data.seek(20 * _page_size(path))  # a leaf of the records, in this layout
        data.write(bytes(4096))

    for command in (["verify"], ["export", "--no-verify"]):
        done = subprocess.run(
            [sys.executable, "-m", "cogfabric", command[0], str(path), *command[1:]],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=120,
            check=False,
        )
        assert done.returncode == 1, (command, done.returncode, done.stderr[-2000:])
        assert "is damaged" in done.stderr


def test_an_emptied_data_file_is_refused_for_reading_and_said_so_when_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _journal_of_three(tmp_path)
    (path / "data.mdb").write_bytes(b"")

    with pytest.raises(JournalFormatError, match="data file is empty"):
        Journal.open(path, readonly=True)
    with Journal.open(path) as journal:
        assert journal.last_seq == 0
    assert "data file is empty; a new journal is started" in caplog.text


def _fake_child(monkeypatch: pytest.MonkeyPatch, status: int) -> None:
    """Make the audit's page check see its child end with ``status`` (no fork happens)."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)  # whatever other tests left running
    monkeypatch.setattr(os, "fork", lambda: 4242)
    monkeypatch.setattr(os, "waitpid", lambda pid, _options: (pid, status))


@pytest.mark.parametrize("signal_number", [signal.SIGABRT, signal.SIGBUS])
def test_the_page_check_calls_a_crashed_child_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal_number: int
) -> None:
    path = _journal_of_three(tmp_path)
    _fake_child(monkeypatch, signal_number)  # a wait status of a death by that signal

    with pytest.raises(JournalDamagedError, match="LMDB crashed"), open_for_audit(path):
        pass


@pytest.mark.parametrize("signal_number", [9, 15, 40])
def test_the_page_check_does_not_call_a_child_killed_from_outside_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signal_number: int
) -> None:
    path = _journal_of_three(tmp_path)
    _fake_child(monkeypatch, signal_number)

    with pytest.raises(JournalUnavailableError, match="stopped from outside") as caught, open_for_audit(path):
        pass
    assert not isinstance(caught.value, JournalDamagedError)


def test_an_audit_goes_on_without_the_page_check_when_it_cannot_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal_of_three(tmp_path)

    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(os, "fork", no_fork)
    with open_for_audit(path) as journal:
        assert journal.verify().ok


def _count_walks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record each walk of the pages in this process (a forked child's are its own)."""
    walks: list[Path] = []
    real = _lmdb._walk_pages

    def counted(env: lmdb.Environment, where: Path, *short: tuple[int, int]) -> None:
        walks.append(where)
        real(env, where, *short)

    monkeypatch.setattr(_lmdb, "_walk_pages", counted)
    return walks


@pytest.mark.parametrize("copy", [False, True])
def test_an_audit_walks_the_pages_once_when_its_child_got_through_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copy: bool
) -> None:
    path = _journal_of_three(tmp_path)
    walks = _count_walks(monkeypatch)
    _fake_child(monkeypatch, 0)  # the child exited 0: it opened the journal (a walk) and read it all

    with open_for_audit(path, copy=copy) as journal:
        assert journal.verify().ok
    assert walks == []


def test_an_audit_walks_the_pages_itself_when_its_child_did_not_get_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal_of_three(tmp_path)
    walks = _count_walks(monkeypatch)
    _fake_child(monkeypatch, 1 << 8)  # the child exited 1: its open or its reads raised

    with open_for_audit(path) as journal:
        assert journal.verify().ok
    assert walks == [path]

    walks.clear()
    monkeypatch.setattr(threading, "active_count", lambda: 2)  # no fork beside other threads
    with open_for_audit(path) as journal:
        assert journal.verify().ok
    assert walks == [path]


@pytest.mark.parametrize("copy", [False, True])
def test_an_audit_names_damage_its_walk_finds_also_after_its_child_met_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copy: bool
) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        for batch in range(20):
            journal.append(make_events(50, start=batch * 50))
    env = lmdb.open(str(path), readonly=True, max_dbs=8)
    try:
        with env.begin() as txn:
            record = txn.get(b"events")
    finally:
        env.close()
    assert record is not None
    root = struct.unpack("<IHHQQQQQ", record)[-1]
    page = _page_size(path)
    with (path / "data.mdb").open("r+b") as data:
        data.seek(root * page)
        data.write(bytes(page))
    monkeypatch.setattr(threading, "active_count", lambda: 1)  # a real child, whatever else runs here

    named = f"page {root} of its events database stores page number 0"
    with pytest.raises(JournalDamagedError, match=named), open_for_audit(path, copy=copy):
        pass


def test_a_zeroed_second_header_page_is_named_as_such_and_the_file_left_as_it_is(tmp_path: Path) -> None:
    path = _journal_of_three(tmp_path)
    page = _page_size(path)
    data = path / "data.mdb"
    raw = bytearray(data.read_bytes())
    raw[page : 2 * page] = bytes(page)
    data.write_bytes(bytes(raw))

    for readonly in (True, False):
        with pytest.raises(JournalDamagedError, match="second header page"):
            Journal.open(path, readonly=readonly)
    assert data.read_bytes() == bytes(raw)


@pytest.mark.parametrize(("header", "at"), [(1, 0), (1, 4), (0, 4)])
def test_one_header_page_without_lmdbs_magic_or_version_is_damage_not_another_format(
    tmp_path: Path, header: int, at: int
) -> None:
    # LMDB refuses the file as not its own (MDB_INVALID) or of another version
    # (MDB_VERSION_MISMATCH): with the other header page whole, it is a damaged
    # journal (exit 1 in the audit commands), not a path that is no journal (exit 2)
    path = _journal_of_three(tmp_path)
    page = _page_size(path)
    data = path / "data.mdb"
    raw = bytearray(data.read_bytes())
    raw[header * page + 16 + at] ^= 0x04  # the meta record's magic (at 0) or version (at 4)
    data.write_bytes(bytes(raw))

    for readonly in (True, False):
        with pytest.raises(JournalDamagedError, match=f"header page {header} "):
            Journal.open(path, readonly=readonly)
    assert data.read_bytes() == bytes(raw)
    result = CliRunner().invoke(main, ["verify", str(path)])
    assert result.exit_code == 1, result.output
    assert "damaged" in result.output


def test_both_header_pages_of_another_lmdb_data_version_are_lmdbs_refusal_not_damage(tmp_path: Path) -> None:
    # a file of another LMDB, both headers alike: LMDB's own refusal stands (exit 2 in
    # the audit commands), and the file is left as it is
    path = _journal_of_three(tmp_path)
    page = _page_size(path)
    data = path / "data.mdb"
    raw = bytearray(data.read_bytes())
    for header in (0, 1):
        raw[header * page + 16 + 4] ^= 0x04  # the meta record's version: 5, not 1
    data.write_bytes(bytes(raw))

    for readonly in (True, False):
        with pytest.raises(JournalUnavailableError, match="data format v5") as raised:
            Journal.open(path, readonly=readonly)
        assert not isinstance(raised.value, JournalDamagedError)
    assert data.read_bytes() == bytes(raw)
    result = CliRunner().invoke(main, ["verify", str(path)])
    assert result.exit_code == 2, result.output


@pytest.mark.parametrize("extra", [16, 40])
def test_a_data_file_cut_inside_its_second_header_page_is_named_by_its_length(
    tmp_path: Path, extra: int
) -> None:
    # too short to hold the second header's meta record: the length check names it,
    # not a traceback from reading a header that is not there
    path = _journal_of_three(tmp_path)
    page = _page_size(path)
    data = path / "data.mdb"
    cut = data.read_bytes()[: page + extra]
    data.write_bytes(cut)

    with pytest.raises(JournalDamagedError, match="data file is"):
        Journal.open(path, readonly=True)
    assert data.read_bytes() == cut


@pytest.mark.parametrize(
    ("at", "bit"),
    [(41, 4), (44, 4), (90, 0), (92, 4)],
    ids=["free db page size", "free db flags", "main db pad", "main db flags"],
)
def test_a_damaged_field_of_the_newest_header_page_is_damage_not_another_format(
    tmp_path: Path, at: int, bit: int
) -> None:
    # LMDB refuses the field with MDB_INVALID, which alone reads as "not a journal"
    # (exit 2): both header pages hold LMDB's magic number and version, so it is damage
    path = _journal_of_three(tmp_path)
    page = _page_size(path)
    data = path / "data.mdb"
    raw = bytearray(data.read_bytes())
    newest = max((0, 1), key=lambda n: struct.unpack_from("<Q", raw, n * page + 16 + 128)[0])
    raw[newest * page + at] ^= 1 << bit
    data.write_bytes(bytes(raw))

    result = CliRunner().invoke(main, ["verify", str(path)])
    assert result.exit_code == 1, result.output
    assert "is damaged" in result.output
    assert data.read_bytes() == bytes(raw)


def test_a_forged_record_of_an_empty_stream_name_is_reported_by_verify_not_raised(tmp_path: Path) -> None:
    # An unkeyed journal's chain anyone can recompute: one record appended by hand under
    # the stream name b"", its id indexed. The heads check looked that name up in LMDB,
    # which refuses an empty key: verify raised a storage error (exit 2 in the CLI).
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(10))
    event = make_events(1, start=500)[0]
    env = lmdb.open(str(path), max_dbs=8)
    events, ids, meta = (env.open_db(name) for name in (b"events", b"ids", b"meta"))
    with env.begin(write=True) as txn:
        cursor = txn.cursor(db=events)
        assert cursor.last()
        last, prev = int.from_bytes(cursor.key(), "big"), bytes(cursor.value())[-16:]
        key = (last + 1).to_bytes(8, "big")
        body = PREFIX + key + msgspec.msgpack.encode(event) + stream_part(b"") + bytes(8)
        chain = hashlib.blake2b(prev + body, digest_size=16).digest()
        txn.put(key, body + chain, db=events)
        txn.put(event.id.encode(), key, db=ids)
        txn.put(b"head", head_value(key, chain, b""), db=meta)
    env.close()

    with Journal.open(path, readonly=True) as journal:
        report = journal.verify()

    assert (report.ok, report.first_bad_seq) == (False, 11)
    assert report.reason == "the record's stream name b'' is one no writer makes"


def test_an_id_entry_recut_with_its_seq_in_its_key_is_reported_also_after_a_retry_wrote_it_again(
    tmp_path: Path,
) -> None:
    # ids[id] = seq rewritten as ids[id + seq] = b"": the same bytes, so the same digest
    # of id and seq, where verify once summed them whatever their lengths (no key needed)
    path = tmp_path / "j"
    events = make_events(5)
    with Journal.open(path) as journal:
        journal.append(events)
    id_raw = events[2].id.encode()
    env = lmdb.open(str(path), max_dbs=8)
    try:
        with env.begin(write=True, db=env.open_db(b"ids")) as txn:
            seq_raw = txn.pop(id_raw)
            assert seq_raw is not None
            txn.put(id_raw + seq_raw, b"")
    finally:
        env.close()

    with Journal.open(path) as journal:
        report = journal.verify()
        # an append trusts the index (it reads no records): the retry is stored again
        assert journal.append([events[2]]) == [6]
        again = journal.verify()

    for found in (report, again):
        assert not found.ok
        assert found.first_bad_seq == 3  # the record whose id lost its entry
        assert "id index" in found.reason
    with pytest.raises(JournalIntegrityError, match="event id index"):
        Runtime.open(path, clock=FakeClock())


def test_the_index_digests_hash_each_entry_behind_a_fresh_secret_each_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ids and anchors are checked by sums of Python's hash() of their entries, which
    # is SipHash under the process's seed: PYTHONHASHSEED=0 makes that key known, and
    # with a known key forged entries that sum to the true digest can be computed. Each
    # check puts a fresh random prefix before every entry it hashes, which no forger
    # knows in advance: the same journal's entries are hashed as other bytes each time.
    import cogfabric.store._verify as verify_module  # noqa: PLC0415 - the module's own hash

    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(200))  # some streams reach an anchor (every 64th record)
    hashed: list[set[bytes]] = []

    def recorded(data: bytes) -> int:
        hashed[-1].add(bytes(data))
        return hash(data)

    monkeypatch.setattr(verify_module, "hash", recorded, raising=False)
    with Journal.open(path, readonly=True) as journal:
        for _ in range(2):
            hashed.append(set())
            assert journal.verify().ok

    first, second = hashed
    assert len(first) == len(second) > 200  # each id entry and anchor (both sides hash the same bytes)
    assert not first & second


def _verify_whose_page_check_reads_with(
    path: Path, reader: str, setup: str = ""
) -> subprocess.CompletedProcess[str]:
    """``cogfabric verify path`` in a fresh process (one thread: the page check forks) whose
    page-checking child runs ``reader`` (lines of a function of ``journal``; ``read(journal)``
    reads every page), after ``setup`` in the process."""
    script = "\n".join(
        [
            "import os, signal, sys",
            "import cogfabric._audit as audit",
            "from cogfabric.cli import main",
            "read = audit._read_every_page",
            "def reader(journal):",
            textwrap.indent(reader, "    "),
            setup,
            "audit._read_every_page = reader",
            f"sys.argv = ['cogfabric', 'verify', {str(path)!r}]",
            "main()",
        ]
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT"])
def test_the_page_checking_child_dies_of_a_stop_signal_and_the_audit_says_so(
    tmp_path: Path, stop: str
) -> None:
    # The command line turns SIGTERM into an exception: the forked child inherited that
    # handler, unwound into its own exit status 1 (read as "its open failed", so the
    # check was skipped) and verify said ok. It must die of the signal, as any process.
    path = _journal_of_three(tmp_path)

    # the child only: the parent waits for it
    done = _verify_whose_page_check_reads_with(path, f"os.kill(os.getpid(), signal.{stop})")

    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"the check of its pages was stopped from outside ({stop}); audit it again" in done.stderr
    assert "ok:" not in done.stdout


def test_the_page_checking_child_keeps_a_stop_signal_its_audit_ignores(tmp_path: Path) -> None:
    # A shell starts `cogfabric verify J &` with SIGINT ignored: a Ctrl-C meant for
    # something else must not stop the child's check (it was put back to its default).
    path = _journal_of_three(tmp_path)

    done = _verify_whose_page_check_reads_with(
        path,
        "os.kill(os.getpid(), signal.SIGINT)\nread(journal)",  # the child only, which ignores it
        setup="signal.signal(signal.SIGINT, signal.SIG_IGN)",
    )

    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.startswith("ok: 3 records verified")


def test_a_second_interrupt_while_the_killed_child_is_reaped_still_reaps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Ctrl-C during the wait kills the child; a second one during the wait for that
    # kill left it a zombie in a long-lived process.
    path = _journal_of_three(tmp_path)
    waits: list[int] = []
    killed: list[tuple[int, int]] = []

    def waitpid(pid: int, _options: int) -> tuple[int, int]:
        waits.append(pid)
        if len(waits) <= 2:  # the wait, then the first wait for the kill
            raise KeyboardInterrupt
        return pid, signal.SIGKILL

    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(os, "fork", lambda: 4242)
    monkeypatch.setattr(os, "waitpid", waitpid)
    monkeypatch.setattr(os, "kill", lambda pid, number: killed.append((pid, number)))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())

    with pytest.raises(KeyboardInterrupt), open_for_audit(path):
        pass

    assert killed == [(4242, signal.SIGKILL)]
    assert waits == [4242, 4242, 4242]  # reaped
    assert signal.pthread_sigmask(signal.SIG_BLOCK, ()) == mask
