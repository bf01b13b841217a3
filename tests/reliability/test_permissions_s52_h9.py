"""Permissions and media review s52 (h9): a journal read from a read-only mount, by another user
than its owner, or with a lock file that is no regular file.

On a read-only file system LMDB opens no lock file and keeps no record of its readers, so a
writer reaching the same file through another mount reused the pages a reader read (a read-only
bind mount of a live journal: false damage reports, or LMDB aborting the reader); an auditor
that made ``lock.mdb`` left it owner-only to itself, and the journal's owner could no longer
open the journal. Root-only tests mount, or change owners, and are skipped elsewhere.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

import cogfabric._audit
from cogfabric.cli import main
from cogfabric.store import Journal, JournalFormatError, JournalLockedError, JournalUnavailableError
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


def _journal(path: Path, count: int = 5) -> Path:
    with Journal.open(path) as journal:
        journal.append(make_events(count))
    return path


def _as_read_only_file_system(monkeypatch: pytest.MonkeyPatch, under: Path) -> None:
    """Make ``os.statvfs`` report the file system of every path under ``under`` mounted read-only."""
    real = os.statvfs

    def statvfs(path: str | os.PathLike[str]) -> os.statvfs_result:
        result = real(path)
        if not os.fspath(path).startswith(os.fspath(under)):
            return result
        fields = list(result)
        fields[8] |= os.ST_RDONLY  # f_flag
        return os.statvfs_result(fields)

    monkeypatch.setattr(os, "statvfs", statvfs)


@contextlib.contextmanager
def _writer_lock_held(path: Path) -> Iterator[None]:
    """Hold ``path``'s writer.lock as a writer does (an exclusive flock), as another process would."""
    fd = os.open(path / "writer.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


def test_a_journal_a_writer_holds_is_not_read_from_a_read_only_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    _as_read_only_file_system(monkeypatch, tmp_path)

    with _writer_lock_held(path), pytest.raises(JournalLockedError, match="read-only file system"):
        Journal.open(path, readonly=True)  # was read with no reader registered


def test_a_reader_on_a_read_only_file_system_holds_writers_off_until_it_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    _as_read_only_file_system(monkeypatch, tmp_path)

    with Journal.open(path, readonly=True) as journal:
        assert journal.last_seq == 5
        fd = os.open(path / "writer.lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # a writer in another process would be refused
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    with Journal.open(path) as journal:  # closed: writers come back
        assert journal.append(make_events(1, start=6)) == [6]


def test_a_data_file_alone_on_a_read_only_file_system_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    (path / "writer.lock").unlink()  # copied onto the medium alone: no writer ever held it there
    _as_read_only_file_system(monkeypatch, tmp_path)

    with Journal.open(path, readonly=True) as journal:
        assert journal.verify().ok


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A directory and a read-only bind mount of it (root only; skipped where it cannot be mounted)."""
    source, mount = tmp_path / "rw", tmp_path / "ro"
    source.mkdir()
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a bind mount needs root")
    made = subprocess.run(
        ["mount", "--bind", str(source), str(mount)], capture_output=True, check=False, timeout=30
    )
    if made.returncode:
        pytest.skip(f"cannot bind-mount: {made.stderr!r}")
    try:
        remounted = subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(mount)], capture_output=True, check=False, timeout=30
        )
        if remounted.returncode:
            pytest.skip(f"cannot make a bind mount read-only: {remounted.stderr!r}")
        yield source, mount
    finally:
        # a descriptor a regression leaked keeps the mount busy: detach it all the same, and
        # say so, rather than leave it under pytest's directory
        if subprocess.run(["umount", str(mount)], check=False, timeout=30).returncode:
            subprocess.run(["umount", "-l", str(mount)], check=False, timeout=30)
            pytest.fail(f"{mount} was busy at the end of the test (a descriptor left open on it)")


def test_a_read_only_bind_mount_of_a_live_journal_is_refused_and_holds_writers_off(
    read_only_mount: tuple[Path, Path],
) -> None:
    source, mount = read_only_mount
    _journal(source / "j")

    with _writer_lock_held(source / "j"), pytest.raises(JournalLockedError, match="read-only file system"):
        Journal.open(mount / "j", readonly=True)
    with Journal.open(mount / "j", readonly=True) as journal:
        assert journal.verify().ok
        with pytest.raises(JournalLockedError, match="being read from a read-only file system"):
            Journal.open(source / "j")
    with Journal.open(source / "j") as journal:
        assert journal.last_seq == 5


def _give_to_another_user(path: Path, uid: int = 65534) -> None:
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    os.chown(path, uid, -1)
    for name in ("data.mdb", "writer.lock"):
        os.chown(path / name, uid, -1)
    (path / "lock.mdb").unlink()  # a journal restored without it, or its stale one removed


def test_root_reading_another_users_journal_leaves_its_new_lock_file_to_that_user(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j")
    _give_to_another_user(path)

    with Journal.open(path, readonly=True) as journal:
        assert journal.verify().ok
    lock = (path / "lock.mdb").stat()
    assert (lock.st_uid, lock.st_mode & 0o777) == (65534, 0o600)  # root's: its owner locked out


def test_root_auditing_another_users_journal_in_place_leaves_its_new_lock_file_to_that_user(
    tmp_path: Path,
) -> None:
    path = _journal(tmp_path / "j")
    _give_to_another_user(path)

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 0, result.output
    assert (path / "lock.mdb").stat().st_uid == 65534
    assert {p.stat().st_uid for p in path.iterdir()} == {65534}


def test_another_user_reading_a_journal_without_a_lock_file_is_refused_not_left_its_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    (path / "lock.mdb").unlink()
    auditor = os.geteuid() + 1 or 1  # neither the journal's owner nor root
    monkeypatch.setattr(os, "geteuid", lambda: auditor)

    with pytest.raises(JournalUnavailableError, match="would lock the journal's owner"):
        Journal.open(path, readonly=True)
    assert not (path / "lock.mdb").exists()


def test_a_writer_is_told_whose_lock_file_keeps_it_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    os.chown(path / "lock.mdb", 65534, -1)  # made by an auditor running as nobody
    real_access = os.access
    monkeypatch.setattr(  # root may write any file: stand for its owner, who may not
        os,
        "access",
        lambda p, mode, **kw: False if str(p).endswith("lock.mdb") else real_access(p, mode, **kw),
    )

    with pytest.raises(JournalUnavailableError, match=r"lock\.mdb belongs to uid 65534"):
        Journal.open(path)


@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir])
def test_a_lock_file_that_is_no_regular_file_is_refused_by_name(tmp_path: Path, make: object) -> None:
    path = _journal(tmp_path / "j")
    (path / "lock.mdb").unlink()
    make(path / "lock.mdb")  # type: ignore[operator]

    for readonly in (True, False):  # was "Illegal seek", "Is a directory"
        with pytest.raises(JournalFormatError, match=r"its lock\.mdb is not a regular file"):
            Journal.open(path, readonly=readonly)
    assert CliRunner().invoke(main, ["verify", str(path), "--copy"]).exit_code == 0


def test_a_busy_copy_does_not_advise_an_in_place_audit_the_user_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j")
    real_copy = cogfabric._audit._copy_used

    def copy_during_a_commit(source: Path, target: Path) -> None:
        real_copy(source, target)
        st = source.stat()
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))

    monkeypatch.setattr(cogfabric._audit, "_copy_used", copy_during_a_commit)
    unwritable = "its lock file (lock.mdb) is not writable"
    monkeypatch.setattr(cogfabric._audit, "_not_writable", lambda _: unwritable)

    result = CliRunner().invoke(main, ["verify", str(path), "--copy"])

    assert result.exit_code == 2, result.output
    assert "audit it in place" not in result.output
    assert "in place cannot be audited as you: its lock file (lock.mdb) is not writable" in result.output
