"""Review of the writer lock's release and the reader table's retries (session 61, h12: h1's, h8's commits).

h1's commit has an interrupted ``close()`` finished by the next one, which now runs the
close path again: here, a journal opened at the path between the two keeps its writer
lock (the second ``close()`` neither clears its pid from ``writer.lock`` nor closes its
descriptor, whichever descriptor number it got), and a truncation the file refuses (a
file system remounted read-only) still lets go of the lock. h8's commit names a PID
namespace for LMDB's refusal of a reader whose pid's lock another process holds: here,
a holder this process can see, which is no other namespace's.
"""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

from cogfabric.store import Journal, JournalLockedError, JournalUnavailableError
from tests.store.test_close_interrupted_s61_h1 import _interrupted_close, _on_a_thread, _RealLanding
from tests.store.test_live_reader_s61_h3 import _done
from tests.store.test_review_s61_h8 import _small_journal
from tests.test_interrupt_hold_s58_h1 import (  # autouse: Python's own SIGINT handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)

if TYPE_CHECKING:
    from pathlib import Path


def _lock_of_another(path: Path) -> str:
    """What is wrong with the writer lock of a journal this process has open at ``path`` ("" if held)."""
    fd = os.open(path / "writer.lock", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another open file: refused while it is held
    except BlockingIOError:
        pid = os.pread(fd, 32, 0)
        return "" if pid == b"%d\n" % os.getpid() else f"writer.lock says {pid!r}"
    else:
        return "not held"
    finally:
        os.close(fd)


def _land_then_open(path: Path, n: int) -> tuple[_RealLanding, list[str], bool]:
    """A SIGINT at the ``n``-th point of a close; a new journal at ``path``; then the first's close again.

    What went wrong, and whether the new journal could be opened (the lock was let go already).
    """
    journal = Journal.open(path)
    landing = _interrupted_close(journal, n)
    try:
        other = Journal.open(path)
    except JournalLockedError:  # the Ctrl-C landed before the lock was let go: the next close() does
        other = None
    problems = []
    closing = _on_a_thread(journal.close)
    if closing is not None:
        problems.append(f"a second close() gave {closing!r}")
    if other is not None:
        wrong = _lock_of_another(path)
        if wrong:
            problems.append(f"the journal opened meanwhile: {wrong}")
        if not other.verify().ok:
            problems.append("the journal opened meanwhile does not verify")
        other.close()
    return landing, problems, other is not None


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_journal_opened_between_an_interrupted_close_and_the_next_keeps_its_writer_lock(
    tmp_path: Path,
) -> None:
    failures: dict[str, list[str]] = {}
    opened_between = 0
    n = 1
    while True:
        path = tmp_path / str(n)
        _small_journal(path)
        landing, problems, opened = _land_then_open(path, n)
        if not landing.where:
            break
        if problems:
            failures[f"N={n} {landing.where}"] = problems
        opened_between += opened
        n += 1
    assert opened_between  # some landings let go of the lock first: the journal opened between
    assert not failures, f"{len(failures)} of {n - 1} landings: {failures}"


def test_a_close_whose_truncation_of_writer_lock_fails_still_lets_go_of_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "j"
    _small_journal(path)
    journal = Journal.open(path)

    def read_only(*_: int) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    with monkeypatch.context() as patched:
        patched.setattr(os, "ftruncate", read_only)  # a file system remounted read-only
        journal.close()
    journal.close()  # nothing left to do
    with Journal.open(path) as again:  # the lock was let go: not JournalLockedError
        assert again.last_seq == 5


_PID_LOCK = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, int(sys.argv[2]))  # the byte LMDB locks for that pid
    print("held", flush=True)
    sys.stdin.read()
""")


def test_a_reader_whose_pid_lock_a_process_of_its_own_namespace_holds_is_not_told_only_of_namespaces(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j"
    _small_journal(path)
    holder = subprocess.Popen(  # no LMDB: a program that locks lock.mdb by other means, pid visible here
        [sys.executable, "-c", _PID_LOCK, str(path / "lock.mdb"), str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(JournalUnavailableError) as caught:
            Journal.open(path, readonly=True)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        _done(holder)
    message = str(caught.value)
    assert f"this one's ({os.getpid()})" in message
    assert "another PID namespace" in message  # the likeliest cause still comes first
    # before: "most likely" that, and nothing else: no word of the two other holders there can be
    assert "network file system" in message
    assert "a program other than LMDB" in message
    with Journal.open(path, readonly=True) as journal:  # once that lock is gone
        assert journal.last_seq == 5
