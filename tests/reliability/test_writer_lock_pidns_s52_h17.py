"""A reader /proc/locks does not show (another PID namespace's) still gets the reader's message.

Linux leaves out of a ``/proc`` the locks of processes outside its PID namespace: a writer
in a container (its own ``/proc``) found no lock on ``writer.lock`` while a reader on the
host's read-only mount held it, and was told another writer held the journal (helper h17's
review of 36e6e6d).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cogfabric.store import JournalLockedError, _lmdb
from cogfabric.store._lmdb import LmdbJournal, _only_readers_hold

pytestmark = pytest.mark.skipif(not Path("/proc/locks").exists(), reason="reads Linux's /proc/locks")


def _held(path: Path, how: int) -> int:
    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, how | fcntl.LOCK_NB)
    return fd


@pytest.fixture
def unseen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A journal directory with a ``writer.lock``, seen through a /proc/locks that shows no lock."""
    table = tmp_path / "locks"
    table.write_text("", encoding="utf-8")
    monkeypatch.setattr(_lmdb, "_PROC_LOCKS", table)
    where = tmp_path / "journal"
    where.mkdir()
    (where / "writer.lock").write_bytes(b"")
    return where


def test_a_lock_not_shown_is_not_called_a_writers(unseen: Path) -> None:
    assert _only_readers_hold(unseen) is None


def test_a_reader_not_shown_gets_the_readers_message(unseen: Path) -> None:
    reader = _held(unseen / "writer.lock", fcntl.LOCK_SH)
    try:
        with pytest.raises(JournalLockedError, match="being read from a read-only file system"):
            LmdbJournal._take_writer_lock(unseen)
    finally:
        os.close(reader)


def test_a_writer_not_shown_is_another_writer(unseen: Path) -> None:
    writer = _held(unseen / "writer.lock", fcntl.LOCK_EX)
    try:
        with pytest.raises(JournalLockedError, match="held by another writer"):
            LmdbJournal._take_writer_lock(unseen)
    finally:
        os.close(writer)


_IN_A_CONTAINER = """
import sys
from pathlib import Path
from cogfabric.store import JournalLockedError
from cogfabric.store._lmdb import LmdbJournal
try:
    LmdbJournal._take_writer_lock(Path(sys.argv[1])).release()
except JournalLockedError as exc:
    print(exc)
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="root's unshare")
def test_a_reader_outside_the_writers_pid_namespace(tmp_path: Path) -> None:
    (tmp_path / "writer.lock").write_bytes(b"")
    reader = _held(tmp_path / "writer.lock", fcntl.LOCK_SH)
    try:
        ran = subprocess.run(
            ["unshare", "-p", "-f", "--mount-proc", sys.executable, "-c", _IN_A_CONTAINER, str(tmp_path)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            check=False,
        )
    finally:
        os.close(reader)
    if ran.returncode != 0:
        pytest.skip(f"no PID namespace here: {ran.stderr.strip()}")
    assert "being read from a read-only file system" in ran.stdout
