"""Permissions and media review s52 (h11): what the read-only file system and lock file checks of
h9's review did to a writer.lock that is no regular file, to this process's own writer, and to a
journal directory swapped while root makes its lock file.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from cogfabric.store import Journal, JournalFormatError, JournalLockedError

from .test_permissions_s52_h9 import _as_read_only_file_system, _journal


def test_a_writer_lock_that_is_a_fifo_on_a_read_only_file_system_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    (path / "writer.lock").unlink()
    os.mkfifo(path / "writer.lock")  # a medium someone made: the read-only open blocked on it forever
    _as_read_only_file_system(monkeypatch, tmp_path)
    other_end = os.open(path / "writer.lock", os.O_RDWR | os.O_NONBLOCK)  # the old code fails, not hangs
    try:
        with pytest.raises(JournalFormatError, match=r"its writer\.lock is not a regular file"):
            Journal.open(path, readonly=True)
    finally:
        os.close(other_end)
    assert str(path / "writer.lock") not in _open_files()  # the refused open kept none


def _open_files() -> set[str]:
    names = set()
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed since
            names.add(str(fd.readlink()))
    return names


def test_a_read_only_open_beside_this_processs_own_writer_says_so_on_a_read_only_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    with Journal.open(path) as writer:  # this process writes it (through a writable mount, say)
        _as_read_only_file_system(monkeypatch, tmp_path)
        # was: "held by a writer (process <this one>)... read it through a mount where its
        # lock.mdb is writable", where LMDB refuses it all the same
        with pytest.raises(JournalLockedError, match="already open in this process"):
            Journal.open(path, readonly=True)
        assert writer.last_seq == 5


def test_root_gives_no_user_a_lock_file_in_a_journal_swapped_in_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    victim = _journal(tmp_path / "victim")
    os.chown(victim / "data.mdb", 65533, 65533)
    (victim / "lock.mdb").unlink()
    (tmp_path / "home").mkdir()
    mine = _journal(tmp_path / "home" / "j")  # a user's own journal, which root audits
    os.chown(mine / "data.mdb", 65534, 65534)
    (mine / "lock.mdb").unlink()
    real_access = os.access

    def swap_then_access(*args: object, **kwargs: object) -> bool:
        # the user, owning its home, swaps the journal for a link to another's meanwhile
        if not (tmp_path / "home" / "kept").exists():
            (tmp_path / "home" / "j").rename(tmp_path / "home" / "kept")
            (tmp_path / "home" / "j").symlink_to(victim)
        return real_access(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", swap_then_access)
    with contextlib.suppress(Exception):  # whatever the open says, the lock file's owner is the point
        Journal.open(mine, readonly=True).close()
    monkeypatch.undo()

    lock = victim / "lock.mdb"
    # was 65534: the swapping user could write into another user's reader table
    assert not lock.exists() or lock.stat().st_uid != 65534
