"""Damaged pages at the bounds of the page walk: a mutation test of store/_pages.py (session 52, h4).

Each test here failed on a mutant of the walk that every other test let through: a
damaged file opened, or the walk raised an ``IndexError`` or ``struct.error`` where
``open`` must raise ``JournalDamagedError``.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import pytest

from .test_damaged_pages import (
    _PAGE,
    _database_record,
    _free_leaf,
    _free_list,
    _full_ids_leaf,
    _large_record,
    _leaf_nodes,
    _newest_meta,
    _page,
    _refused,
    _snapshots_overwritten,
    _write_page,
    journal_path,  # noqa: F401 - the fixture, for the tests that name it
)

if TYPE_CHECKING:
    from pathlib import Path


def test_an_id_leaf_whose_nodes_all_claim_values_past_64_kib_is_refused(journal_path: Path) -> None:  # noqa: F811
    # every node's header is the same again (the walk's fast case), each value's length
    # now 65536 bytes more (mn_hi): LMDB would read it from past the page, and the file
    leaf, page, nodes = _full_ids_leaf(journal_path)
    for at, _, _, _ in nodes:
        struct.pack_into("<H", page, at + 2, 1)  # mn_hi
    _write_page(journal_path, leaf, page)

    _refused(journal_path, rf"page {leaf} of its ids database has a node at offset \d+ running past it")


def test_a_value_running_one_byte_past_its_overflow_pages_header_counted_is_refused(tmp_path: Path) -> None:
    # the overflow pages hold their own 16-byte header before the value: a length that
    # fits the pages but not the pages less that header reads past them
    path, leaf, at, page = _large_record(tmp_path)
    _, _, flags, key_size = struct.unpack_from("<HHHH", page, at)
    assert flags == 1  # F_BIGDATA
    (first,) = struct.unpack_from("<Q", page, at + 8 + key_size)
    (count,) = struct.unpack_from("<I", _page(path, first), 12)  # mp_pages
    size = count * _PAGE - 16 + 1
    struct.pack_into("<HH", page, at, size & 0xFFFF, size >> 16)
    _write_page(path, leaf, page)

    expected = f"page {first} of its events database holds {count} pages, too few for a value of {size} bytes"
    _refused(path, expected)


def test_a_value_that_fills_its_overflow_pages_exactly_is_not_damage(tmp_path: Path) -> None:
    # the bound of the test above, from the other side: opened, the value is not read here
    from cogfabric.store import Journal  # noqa: PLC0415

    path, leaf, at, page = _large_record(tmp_path)
    _, _, _, key_size = struct.unpack_from("<HHHH", page, at)
    (first,) = struct.unpack_from("<Q", page, at + 8 + key_size)
    (count,) = struct.unpack_from("<I", _page(path, first), 12)
    size = count * _PAGE - 16
    struct.pack_into("<HH", page, at, size & 0xFFFF, size >> 16)
    _write_page(path, leaf, page)

    with Journal.open(path, readonly=True) as journal:
        assert journal.last_seq == 1


def test_a_free_page_list_of_transaction_0_is_refused(tmp_path: Path) -> None:
    # LMDB starts its reuse at the record after the last one it took (me_pglast): a
    # record keyed 0 is taken and never deleted, so its pages would be handed out twice
    path, root, listed, page = _free_list(tmp_path)
    struct.pack_into("<Q", page, listed - 8, 0)  # the record's key: the txnid that freed its pages
    _write_page(path, root, page)

    _refused(path, rf"page {root} of its free database holds a record of transaction 0\.")


def test_a_free_page_list_naming_the_page_just_past_the_last_allocated_is_refused(tmp_path: Path) -> None:
    path, root, listed, page = _free_list(tmp_path)
    (last_page,) = struct.unpack_from("<Q", _newest_meta(path), 136)
    assert struct.unpack_from("<Q", page, listed + 8)[0] < last_page  # the list's highest page
    struct.pack_into("<Q", page, listed + 8, last_page + 1)  # still in descending order
    _write_page(path, root, page)

    _refused(path, f"page {root} of its free database holds a free-page list LMDB cannot reuse")


def test_a_database_record_shorter_than_lmdbs_is_refused(journal_path: Path) -> None:  # noqa: F811
    # an MDB_db is 48 bytes: one of 40 would be read with the next node's bytes in it
    main, record, page = _database_record(journal_path, b"events")
    at = record - 8 - len(b"events")
    assert struct.unpack_from("<H", page, at)[0] == 48
    struct.pack_into("<H", page, at, 40)
    _write_page(journal_path, main, page)

    _refused(journal_path, f"page {main} of its main database holds a database record of 40 bytes")


def test_a_header_giving_lmdbs_main_database_other_flags_is_refused(journal_path: Path) -> None:  # noqa: F811
    # MDB_INTEGERKEY on the main database: LMDB would compare the databases' names as
    # integers (of 4 or 8 bytes, which "events" is not)
    for meta in (0, 1):
        page = _page(journal_path, meta)
        (flags,) = struct.unpack_from("<H", page, 88 + 4)
        assert flags == 0
        struct.pack_into("<H", page, 88 + 4, 0x08)
        _write_page(journal_path, meta, page)

    _refused(journal_path, "its header gives LMDB's main database the flags 0x8")


def test_page_2_in_no_database_and_not_free_is_refused(tmp_path: Path) -> None:
    # the first page a tree may use, dropped from the free list that names it
    path = _snapshots_overwritten(tmp_path, 9000)
    free_root, page = _free_leaf(path)
    for at, flags, size, key in _leaf_nodes(page):
        assert not flags  # each list inside the page
        listed = at + 8 + len(key)
        count, *pages = struct.unpack_from(f"<{size // 8}Q", page, listed)
        if pages and pages[-1] == 2:  # in descending order: page 2 is the last
            struct.pack_into("<Q", page, listed, count - 1)
            struct.pack_into("<H", page, at, size - 8)  # the value's length, a page number less
            break
    else:
        pytest.fail("no free-page list names page 2")
    _write_page(path, free_root, page)

    _refused(path, "page 2 is in no database and not free")
