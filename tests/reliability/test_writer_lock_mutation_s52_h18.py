"""Mutation round s52 (h18): the writer's read of /proc/locks looks at writer.lock's lines only.

A flock on another file (another journal's ``writer.lock``, anything a process on the
machine locked) says nothing of who holds this one: a shared one elsewhere is no reader
here, an exclusive one elsewhere no writer here.
"""

from __future__ import annotations

import fcntl
import os
from typing import TYPE_CHECKING

import pytest

from cogfabric.store import JournalLockedError, _lmdb
from cogfabric.store._lmdb import LmdbJournal, _only_readers_hold

if TYPE_CHECKING:
    from pathlib import Path


def _file_id(path: Path) -> str:
    held = path.lstat()
    return f"{os.major(held.st_dev):02x}:{os.minor(held.st_dev):02x}:{held.st_ino}"


def _line(number: int, how: str, file_id: str) -> str:
    return f"{number}: FLOCK  ADVISORY  {how}  {4000 + number} {file_id} 0 EOF"


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    where = tmp_path / "journal"
    where.mkdir()
    (where / "writer.lock").write_bytes(b"")
    (tmp_path / "other.lock").write_bytes(b"")
    return where


def _table(journal: Path, monkeypatch: pytest.MonkeyPatch, *lines: str) -> None:
    table = journal.parent / "locks"
    table.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    monkeypatch.setattr(_lmdb, "_PROC_LOCKS", table)


def test_locks_on_other_files_alone_show_no_lock(journal: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = _file_id(journal.parent / "other.lock")
    _table(journal, monkeypatch, _line(1, "READ", other), _line(2, "WRITE", other))

    assert _only_readers_hold(journal) is None


def test_a_writer_on_another_file_is_no_writer_here(journal: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other, mine = _file_id(journal.parent / "other.lock"), _file_id(journal / "writer.lock")
    _table(journal, monkeypatch, _line(1, "WRITE", other), _line(2, "READ", mine))

    assert _only_readers_hold(journal) is True


def test_a_reader_of_another_file_is_no_reader_of_this_one(
    journal: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _table(journal, monkeypatch, _line(1, "READ", _file_id(journal.parent / "other.lock")))
    writer = os.open(journal / "writer.lock", os.O_RDONLY)
    try:
        fcntl.flock(writer, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(JournalLockedError, match="held by another writer"):
            LmdbJournal._take_writer_lock(journal)
    finally:
        os.close(writer)
