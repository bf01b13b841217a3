"""Damaged pages at the bounds of the page walk, pinned by a mutation test of store/_pages.py (session 49).

Each test here failed on a mutant of the walk (a bound off by one, a check left out)
that every other test let through: the journal opened, or the walk raised an
``IndexError`` or ``struct.error`` where ``open`` must raise ``JournalDamagedError``.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from .test_damaged_pages import (
    _HEADER,
    _PAGE,
    _children,
    _large_record,
    _newest_meta,
    _page,
    _refused,
    _tree,
    _write_page,
    journal_path,  # noqa: F401 - the fixture, for the test that names it
)

if TYPE_CHECKING:
    from pathlib import Path


def test_a_node_offset_in_a_leafs_last_eight_bytes_is_refused(tmp_path: Path) -> None:
    # inside the page, but its node header (eight bytes) would run past it
    path, leaf, _, page = _large_record(tmp_path)
    upper = _HEADER.unpack_from(page)[4]
    struct.pack_into("<H", page, 16, _PAGE - 4)
    _write_page(path, leaf, page)

    _refused(
        path, rf"page {leaf} of its events database has a node outside its nodes \(they start at {upper}\)"
    )


def test_a_record_node_flagged_both_on_overflow_pages_and_a_database_is_refused(tmp_path: Path) -> None:
    path, leaf, at, page = _large_record(tmp_path)
    struct.pack_into("<H", page, at + 4, 0x03)  # F_BIGDATA | F_SUBDATA: no node is both
    _write_page(path, leaf, page)

    _refused(path, f"page {leaf} of its events database has a node at offset {at} with flags 0x3")


def _pages(path: Path) -> int:
    """The pages a tree may use: the file's, up to the last one LMDB allocated."""
    last: int = struct.unpack_from("<Q", _newest_meta(path), 136)[0]
    return min(last + 1, (path / "data.mdb").stat().st_size // _PAGE)


def test_a_branch_naming_the_page_just_past_the_file_is_refused(journal_path: Path) -> None:  # noqa: F811
    _, root = _tree(journal_path, b"events")
    page = _page(journal_path, root)
    at, _ = _children(page)[1]
    pages = _pages(journal_path)
    struct.pack_into("<HHH", page, at, pages & 0xFFFF, pages >> 16 & 0xFFFF, pages >> 32)
    _write_page(journal_path, root, page)

    expected = f"page {pages} of its events database is named, but pages run from 2 to {pages - 1}"
    _refused(journal_path, expected)
