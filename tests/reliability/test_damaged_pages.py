"""Damaged B-tree pages of the data file: a typed error at open, never a crashed process.

LMDB has no checksums and aborts the process (an assertion) when a cursor steps onto
a page damaged in place. ``Journal.open`` walks every page first (store/_pages.py).
Each test damages a page found through the plain ``lmdb`` package and LMDB's own
page layout, not through the walk under test.
"""

from __future__ import annotations

import mmap
import struct
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import lmdb
import pytest
from click.testing import CliRunner

from cogfabric.actors import Config, JournalConfig, Runtime
from cogfabric.cli import main
from cogfabric.store import Journal, JournalDamagedError, JournalFormatError, Snapshot, _lmdb, _pages
from cogfabric.store._pages import _shown
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path

_DB = struct.Struct("<IHHQQQQQ")  # LMDB's MDB_db: pad, flags, depth, 4 counters, root
_HEADER = struct.Struct("<QHHHH")  # LMDB's page header: pgno, pad, flags, lower, upper
_PAGE = mmap.PAGESIZE  # LMDB writes pages of the OS page size


def _tree(path: Path, name: bytes) -> tuple[int, int]:
    """The depth and root page of the named database, from its record in LMDB's main database."""
    env = lmdb.open(str(path), readonly=True, max_dbs=8)
    try:
        with env.begin() as txn:
            raw = txn.get(name)
    finally:
        env.close()
    assert raw is not None
    _, _, depth, _, _, _, _, root = _DB.unpack(raw)
    return depth, root


def _page(path: Path, pgno: int) -> bytearray:
    with (path / "data.mdb").open("rb") as data:
        data.seek(pgno * _PAGE)
        return bytearray(data.read(_PAGE))


def _write_page(path: Path, pgno: int, page: bytes | bytearray) -> None:
    with (path / "data.mdb").open("r+b") as data:
        data.seek(pgno * _PAGE)
        data.write(page)


def _children(page: bytes | bytearray) -> list[tuple[int, int]]:
    """A branch page's nodes: (offset of the node, the child page it names)."""
    _, _, _, lower, _ = _HEADER.unpack_from(page)
    found = []
    for at in struct.unpack_from(f"<{(lower - 16) // 2}H", page, 16):
        lo, hi, flags, _ = struct.unpack_from("<HHHH", page, at)
        found.append((at, lo | hi << 16 | flags << 32))
    return found


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    """A journal whose events database is two levels deep, with large snapshots."""
    path = tmp_path / "j"
    with Journal.open(path, sync=False) as journal:  # the pages are the same; the disk flushes when it will
        for batch in range(20):
            seqs = journal.append(make_events(50, start=batch * 50))
            journal.append((), snapshots=[Snapshot("agent/a0", seqs[-1], bytes([batch]) * 9000)])
    assert _tree(path, b"events")[0] == 2
    return path


def _refused(path: Path, match: str) -> None:
    for readonly in (True, False):
        with pytest.raises(JournalDamagedError, match=match):
            Journal.open(path, readonly=readonly)


def test_a_zeroed_leaf_of_the_records_is_refused_naming_page_and_database(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"events")
    _, leaf = _children(_page(journal_path, root))[3]
    _write_page(journal_path, leaf, bytes(_PAGE))

    _refused(journal_path, f"page {leaf} of its events database stores page number 0")


def test_a_zeroed_root_is_refused(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"ids")
    _write_page(journal_path, root, bytes(_PAGE))

    _refused(journal_path, f"page {root} of its ids database stores page number 0")


def test_a_leaf_copied_over_another_is_refused(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"events")
    (_, first), (_, second) = _children(_page(journal_path, root))[:2]
    _write_page(journal_path, second, _page(journal_path, first))

    _refused(journal_path, f"page {second} of its events database stores page number {first}")


def test_a_leaf_with_a_flag_lmdb_gives_pages_only_in_memory_is_refused(journal_path: Path) -> None:
    # P_LOOSE: LMDB's commit would skip writing the page's new copy, and lose the change.
    _, leaf = _tree(journal_path, b"heads")
    page = _page(journal_path, leaf)
    struct.pack_into("<H", page, 10, 0x4002)  # P_LOOSE | P_LEAF
    _write_page(journal_path, leaf, page)

    _refused(journal_path, f"page {leaf} of its heads database should be a leaf page, and has flags 0x4002")


def test_a_header_giving_lmdbs_free_database_other_flags_is_refused(journal_path: Path) -> None:
    # MDB_DUPSORT on the free database: LMDB's next write would abort on an assertion.
    for meta in (0, 1):
        page = _page(journal_path, meta)
        (flags,) = struct.unpack_from("<H", page, 40 + 4)
        assert flags == 0x08  # MDB_INTEGERKEY
        struct.pack_into("<H", page, 40 + 4, 0x08 | 0x04)
        _write_page(journal_path, meta, page)

    _refused(journal_path, "its header gives LMDB's free database the flags 0xc")


def test_a_leaf_whose_free_space_bounds_cross_is_refused(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"events")
    _, leaf = _children(_page(journal_path, root))[2]
    page = _page(journal_path, leaf)
    *_, upper = _HEADER.unpack_from(page)
    struct.pack_into("<HH", page, 12, upper + 2, upper)  # lower past upper
    _write_page(journal_path, leaf, page)

    _refused(journal_path, f"page {leaf} of its events database has free space from {upper + 2} to {upper}")


def test_a_branch_without_nodes_is_refused(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"events")
    page = _page(journal_path, root)
    struct.pack_into("<H", page, 12, 16)  # lower at the header's end: no node offsets
    _write_page(journal_path, root, page)

    _refused(journal_path, f"page {root} of its events database is a branch page without nodes")


def test_a_record_node_with_a_duplicates_flag_is_refused(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"events")
    _, leaf = _children(_page(journal_path, root))[1]
    page = _page(journal_path, leaf)
    (at,) = struct.unpack_from("<H", page, 16)
    struct.pack_into("<H", page, at + 4, 0x04)  # F_DUPDATA, in a database without duplicates
    _write_page(journal_path, leaf, page)

    _refused(journal_path, f"page {leaf} of its events database has a node at offset {at} with flags 0x4")


def test_a_branch_naming_one_child_twice_is_refused(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"events")
    page = _page(journal_path, root)
    (_, child), (at, _) = _children(page)[:2]
    struct.pack_into("<HHH", page, at, child & 0xFFFF, child >> 16 & 0xFFFF, child >> 32)
    _write_page(journal_path, root, page)

    _refused(journal_path, "is reached twice")


def _branch_key(page: bytes | bytearray, at: int) -> tuple[int, bytes]:
    """Where the key of the branch node at ``at`` starts, and the key."""
    size = struct.unpack_from("<H", page, at + 6)[0]
    return at + 8, bytes(page[at + 8 : at + 8 + size])


@pytest.mark.parametrize("database", [b"events", b"ids"])
@pytest.mark.parametrize("change", ["raised past the next", "lowered below its child's keys"])
def test_a_branch_key_out_of_order_is_refused(journal_path: Path, database: bytes, change: str) -> None:
    # LMDB finds a key by its branches' keys: one moved hid the records under it from
    # every lookup (replay failed on "missing" records) while verify's scan of the
    # leaves, in order, still read every record and passed the journal.
    _, root = _tree(journal_path, database)
    page = _page(journal_path, root)
    nodes = _children(page)
    if change == "raised past the next":
        at, key = _branch_key(page, nodes[2][0])
        replacement = _branch_key(page, nodes[3][0])[1]
        expected = f"page {root} of its {database.decode()} database has a node at offset {nodes[3][0]} "
        expected += "whose key is out of order"
    else:  # down to the last key of the child before it: still in order among the branch's keys
        at, key = _branch_key(page, nodes[2][0])
        child = nodes[1][1]
        leaf = _page(journal_path, child)
        replacement = _branch_key(leaf, _children(leaf)[-1][0])[
            1
        ]  # a leaf's nodes hold keys as a branch's do
        assert _branch_key(page, nodes[1][0])[1] < replacement  # the branch's keys still rise
        expected = f"page {child} of its {database.decode()} database holds keys outside the range its branch"
    assert len(replacement) == len(key)
    assert replacement != key
    page[at : at + len(key)] = replacement
    _write_page(journal_path, root, page)

    _refused(journal_path, expected)
    result = CliRunner().invoke(main, ["verify", str(journal_path)])
    assert result.exit_code == 1, result.output


def test_a_branch_naming_a_page_past_the_file_is_refused(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"events")
    page = _page(journal_path, root)
    at, _ = _children(page)[1]
    struct.pack_into("<HHH", page, at, 0xFFFF, 0xFFFF, 0)
    _write_page(journal_path, root, page)

    _refused(journal_path, "is named, but pages run from 2 to")


def test_a_branch_whose_node_offset_is_outside_it_is_refused(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"events")
    page = _page(journal_path, root)
    struct.pack_into("<H", page, 16, 8)  # the first node now starts inside the header
    _write_page(journal_path, root, page)

    _refused(journal_path, "has a node outside its nodes")


def test_a_snapshots_overflow_page_zeroed_is_refused(journal_path: Path) -> None:
    depth, root = _tree(journal_path, b"snapshots")
    assert depth == 1
    page = _page(journal_path, root)
    (at,) = struct.unpack_from("<H", page, 16)
    _, _, flags, key_size = struct.unpack_from("<HHHH", page, at)
    assert flags & 1  # F_BIGDATA: the value is on overflow pages
    (overflow,) = struct.unpack_from("<Q", page, at + 8 + key_size)
    _write_page(journal_path, overflow, bytes(_PAGE))

    _refused(journal_path, f"page {overflow} of its snapshots database should be an overflow page")


def _newest_meta(path: Path) -> bytearray:
    """LMDB's meta page of the newest commit (its txnid at byte 144)."""
    return max((_page(path, 0), _page(path, 1)), key=lambda meta: struct.unpack_from("<Q", meta, 144))


def _leaf_nodes(page: bytes | bytearray) -> list[tuple[int, int, int, bytes]]:
    """A leaf page's nodes: (offset of the node, its flags, its value's size, its key)."""
    _, _, _, lower, _ = _HEADER.unpack_from(page)
    found = []
    for at in struct.unpack_from(f"<{(lower - 16) // 2}H", page, 16):
        lo, hi, flags, key_size = struct.unpack_from("<HHHH", page, at)
        found.append((at, flags, lo | hi << 16, bytes(page[at + 8 : at + 8 + key_size])))
    return found


def _free_leaf(path: Path) -> tuple[int, bytearray]:
    """The one leaf of LMDB's free database (its record is at byte 40 of the meta page)."""
    _, _, depth, _, _, _, _, root = _DB.unpack_from(_newest_meta(path), 40)
    assert depth == 1
    return root, _page(path, root)


def _snapshots_overwritten(tmp_path: Path, size: int) -> Path:
    """A journal whose snapshot of ``size`` bytes was overwritten four times: its old pages are free."""
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        for batch in range(5):
            seqs = journal.append(make_events(10, start=batch * 10))
            journal.append((), snapshots=[Snapshot("agent/a0", seqs[-1], bytes(size))])
    return path


def _free_list(tmp_path: Path) -> tuple[Path, int, int, bytearray]:
    """A journal whose free database is one leaf: its path, that page, where its first list is, the page."""
    path = _snapshots_overwritten(tmp_path, 9000)
    root, page = _free_leaf(path)
    at, flags, _, key = _leaf_nodes(page)[0]
    assert not flags  # the list is inside the page
    return path, root, at + 8 + len(key), page


def test_a_free_page_list_naming_a_page_past_the_file_is_refused(tmp_path: Path) -> None:
    path, root, listed, page = _free_list(tmp_path)
    struct.pack_into("<Q", page, listed + 8, 10**9)
    _write_page(path, root, page)

    _refused(path, f"page {root} of its free database holds a free-page list LMDB cannot reuse")


def test_check_pages_false_skips_the_walk(tmp_path: Path) -> None:
    # A free list naming a page past the file harms no reader (only a write would use
    # it): opened without the walk, the journal reads and verifies; with it, refused.
    path, root, listed, page = _free_list(tmp_path)
    struct.pack_into("<Q", page, listed + 8, 10**9)
    _write_page(path, root, page)

    with Journal.open(path, readonly=True, check_pages=False) as journal:
        assert journal.verify().ok
    with pytest.raises(JournalDamagedError, match="free-page list"):
        Journal.open(path, readonly=True)


def test_the_runtime_walks_the_pages_unless_its_config_says_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked: list[Path] = []
    monkeypatch.setattr(_lmdb, "_walk_pages", lambda _env, where, *_: walked.append(where))
    path = tmp_path / "j"

    Runtime.open(path, config=Config(journal=JournalConfig(check_pages=False))).close()
    assert walked == []
    Runtime.open(path).close()
    assert walked == [path]


def test_a_free_page_list_naming_a_page_in_use_is_refused(tmp_path: Path) -> None:
    # LMDB would hand the page out again: its next write asserts, or overwrites records.
    path, root, listed, page = _free_list(tmp_path)
    (count,) = struct.unpack_from("<Q", page, listed)
    pages = list(struct.unpack_from(f"<{count}Q", page, listed + 8))
    _, in_use = _tree(path, b"events")
    pages = sorted([*[p for p in pages if p != in_use][: count - 1], in_use], reverse=True)
    struct.pack_into(f"<{count}Q", page, listed + 8, *pages)  # still in order, one page in use
    _write_page(path, root, page)

    _refused(path, f"page {in_use} of its events database is listed as free too")


def test_a_free_page_list_out_of_order_is_refused(tmp_path: Path) -> None:
    path, root, listed, page = _free_list(tmp_path)
    (count, first) = struct.unpack_from("<QQ", page, listed)
    assert count >= 2
    struct.pack_into("<Q", page, listed + 16, first)  # the first page listed twice
    _write_page(path, root, page)

    _refused(path, "holds a free-page list LMDB cannot reuse")


def test_a_free_page_list_of_a_transaction_the_file_never_ran_is_refused(tmp_path: Path) -> None:
    path, root, listed, page = _free_list(tmp_path)
    struct.pack_into("<Q", page, listed - 8, 2**40)  # the record's key: the txnid that freed its pages
    _write_page(path, root, page)

    _refused(
        path, f"page {root} of its free database holds a record of transaction {2**40}, past the file's last"
    )


def test_a_page_listed_free_by_two_transactions_is_refused(tmp_path: Path) -> None:
    # LMDB would hand it out twice: two of its later pages would be one.
    path = _snapshots_overwritten(tmp_path, 9000)
    root, page = _free_leaf(path)
    lists = []
    for at, flags, size, key in _leaf_nodes(page):
        assert not flags
        count, *pages = struct.unpack_from(f"<{size // 8}Q", page, at + 8 + len(key))
        assert count == len(pages)
        lists.append((at + 8 + len(key) + 8, pages))
    assert len(lists) >= 2
    (_, earlier), (second_at, later) = lists[:2]
    shared = earlier[0]
    later = sorted([shared, *later[1:]], reverse=True)  # still in order, one page of the other list
    struct.pack_into(f"<{len(later)}Q", page, second_at, *later)
    _write_page(path, root, page)

    _refused(path, f"page {root} of its free database lists page {shared} as free a second time")


def test_a_free_page_list_longer_than_the_file_could_free_is_refused(tmp_path: Path) -> None:
    # A list on overflow pages: its length is checked before it is read into memory.
    path = _snapshots_overwritten(tmp_path, 4_000_000)
    root, page = _free_leaf(path)
    at, flags, _, key = next(node for node in _leaf_nodes(page) if node[1])
    assert flags == 1  # F_BIGDATA
    (first,) = struct.unpack_from("<Q", page, at + 8 + len(key))
    meta = _newest_meta(path)
    (last_page,) = struct.unpack_from("<Q", meta, 136)
    size = 8 * (last_page + 2) + 8  # more page numbers than the file has pages
    spare = (path / "data.mdb").stat().st_size // _PAGE - first
    count = (16 + size + _PAGE - 1) // _PAGE
    assert count <= spare  # overflow pages inside the file, long enough for the value
    struct.pack_into("<HH", page, at, size & 0xFFFF, size >> 16)
    _write_page(path, root, page)
    overflow = _page(path, first)
    struct.pack_into("<I", overflow, 12, count)  # mp_pages
    _write_page(path, first, overflow)

    _refused(path, f"page {root} of its free database holds a free-page list of {size} bytes")


def _database_record(path: Path, name: bytes) -> tuple[int, int, bytearray]:
    """The leaf of LMDB's main database, where ``name``'s record (an MDB_db) starts in it, the leaf."""
    _, _, depth, _, _, _, _, root = _DB.unpack_from(_newest_meta(path), 88)
    assert depth == 1
    page = _page(path, root)
    at, flags, _, _ = next(node for node in _leaf_nodes(page) if node[3] == name)
    assert flags == 2  # F_SUBDATA
    return root, at + 8 + len(name), page


def test_a_tree_deeper_than_lmdbs_cursors_reach_is_refused(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"events")
    main, record, page = _database_record(journal_path, b"events")
    struct.pack_into("<H", page, record + 6, 40)  # md_depth
    _write_page(journal_path, main, page)

    _refused(journal_path, f"page {root} of its events database is the root of a tree of depth 40")


def test_a_branch_node_whose_key_runs_past_its_page_is_refused(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"events")
    page = _page(journal_path, root)
    at, _ = _children(page)[1]
    struct.pack_into("<H", page, at + 6, 0xFFFF)  # mn_ksize
    _write_page(journal_path, root, page)

    _refused(journal_path, f"page {root} of its events database has a node at offset {at} running past it")


def test_a_file_naming_more_databases_than_a_journal_could_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j"
    Journal.open(path).close()  # six databases
    env = lmdb.open(str(path), max_dbs=40)
    try:
        for n in range(27):
            env.open_db(b"extra%02d" % n)
    finally:
        env.close()

    _refused(path, "names more than 32 databases")


def test_a_branch_with_one_node_is_refused(journal_path: Path) -> None:
    # LMDB asserts every branch but its free database's has two nodes at least.
    _, root = _tree(journal_path, b"events")
    page = _page(journal_path, root)
    struct.pack_into("<H", page, 12, 18)  # lower: one node offset left
    _write_page(journal_path, root, page)

    _refused(journal_path, f"page {root} of its events database is a branch page with one node")


def test_a_leaf_without_nodes_is_refused(journal_path: Path) -> None:
    # A cursor stepping to its last node would read node 65535, far past the page.
    _, root = _tree(journal_path, b"events")
    _, leaf = _children(_page(journal_path, root))[-1]
    page = _page(journal_path, leaf)
    struct.pack_into("<H", page, 12, 16)
    _write_page(journal_path, leaf, page)

    _refused(journal_path, f"page {leaf} of its events database is a leaf page without nodes")


def test_free_page_lists_out_of_transaction_order_are_refused(tmp_path: Path) -> None:
    # LMDB reads them in key order and asserts on any other (mdb_freelist_save).
    path = _snapshots_overwritten(tmp_path, 9000)
    root, page = _free_leaf(path)
    (first_at, _, _, _), (_, _, _, second_key) = _leaf_nodes(page)[:2]
    struct.pack_into("<8s", page, first_at + 8, second_key)  # the first record now as late as the second
    _write_page(path, root, page)

    (txnid,) = struct.unpack("<Q", second_key)
    _refused(path, f"page {root} of its free database holds the record of transaction {txnid} out of order")


def test_a_free_database_branch_whose_keys_fall_out_of_order_is_refused(tmp_path: Path) -> None:
    # A reader pins every freed page, so that each commit leaves one more free-page list.
    path = tmp_path / "raw"
    env = lmdb.open(str(path), max_dbs=2, sync=False)  # 600 commits: the same pages without each one's fsync
    try:
        db = env.open_db(b"d")
        with env.begin(write=True, db=db) as txn:
            txn.put(b"k", bytes(100))
        with env.begin():
            for n in range(600):
                with env.begin(write=True, db=db) as txn:
                    txn.put(b"k", bytes([n % 256]) * 100)
    finally:
        env.close()
    _pages.check_pages(path, _PAGE)  # healthy
    _, _, depth, _, _, _, _, root = _DB.unpack_from(_newest_meta(path), 40)
    assert depth >= 2
    page = _page(path, root)
    (at_1, _), (at_2, _) = _children(page)[1:3]
    key_2 = page[at_2 + 8 : at_2 + 16]
    page[at_1 + 8 : at_1 + 16] = key_2  # the first two separating keys now equal
    _write_page(path, root, page)

    with pytest.raises(
        JournalDamagedError, match=f"page {root} of its free database has a node at offset {at_2}"
    ):
        _pages.check_pages(path, _PAGE)


def test_pages_a_tree_lost_are_refused(journal_path: Path) -> None:
    # The header's main database cut to its first five databases: the sixth one's pages
    # are in no tree and not free. Opened for writing, the journal would have been taken
    # for one being created, and its records orphaned.
    _, _, depth, _, _, _, _, main = _DB.unpack_from(_newest_meta(journal_path), 88)
    assert depth == 1
    page = _page(journal_path, main)
    (lower,) = struct.unpack_from("<H", page, 12)
    struct.pack_into("<H", page, 12, lower - 2)  # the last node, the snapshots database's, cut
    _write_page(journal_path, main, page)

    _refused(journal_path, "is in no database and not free")


def test_a_file_with_history_but_no_journal_header_is_never_made_a_new_journal(tmp_path: Path) -> None:
    # As a journal whose main database lost every database but an empty one reads with
    # the walk skipped: creating a new journal over it would orphan what it held.
    path = tmp_path / "j"
    env = lmdb.open(str(path), max_dbs=8)
    try:
        anchors = env.open_db(b"anchors")
        for n in range(10):
            with env.begin(write=True, db=anchors) as txn:
                txn.put(b"k", b"%d" % n)
                txn.delete(b"k")
    finally:
        env.close()
    before = (path / "data.mdb").read_bytes()

    for check_pages in (True, False):
        with pytest.raises(JournalFormatError, match="holds 11 commits but no journal header"):
            Journal.open(path, check_pages=check_pages)
    assert (path / "data.mdb").read_bytes() == before


def _large_record(tmp_path: Path) -> tuple[Path, int, int, bytearray]:
    """A journal of one record on overflow pages: its path, the leaf, its node's offset, the leaf."""
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(1, value="x" * 20_000))
    depth, leaf = _tree(path, b"events")
    assert depth == 1
    page = _page(path, leaf)
    (at,) = struct.unpack_from("<H", page, 16)
    return path, leaf, at, page


def test_a_records_length_past_its_overflow_pages_is_refused(tmp_path: Path) -> None:
    # LMDB would read the value's length from the map: past the file's end, a SIGBUS.
    path, leaf, at, page = _large_record(tmp_path)
    _, hi, flags, _ = struct.unpack_from("<HHHH", page, at)
    assert flags == 1  # F_BIGDATA
    struct.pack_into("<H", page, at + 2, hi | 0x400)  # one bit: about 67 MB more
    _write_page(path, leaf, page)

    _refused(path, "too few for a value of")


def test_a_record_node_placed_past_its_page_is_refused(tmp_path: Path) -> None:
    path, leaf, _, page = _large_record(tmp_path)
    struct.pack_into("<H", page, 16, 9676)  # a node offset past the 4 KiB page
    _write_page(path, leaf, page)

    _refused(path, f"page {leaf} of its events database has a node outside its nodes")


def test_the_walk_leaves_a_damaged_file_as_it_is(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"events")
    _write_page(journal_path, root, bytes(_PAGE))
    before = (journal_path / "data.mdb").read_bytes()

    _refused(journal_path, "is damaged")
    assert (journal_path / "data.mdb").read_bytes() == before


_EVERY_PAGE = """
import mmap, shutil, sys
from pathlib import Path
from cogfabric import CogfabricError
from cogfabric.actors import Config, JournalConfig, Runtime
from cogfabric.store import JournalDamagedError

source, work = Path(sys.argv[1]), Path(sys.argv[2])
pages = (source / "data.mdb").stat().st_size // mmap.PAGESIZE
for page in range(2, pages):
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    with (work / "data.mdb").open("r+b") as data:
        data.seek(page * mmap.PAGESIZE)
        data.write(bytes(mmap.PAGESIZE))
    print(page, end=" ", flush=True)
    try:
        with Runtime.open(work, config=Config(journal=JournalConfig(fsync=False))) as runtime:
            for agent_id in runtime.agents():
                runtime.agent(agent_id).context_view()
            runtime.spawn(task_id="t").set_private("after", "damage")
        print("opened", flush=True)
    except JournalDamagedError:
        print("damaged", flush=True)
    except CogfabricError as exc:
        print(type(exc).__name__, flush=True)
"""


def test_no_zeroed_page_crashes_a_runtime_opening_and_writing_the_journal(tmp_path: Path) -> None:
    # Before the walk, most of these pages made LMDB abort the process (an assertion).
    source = tmp_path / "source"
    # fsync: false here and in the child: the pages are the same, without a flush per commit
    with Runtime.open(source, config=Config(journal=JournalConfig(fsync=False))) as runtime:
        agents = [runtime.spawn(f"a{n}", task_id="t", task_context={"n": n}) for n in range(20)]
        for round_ in range(30):
            for agent in agents:
                agent.set_private("x", "v" * 100 + str(round_))
        agents[0].set_private("large", "L" * 5000)  # a value on overflow pages
        runtime.publish_task_context("t", {"n": "new"})
    script = tmp_path / "every_page.py"
    script.write_text(textwrap.dedent(_EVERY_PAGE), encoding="utf-8")

    done = subprocess.run(
        [sys.executable, str(script), str(source), str(tmp_path / "work")],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, (done.returncode, done.stdout[-300:], done.stderr[-2000:])
    outcomes = dict(line.split() for line in done.stdout.splitlines())
    assert len(outcomes) == (source / "data.mdb").stat().st_size // _PAGE - 2
    # a zeroed overflow page of a record is a record whose bytes changed: the chain names it
    assert set(outcomes.values()) <= {"opened", "damaged", "JournalFormatError", "JournalIntegrityError"}
    assert list(outcomes.values()).count("damaged") > len(outcomes) // 2
    assert "opened" in outcomes.values()  # free pages: zeroing one harms nothing


_WRITER = """
from cogfabric.store import Journal, Snapshot
from cogfabric.store.testing import make_events
with Journal.open({path!r}, sync=False) as journal:
    print("ready", flush=True)
    for n in range(100_000):
        seqs = journal.append(make_events(20, start=n * 20, agents=50))
        journal.append((), snapshots=[Snapshot("agent/a0", seqs[-1], bytes(5000))])
"""


def test_readers_opening_while_a_writer_appends_see_no_damage(tmp_path: Path) -> None:
    # Each read-only open walks the pages of the newest commit while another process
    # keeps committing: the walk must hold the pages it reads (no false damage).
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(10))
    command = [sys.executable, "-c", textwrap.dedent(_WRITER).format(path=str(path))]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, encoding="utf-8") as writer:
        try:
            assert writer.stdout is not None
            assert writer.stdout.readline().strip() == "ready"
            seen = set()
            for _ in range(60):
                with Journal.open(path, readonly=True) as journal:
                    seen.add(journal.last_seq)
            assert len(seen) > 1  # the reader saw the journal grow
        finally:
            writer.kill()


def test_a_damaged_database_name_is_shown_escaped() -> None:
    assert _shown(b"events") == "events"
    assert _shown(b"\x1c\tQ") == "'\\x1c\\tQ'"
    assert _shown(b"he\xff\xfe") == "he\\xff\\xfe"


def _full_ids_leaf(path: Path) -> tuple[int, bytearray, list[tuple[int, int, int, bytes]]]:
    """A leaf of the event id index with many nodes of one size: the walk's fast case."""
    depth, root = _tree(path, b"ids")
    assert depth == 2  # the fixture's id index: a root branch over its leaves
    for _, leaf in _children(_page(path, root)):
        page = _page(path, leaf)
        nodes = _leaf_nodes(page)
        if len(nodes) >= _pages._TILED_FROM:
            return leaf, page, nodes
    pytest.fail("no leaf of the id index holds enough nodes")


def test_one_node_with_a_flag_among_an_id_leafs_nodes_of_one_size_is_refused(journal_path: Path) -> None:
    leaf, page, nodes = _full_ids_leaf(journal_path)
    at = nodes[len(nodes) // 2][0]
    struct.pack_into("<H", page, at + 4, 0x04)  # F_DUPDATA, in a database without duplicates
    _write_page(journal_path, leaf, page)

    _refused(journal_path, f"page {leaf} of its ids database has a node at offset {at} with flags 0x4")


def test_the_last_node_of_an_id_leaf_running_past_its_page_is_refused(journal_path: Path) -> None:
    leaf, page, nodes = _full_ids_leaf(journal_path)
    at, _, size, _ = max(nodes)  # the node nearest the page's end
    struct.pack_into("<H", page, at, size + _PAGE - at)  # its value's length reaches past the page
    _write_page(journal_path, leaf, page)

    _refused(journal_path, f"page {leaf} of its ids database has a node at offset {at} running past it")


def test_an_id_leaf_whose_nodes_all_run_past_its_page_by_one_size_is_refused(journal_path: Path) -> None:
    # every node's header is the same again, so only the check of a node's length sees it
    leaf, page, nodes = _full_ids_leaf(journal_path)
    for at, _, size, _ in nodes:
        struct.pack_into("<H", page, at, size + 64)
    _write_page(journal_path, leaf, page)

    _refused(journal_path, rf"page {leaf} of its ids database has a node at offset \d+ running past it")


def test_an_id_leafs_node_offset_moved_into_its_node_is_refused(journal_path: Path) -> None:
    # every node's header is intact: only the offsets no longer name the nodes' starts
    leaf, page, nodes = _full_ids_leaf(journal_path)
    at = nodes[1][0]
    struct.pack_into("<H", page, 16 + 2, at + 2)  # the second node's offset, two bytes into the node
    _write_page(journal_path, leaf, page)

    _refused(journal_path, f"page {leaf} of its ids database has a node at offset {at + 2} with flags")


def test_a_leaf_whose_free_space_ends_at_an_odd_offset_is_refused(journal_path: Path) -> None:
    # LMDB adds the next node just below its upper bound; at an odd offset, it aborts
    # when it moves that node (mdb_node_move asserts an even node)
    _, root = _tree(journal_path, b"events")
    _, leaf = _children(_page(journal_path, root))[2]
    page = _page(journal_path, leaf)
    _, _, _, lower, upper = _HEADER.unpack_from(page)
    struct.pack_into("<H", page, 14, upper - 1)
    _write_page(journal_path, leaf, page)

    _refused(journal_path, f"page {leaf} of its events database has free space from {lower} to {upper - 1}")


def test_a_node_moved_whole_to_an_odd_offset_is_refused(journal_path: Path) -> None:
    _, root = _tree(journal_path, b"events")
    leaves = [(_page(journal_path, leaf), leaf) for _, leaf in _children(_page(journal_path, root))]
    page, leaf = max(leaves, key=lambda one: _HEADER.unpack_from(one[0])[4] - _HEADER.unpack_from(one[0])[3])
    _, _, _, lower, upper = _HEADER.unpack_from(page)
    assert upper - lower >= 2  # room to move a node down a byte, and the bound one more
    index, (at, _, size, key) = next(
        (i, node) for i, node in enumerate(_leaf_nodes(page)) if node[0] == upper
    )
    length = 8 + len(key) + size
    page[at - 1 : at - 1 + length] = page[at : at + length]  # the lowest node, whole, a byte lower
    struct.pack_into("<H", page, 16 + 2 * index, at - 1)
    struct.pack_into("<H", page, 14, at - 2)  # the free space's end stays even
    _write_page(journal_path, leaf, page)

    _refused(journal_path, f"page {leaf} of its events database has a node at odd offset {at - 1}")


def test_a_free_database_branch_with_one_node_is_refused(tmp_path: Path) -> None:
    # LMDB searches such a branch of its free database, but a commit that deletes a
    # free-page list under it aborts the process (mdb_rebalance asserts two nodes)
    path = _snapshots_overwritten(tmp_path, 9000)
    meta = _newest_meta(path)
    pad, flags, depth, branches, leaves, overflow, entries, root = _DB.unpack_from(meta, 40)
    assert depth == 1
    (last,) = struct.unpack_from("<Q", meta, 136)  # the last page LMDB allocated
    assert (path / "data.mdb").stat().st_size == (last + 1) * _PAGE
    branch = bytearray(_PAGE)  # a new page at the file's end, over the free database's leaf
    _HEADER.pack_into(branch, 0, last + 1, 0, 0x01, 18, _PAGE - 8)
    struct.pack_into("<H", branch, 16, _PAGE - 8)
    struct.pack_into("<HHHH", branch, _PAGE - 8, root & 0xFFFF, root >> 16 & 0xFFFF, root >> 32, 0)
    _write_page(path, last + 1, branch)
    _DB.pack_into(meta, 40, pad, flags, 2, branches + 1, leaves, overflow, entries, last + 1)
    struct.pack_into("<Q", meta, 136, last + 1)
    txnid = struct.unpack_from("<Q", meta, 144)[0]
    _write_page(path, txnid % 2, meta)

    _refused(path, f"page {last + 1} of its free database is a branch page with one node")
