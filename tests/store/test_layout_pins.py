"""The record layout, the ``Journal`` base class's defaults and the page walk at open, pinned.

Each test here failed under a small change of ``store/_record.py``,
``store/_journal.py`` or ``store/_pages.py`` (a bound off by one, a check left out, a
default that stops early) that every other test of the store let through. The
defaults of ``Journal`` are overridden by the LMDB journal, so they are checked on a
backend that keeps them: ``_Defaults``, the LMDB journal's abstract methods and
nothing else. The page tests damage a page found through the plain ``lmdb`` package
and LMDB's own page layout, as tests/reliability/test_damaged_pages.py does.
"""

from __future__ import annotations

import mmap
import struct
from typing import TYPE_CHECKING

import lmdb
import pytest

from cogfabric.store import (
    Journal,
    JournalClosedError,
    JournalDamagedError,
    JournalIntegrityError,
    JournalReadOnlyError,
    LmdbJournal,
    Record,
    Snapshot,
    VerifyReport,
)
from cogfabric.store._record import PREFIX, event_id, parts, stream_part
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from pathlib import Path

    from cogfabric.events import Event, PrivateSet


def _seq(n: int) -> bytes:
    return n.to_bytes(8, "big")


def _record(event: bytes, *, seq: int = 5, stream: bytes = b"agent/a0", link: int = 2) -> bytes:
    """A record framed as the writer frames one (``store/_record.py``), its chain link zeroed."""
    return PREFIX + _seq(seq) + event + stream_part(stream) + _seq(link) + bytes(16)


@pytest.mark.parametrize(("event", "framed"), [(b"", False), (b"\x80", True), (b"\x81\xa2id\xa1x", True)])
def test_a_record_is_framed_with_an_event_of_one_byte_at_least(event: bytes, framed: bool) -> None:
    # MIN_TRAILER_AT: "the prefix and the seq, an event of one byte, the bin16 header".
    # Kills: MIN_TRAILER_AT lowered to 13 (an empty event framed), and the bound
    # checked with <= (an event of one byte refused as malformed)
    taken = parts(_record(event))

    if not framed:
        assert taken is None
    else:
        assert taken is not None
        assert (taken.seq, taken.event, taken.stream, taken.link) == (5, event, b"agent/a0", 2)


def test_a_records_seq_and_link_are_read_whole_to_their_top_byte() -> None:
    # a seq is 8 bytes (a record moved near 2**64 by hand is one too). Kills: the
    # link read from 7 of its 8 bytes, which every seq below 2**56 lets through
    taken = parts(_record(b"\x80", seq=2**63 + 2, link=2**63 + 1))

    assert taken is not None
    assert (taken.seq, taken.link) == (2**63 + 2, 2**63 + 1)


def test_the_id_of_an_event_too_deep_to_decode_is_none_not_an_error() -> None:
    # event_id: "None if it has none"; verify's slow path calls it on stored bytes, which
    # may be anything. Kills: RecursionError left out of the errors event_id answers None for
    deep = b"\x82\xa1v" + b"\x91" * 100_000 + b"\xc0" + b"\xa2id\xa1x"

    assert event_id(deep) is None
    assert event_id(b"\x82\xa1v\x91\xc0\xa2id\xa1x") == b"x"


def test_a_stream_head_naming_a_record_whose_prefix_was_changed_refuses_appends(tmp_path: Path) -> None:
    # append: "JournalIntegrityError: ... a stream's head names no record of that
    # stream". A record not framed as a record (its array head changed) is of no
    # stream. Kills: of_stream not checking the record's prefix
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(6))  # agent/a1 at 2 and 5
    env = lmdb.open(str(path), max_dbs=8)
    try:
        events = env.open_db(b"events")
        with env.begin(write=True, db=events) as txn:
            record = bytearray(txn.get(_seq(5)) or b"")
            assert record[:2] == PREFIX
            record[0] = 0x92
            txn.put(_seq(5), bytes(record))
    finally:
        env.close()

    with Journal.open(path) as journal:
        journal.append(make_events(1, start=6))  # agent/a0's stream is untouched: it appends
        with pytest.raises(JournalIntegrityError, match="head of 'agent/a1' names no record of that stream"):
            journal.append(make_events(1, start=7))  # agent/a1's
        assert journal.last_seq == 7


class _Defaults(Journal):
    """A backend with the LMDB journal's abstract methods and every other method ``Journal``'s own."""

    def __init__(self, inner: LmdbJournal) -> None:
        self.inner = inner

    @property
    def last_seq(self) -> int:
        return self.inner.last_seq

    @property
    def closed(self) -> bool:
        return self.inner.closed

    @property
    def readonly(self) -> bool:
        return self.inner.readonly

    def append(
        self, events: Iterable[Event], *, snapshots: Sequence[Snapshot] = (), validate: bool = True
    ) -> list[int]:
        return self.inner.append(events, snapshots=snapshots, validate=validate)

    def read(self, after: int = 0, until: int | None = None, stream: str | None = None) -> Iterator[Record]:
        return self.inner.read(after, until, stream)

    def streams(self, prefix: str = "") -> list[str]:
        return self.inner.streams(prefix)

    def load_snapshot(self, stream: str) -> Snapshot | None:
        return self.inner.load_snapshot(stream)

    def verify(self, *, after: int = 0, decode: bool = False) -> VerifyReport:
        return self.inner.verify(after=after, decode=decode)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def defaults(tmp_path: Path) -> Iterator[_Defaults]:
    """A ``_Defaults`` of 9 records: agent/a0 at 1, 4, 7; a1 at 2, 5, 8; a2 at 3, 6, 9."""
    with _Defaults(LmdbJournal.open(tmp_path / "j", sync=False)) as journal:
        journal.append(make_events(9))
        yield journal


def test_the_default_stream_head_is_a_streams_newest_record(defaults: _Defaults) -> None:
    # Kills: the default stream_head stopping at the stream's first record
    assert [defaults.stream_head(f"agent/a{n}") for n in range(3)] == [7, 8, 9]
    assert defaults.stream_head("agent/nobody") == 0


def test_the_default_stream_start_is_a_streams_first_record(defaults: _Defaults) -> None:
    # Kills: the default stream_start reading the whole journal, not the stream
    assert [defaults.stream_start(f"agent/a{n}") for n in range(3)] == [1, 2, 3]
    assert defaults.stream_start("agent/nobody") == 0


def test_the_default_record_intact_checks_the_record_itself_and_refuses_a_missing_one(
    tmp_path: Path,
) -> None:
    # "Whether record seq matches its hash-chain link (False when it is missing)".
    # Kills: 0 taken for a record; the last record taken for a missing one; the
    # default verifying after seq (record seq itself unchecked)
    path = tmp_path / "j"
    with _Defaults(LmdbJournal.open(path, sync=False)) as journal:
        journal.append(make_events(6, value="v"))
        assert [journal.record_intact(seq) for seq in (0, 1, 6, 7)] == [False, True, True, False]
    env = lmdb.open(str(path), max_dbs=8)
    try:
        with env.begin(write=True, db=env.open_db(b"events")) as txn:
            record = bytes(txn.get(_seq(4)) or b"")
            assert record.count(b"\xa5value\xa1v") == 1
            txn.put(_seq(4), record.replace(b"\xa5value\xa1v", b"\xa5value\xa1w"))  # its chain link kept
    finally:
        env.close()

    with _Defaults(LmdbJournal.open(path, readonly=True)) as journal:
        assert [journal.record_intact(seq) for seq in (0, 4, 5, 6, 7)] == [False, False, True, True, False]


def test_the_default_check_appendable_refuses_a_closed_and_a_read_only_journal(tmp_path: Path) -> None:
    # Kills: either check of the default check_appendable left out
    path = tmp_path / "j"
    with _Defaults(LmdbJournal.open(path, sync=False)) as journal:
        journal.check_appendable()  # open for writing: nothing to say
    with pytest.raises(JournalClosedError):
        journal.check_appendable()
    with _Defaults(LmdbJournal.open(path, readonly=True)) as journal, pytest.raises(JournalReadOnlyError):
        journal.check_appendable()


_DB = struct.Struct("<IHHQQQQQ")  # LMDB's MDB_db: pad, flags, depth, 4 counters, root
_HEADER = struct.Struct("<QHHHH")  # LMDB's page header: pgno, pad, flags, lower, upper
_PAGE = mmap.PAGESIZE  # LMDB writes pages of the OS page size
_FREE_DB, _MAIN_DB, _LAST_PAGE, _TXNID = 40, 88, 136, 144  # in a meta page: its header, then MDB_meta


def _page(path: Path, pgno: int) -> bytearray:
    with (path / "data.mdb").open("rb") as data:
        data.seek(pgno * _PAGE)
        return bytearray(data.read(_PAGE))


def _write_page(path: Path, pgno: int, page: bytes | bytearray) -> None:
    with (path / "data.mdb").open("r+b") as data:
        data.seek(pgno * _PAGE)
        data.write(page)


def _newest_meta(path: Path) -> bytearray:
    return max((_page(path, 0), _page(path, 1)), key=lambda meta: struct.unpack_from("<Q", meta, _TXNID))


def _leaf_nodes(page: bytes | bytearray) -> list[tuple[int, int, int, bytes]]:
    """A leaf page's nodes: (offset of the node, its flags, its value's size, its key)."""
    _, _, _, lower, _ = _HEADER.unpack_from(page)
    found = []
    for at in struct.unpack_from(f"<{(lower - 16) // 2}H", page, 16):
        lo, hi, flags, key_size = struct.unpack_from("<HHHH", page, at)
        found.append((at, flags, lo | hi << 16, bytes(page[at + 8 : at + 8 + key_size])))
    return found


def _root(meta: bytes | bytearray, at: int) -> int:
    """The root of the one-leaf database whose MDB_db is at ``at`` of ``meta``."""
    _, _, depth, _, _, _, _, root = _DB.unpack_from(meta, at)
    assert depth == 1
    return int(root)


def _refused(path: Path, match: str) -> None:
    for readonly in (True, False):
        with pytest.raises(JournalDamagedError, match=match):
            Journal.open(path, readonly=readonly)


@pytest.fixture
def freed(tmp_path: Path) -> Path:
    """A journal whose snapshot was overwritten four times: its free database, one leaf, lists pages."""
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        for batch in range(5):
            seqs = journal.append(make_events(10, start=batch * 10))
            journal.append((), snapshots=[Snapshot("agent/a0", seqs[-1], bytes(9000))])
    return path


def _first_free_list(path: Path) -> tuple[int, bytearray, int]:
    """The free database's leaf, the page, and where its first free-page list (count, then pages) starts."""
    root = _root(_newest_meta(path), _FREE_DB)
    page = _page(path, root)
    at, flags, _, key = _leaf_nodes(page)[0]
    assert not flags  # the list is inside the page
    return root, page, at + 8 + len(key)


def test_a_free_page_list_whose_count_disagrees_with_its_pages_is_refused(freed: Path) -> None:
    # "each list in order, of pages LMDB allocated": LMDB reads the count. Kills: the
    # count left unchecked against the pages the list holds
    root, page, listed = _first_free_list(freed)
    (count,) = struct.unpack_from("<Q", page, listed)
    assert count >= 2
    struct.pack_into("<Q", page, listed, count - 1)
    _write_page(freed, root, page)

    _refused(freed, f"page {root} of its free database holds a free-page list LMDB cannot reuse")


def test_a_free_page_list_naming_the_first_page_lmdb_never_allocated_is_refused(freed: Path) -> None:
    # "of pages LMDB allocated": its last page + 1 is one it did not. Kills: the bound
    # checked with <= (the walk then failed on an IndexError, not as damage)
    (last_page,) = struct.unpack_from("<Q", _newest_meta(freed), _LAST_PAGE)
    root, page, listed = _first_free_list(freed)
    (first,) = struct.unpack_from("<Q", page, listed + 8)
    assert first < last_page + 1  # the highest page of the list, which runs in descending order
    struct.pack_into("<Q", page, listed + 8, last_page + 1)
    _write_page(freed, root, page)

    _refused(freed, f"page {root} of its free database holds a free-page list LMDB cannot reuse")


def test_a_free_page_list_of_the_transaction_after_the_files_last_is_refused(freed: Path) -> None:
    # "of past transactions": the committed one is the last. Kills: the bound off by one
    (txnid,) = struct.unpack_from("<Q", _newest_meta(freed), _TXNID)
    root = _root(_newest_meta(freed), _FREE_DB)
    page = _page(freed, root)
    at, _, _, key = _leaf_nodes(page)[-1]  # the latest list: its key may rise to txnid + 1 in order
    assert len(key) == 8
    assert struct.unpack_from("<Q", page, at + 8)[0] <= txnid  # the last commit may free pages too
    struct.pack_into("<Q", page, at + 8, txnid + 1)
    _write_page(freed, root, page)

    _refused(freed, f"holds a record of transaction {txnid + 1}, past the file's last \\({txnid}\\)")


def _db_leaf(path: Path, db: bytes, events: list[PrivateSet]) -> tuple[int, bytearray]:
    """A journal at ``path`` holding ``events``: the root leaf of its database ``db``, and that page."""
    with Journal.open(path) as journal:
        journal.append(events)
    main = _page(path, _root(_newest_meta(path), _MAIN_DB))
    (db_at,) = (at + 8 + len(key) for at, _, _, key in _leaf_nodes(main) if key == db)
    leaf = _root(main, db_at)
    return leaf, _page(path, leaf)


def _large_record(tmp_path: Path) -> tuple[Path, int, bytearray, tuple[int, int, int, bytes]]:
    """A journal of one record on overflow pages: its path, the leaf, the page, the record's node."""
    path = tmp_path / "j"
    leaf, page = _db_leaf(path, b"events", make_events(1, value="x" * 20_000))
    (node,) = _leaf_nodes(page)
    assert node[1] == 1  # F_BIGDATA: the value is on overflow pages
    return path, leaf, page, node


def test_a_value_reaching_into_the_last_bytes_past_its_overflow_pages_is_refused(tmp_path: Path) -> None:
    # "overflow pages long enough for it": the first page's header takes 16 bytes of
    # them. Kills: the header left out of the length the pages must hold
    path, leaf, page, (at, _, _, key) = _large_record(tmp_path)
    (first,) = struct.unpack_from("<Q", page, at + 8 + len(key))
    (count,) = struct.unpack_from("<I", _page(path, first), 12)  # mp_pages
    size = count * _PAGE - 8  # 8 bytes more than the pages hold past their header
    struct.pack_into("<HH", page, at, size & 0xFFFF, size >> 16)
    _write_page(path, leaf, page)

    _refused(path, f"page {first} of its events database holds {count} pages, too few for a value of {size}")


def test_a_database_record_shorter_than_lmdbs_is_refused(tmp_path: Path) -> None:
    # the walk reads each named database's MDB_db (48 bytes). Kills: its length left
    # unchecked (the walk then failed on a struct.error, not as damage)
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(3))
    root = _root(_newest_meta(path), _MAIN_DB)
    page = _page(path, root)
    (at,) = (at for at, flags, _, key in _leaf_nodes(page) if key == b"events" and flags == 2)  # F_SUBDATA
    struct.pack_into("<H", page, at, 40)  # the value's size
    _write_page(path, root, page)

    _refused(path, f"page {root} of its main database holds a database record of 40 bytes")


def test_a_header_giving_lmdbs_main_database_other_flags_is_refused(tmp_path: Path) -> None:
    # "the header gives LMDB's free and main databases the flags LMDB gives them".
    # Kills: the main database's flags left unchecked (only the free one's checked)
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(3))
    for meta in (0, 1):
        page = _page(path, meta)
        assert struct.unpack_from("<H", page, _MAIN_DB + 4) == (0,)
        struct.pack_into("<H", page, _MAIN_DB + 4, 0x02)  # MDB_REVERSEKEY
        _write_page(path, meta, page)

    _refused(path, "its header gives LMDB's main database the flags 0x2")


def test_a_free_database_record_keyed_by_other_than_a_txnid_is_refused(freed: Path) -> None:
    # "the free database's records are page lists ... of past transactions": a key of
    # 8 bytes. Kills: the key's length left unchecked (the walk then failed on a
    # struct.error, not as damage)
    root, page, listed = _first_free_list(freed)
    at = listed - 8 - 8  # the node: its header (8 bytes), then its 8-byte key
    struct.pack_into("<H", page, at + 6, 4)  # mn_ksize
    _write_page(freed, root, page)

    _refused(freed, f"page {root} of its free database holds a record keyed by 4 bytes, not a transaction")


def test_a_free_page_list_of_a_length_no_page_numbers_make_is_refused(freed: Path) -> None:
    # a list is 8-byte page numbers. Kills: a length that is no multiple of 8 left
    # unchecked (the walk then failed on a struct.error, not as damage)
    root, page, listed = _first_free_list(freed)
    at = listed - 8 - 8
    (size,) = struct.unpack_from("<H", page, at)
    struct.pack_into("<H", page, at, size - 1)
    _write_page(freed, root, page)

    _refused(freed, f"page {root} of its free database holds a free-page list of {size - 1} bytes")


def test_an_id_leaf_whose_nodes_all_carry_one_flag_is_refused(tmp_path: Path) -> None:
    # "every node lies inside its page, or holds a value on overflow pages": a leaf of
    # many nodes of one header is checked in a few calls; a flag they all carry is
    # still one a node of the id index never has. Kills: that fast check not looking
    # at the flags
    path = tmp_path / "j"
    leaf, page = _db_leaf(path, b"ids", make_events(60))
    nodes = _leaf_nodes(page)
    assert len(nodes) >= 32  # store/_pages.py's _TILED_FROM: the fast check's case
    for at, _, _, _ in nodes:
        struct.pack_into("<H", page, at + 4, 0x04)  # F_DUPDATA, in a database without duplicates
    _write_page(path, leaf, page)

    _refused(path, f"page {leaf} of its ids database has a node at offset \\d+ with flags 0x4")


def test_a_node_whose_overflow_page_number_runs_past_its_page_is_refused(tmp_path: Path) -> None:
    # "every node lies inside its page": a value on overflow pages leaves its first
    # page's number (8 bytes) in the node. Kills: that number's length left out of the
    # node's (the walk then failed on a struct.error, not as damage)
    path, leaf, page, (at, _, _, key) = _large_record(tmp_path)
    key_size = _PAGE - 4 - 8 - at  # the page number's first 4 bytes inside the page, the rest past it
    assert key_size > len(key)
    struct.pack_into("<H", page, at + 6, key_size)
    _write_page(path, leaf, page)

    _refused(path, f"page {leaf} of its events database has a node at offset {at} running past it")


def test_a_leaf_whose_free_space_bounds_cross_by_one_offset_is_refused(tmp_path: Path) -> None:
    # "its free-space bounds and node offsets lie inside it": the free space runs from
    # lower up to upper (LMDB takes upper - lower as its size). Kills: bounds that
    # cross by two bytes let through
    path = tmp_path / "j"
    leaf, page = _db_leaf(path, b"events", make_events(3))
    _, _, _, lower, _ = _HEADER.unpack_from(page)
    struct.pack_into("<H", page, 14, lower - 2)  # mp_upper, below mp_lower
    _write_page(path, leaf, page)

    _refused(path, f"page {leaf} of its events database has free space from {lower} to {lower - 2}")


def test_the_default_read_back_is_a_streams_read_newest_first(defaults: _Defaults) -> None:
    assert [r.seq for r in defaults.read_back("agent/a1")] == [8, 5, 2]
    assert [r.seq for r in defaults.read_back("agent/a1", before=8)] == [5, 2]
    assert list(defaults.read_back("agent/a1", before=1)) == []
    assert list(defaults.read_back("agent/a1", before=-5)) == []
    for wrong in (True, 3.0, "8"):
        with pytest.raises(TypeError, match="before is a seq"):
            defaults.read_back("agent/a1", before=wrong)  # type: ignore[arg-type]
