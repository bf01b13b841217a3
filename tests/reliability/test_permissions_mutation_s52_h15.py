"""Survivors of helper h15's mutation round on the read-only media and lock file checks (session 52).

A reader on a read-only file system takes a shared lock (other readers read beside it; a
writer is told a reader holds it off); a writer.lock that is a FIFO with no writer is refused
at once, not waited on; a refused or failed read-only open keeps no descriptor and no lock
(writers are not held off by a reader that is gone); a lock file root cannot give to the
journal's owner is removed, not left root's.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from cogfabric.store import (
    Journal,
    JournalError,
    JournalFormatError,
    JournalKeyError,
    JournalLockedError,
    JournalUnavailableError,
)
from cogfabric.store.testing import make_events

from .test_permissions_s52_h9 import _as_read_only_file_system, _journal, _writer_lock_held


def _descriptors_of(path: Path) -> int:
    """How many of this process's descriptors name ``path``."""
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            count += fd.readlink() == path
        except OSError:  # the listing's own descriptor, closed since
            continue
    return count


def test_a_reader_on_a_read_only_file_system_reads_beside_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    _as_read_only_file_system(monkeypatch, tmp_path)
    other = os.open(path / "writer.lock", os.O_RDONLY)  # a reader in another process, say
    try:
        fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
        with Journal.open(path, readonly=True) as journal:
            assert journal.last_seq == 5
    finally:
        os.close(other)


def test_a_writer_is_told_a_reader_on_a_read_only_file_system_holds_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    _as_read_only_file_system(monkeypatch, tmp_path)

    with (
        Journal.open(path, readonly=True),
        pytest.raises(JournalLockedError, match="being read from a read-only file system"),
    ):
        Journal.open(path)


def test_a_writer_lock_that_is_a_fifo_with_no_writer_is_refused_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    (path / "writer.lock").unlink()
    os.mkfifo(path / "writer.lock")  # nothing holds its other end: an open that waits, waits forever
    _as_read_only_file_system(monkeypatch, tmp_path)
    raised: list[BaseException] = []

    def read() -> None:
        try:
            Journal.open(path, readonly=True).close()
        except JournalError as exc:
            raised.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=10)
    blocked = reader.is_alive()
    if blocked:  # let it go: a writer at the other end ends its wait
        end = os.open(path / "writer.lock", os.O_WRONLY | os.O_NONBLOCK)
        reader.join(timeout=10)
        os.close(end)

    assert not blocked, "the read-only open waited on the FIFO"
    assert len(raised) == 1
    assert isinstance(raised[0], JournalFormatError)


def test_a_read_only_open_refused_for_a_writer_keeps_no_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    _as_read_only_file_system(monkeypatch, tmp_path)

    with _writer_lock_held(path):
        for _ in range(3):  # an auditor retrying
            with pytest.raises(JournalLockedError, match="read-only file system"):
                Journal.open(path, readonly=True)
        assert _descriptors_of(path / "writer.lock") == 1  # the holder's own


def test_a_failed_read_only_open_lets_writers_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _journal(tmp_path / "j")
    _as_read_only_file_system(monkeypatch, tmp_path)

    with pytest.raises(JournalKeyError):  # failed once its shared lock was taken
        Journal.open(path, readonly=True, key=b"not the journal's")

    assert _descriptors_of(path / "writer.lock") == 0
    with Journal.open(path) as journal:  # was: "being read from a read-only file system"
        assert journal.append(make_events(1, start=6)) == [6]


def test_read_only_opens_keep_no_descriptor_of_the_journals_directory(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j")
    before = _descriptors_of(path)

    for _ in range(3):
        with Journal.open(path, readonly=True) as journal:
            assert journal.last_seq == 5

    assert _descriptors_of(path) == before == 0


def test_a_lock_file_root_cannot_give_to_the_journals_owner_is_not_left_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    (path / "lock.mdb").unlink()
    if os.geteuid() == 0:
        os.chown(path / "data.mdb", 65534, -1)  # another user's journal, which root audits
    else:
        monkeypatch.setattr(os, "geteuid", lambda: 0)  # root, auditing this user's journal

    def refused(*_args: object) -> None:
        raise PermissionError(1, "Operation not permitted")  # a file system that refuses chown

    monkeypatch.setattr(os, "fchown", refused)

    with pytest.raises(JournalUnavailableError, match=r"cannot give .* new lock file to the journal's owner"):
        Journal.open(path, readonly=True)
    assert not (path / "lock.mdb").exists()  # left root's, it would lock the owner out
