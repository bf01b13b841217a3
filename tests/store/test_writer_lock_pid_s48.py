"""A refused writer is told which process holds the journal: the holder's pid in ``writer.lock``.

An operator whose second run is refused ("held by another writer") looked for the holder
with ``fuser``: the file was empty. The writer now writes its pid there once it holds the
lock and clears it as it lets go, so a refusal names a live holder, never one that closed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

from cogfabric.store import Journal, JournalLockedError
from tests.store.test_lmdb_journal import _idle_child

if TYPE_CHECKING:
    from pathlib import Path

_REFUSED = textwrap.dedent(
    """
    import sys
    from cogfabric.store import Journal, JournalLockedError
    try:
        Journal.open(sys.argv[1])
    except JournalLockedError as exc:
        print(exc)
    """
)


def _refusal(path: Path) -> str:
    """What another process is told when it opens ``path`` for writing."""
    out = subprocess.run(
        [sys.executable, "-c", _REFUSED, str(path)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


def test_the_writer_s_pid_is_in_writer_lock_while_it_holds_it(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j"):
        assert (tmp_path / "j" / "writer.lock").read_bytes() == b"%d\n" % os.getpid()
    assert (tmp_path / "j" / "writer.lock").read_bytes() == b""


def test_another_process_is_told_the_holder_s_pid(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j"):
        refusal = _refusal(tmp_path / "j")
    assert (
        refusal
        == f"{tmp_path / 'j'} is held by another writer (process {os.getpid()}, as its writer.lock says)"
    )


def test_a_pid_a_crash_left_is_replaced_by_the_next_writer_s(tmp_path: Path) -> None:
    Journal.open(tmp_path / "j").close()
    (tmp_path / "j" / "writer.lock").write_bytes(b"123456789\n")  # a writer killed while open
    with Journal.open(tmp_path / "j") as journal:
        assert journal.last_seq == 0
        assert (tmp_path / "j" / "writer.lock").read_bytes() == b"%d\n" % os.getpid()


def test_a_holder_that_wrote_no_pid_is_not_given_one(tmp_path: Path) -> None:
    # a lock taken by other means (an older cogfabric, a script's flock) names no process;
    # the pid of the writer that closed before is gone with its close
    Journal.open(tmp_path / "j").close()
    hold = "import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\nfcntl.flock(fd, fcntl.LOCK_EX)\n"
    hold += "print('locked', flush=True)\nsys.stdin.read()\n"
    with subprocess.Popen(
        [sys.executable, "-c", hold, str(tmp_path / "j" / "writer.lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    ) as holder:
        assert holder.stdin is not None
        assert holder.stdout is not None
        try:
            assert holder.stdout.readline().strip() == "locked"
            with pytest.raises(JournalLockedError) as refused:
                Journal.open(tmp_path / "j")
        finally:
            holder.stdin.close()
            holder.wait(10)
    assert str(refused.value) == f"{tmp_path / 'j'} is held by another writer"


def test_a_forked_child_leaves_the_parent_s_pid_in_place(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j"):
        with _idle_child():  # the child has closed its copy of the lock by now
            assert (tmp_path / "j" / "writer.lock").read_bytes() == b"%d\n" % os.getpid()
        assert _refusal(tmp_path / "j").endswith(f"(process {os.getpid()}, as its writer.lock says)")
