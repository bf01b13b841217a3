"""A full disk (a file-size limit in a child process): typed errors, fail-stop, nothing acknowledged lost."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import lmdb
import pytest

from cogfabric.actors import Runtime
from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalReadOnlyError, JournalUnavailableError
from cogfabric.store._lmdb import _journal_error

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

_CHILD = textwrap.dedent(
    """
    import os, resource, signal, sys
    from cogfabric.actors import Runtime
    from cogfabric.store import JournalError

    path = sys.argv[1]
    with Runtime.open(path) as rt:
        agent = rt.spawn("a")
        rt.flush()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    size = os.path.getsize(path + "/data.mdb") + 2_000_000
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    with Runtime.open(path) as rt:
        agent = rt.agent("a")
        n = 0
        try:
            while True:
                agent.set_private(f"k{n}", "x" * 50_000)
                print("acked", n, flush=True)
                n += 1
        except JournalError as exc:
            print("error", type(exc).__name__, flush=True)
        try:
            agent.set_private("after", 1)
            print("after-succeeded", flush=True)
        except JournalError as exc:
            print("after", type(exc).__name__, flush=True)
        print("memory", agent.private(f"k{n}") is None, agent.private("after") is None, flush=True)
    """
)


def test_a_full_disk_fails_appends_with_a_typed_error_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "j"

    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )

    lines = out.stdout.splitlines()
    acked = [int(line.split()[1]) for line in lines if line.startswith("acked")]
    assert out.returncode == 0, out.stderr
    assert acked, out.stdout
    assert any(line.startswith("error Journal") for line in lines), lines[-5:]
    assert any(line.startswith("after Journal") for line in lines), "fail-stop: later appends must fail"
    assert "memory True True" in lines, "the agent must not run ahead of the journal"
    with Runtime.open(path) as rt:
        agent = rt.agent("a")
        assert all(agent.private(f"k{n}") is not None for n in acked)
        assert agent.private(f"k{acked[-1] + 1}") is None
        agent.set_private("again", 1)
        assert agent.private("again") == 1


def test_an_io_error_names_the_free_space_as_lmdb_reports_a_short_write_as_eio(tmp_path: Path) -> None:
    # LMDB turns a write that a full disk cut short into EIO: the operator reads that as
    # failing hardware unless the error says how much room is left.
    error = _journal_error(tmp_path, lmdb.Error("mdb_txn_commit: Input/output error"), "; fail-stop")

    assert isinstance(error, JournalUnavailableError)
    assert re.fullmatch(
        rf"{re.escape(str(tmp_path))}: mdb_txn_commit: Input/output error \(its file system has [\d,]+ bytes "
        r"free: LMDB reports a write that a full disk cut short as an I/O error\); fail-stop",
        str(error),
    ), str(error)


def test_an_error_of_an_open_names_its_path_once_and_says_what_a_failed_mapping_means(tmp_path: Path) -> None:
    error = _journal_error(tmp_path, lmdb.Error(f"{tmp_path}: Cannot allocate memory"))

    assert (
        str(error)
        == f"{tmp_path}: Cannot allocate memory (its map size may be more than this process can map)"
    )


@pytest.fixture
def small_file_system(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (root only; skipped where it cannot be mounted)."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
        timeout=30,
    )
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs: {made.stderr!r}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False, timeout=30)


def test_a_full_file_system_is_named_in_the_error(small_file_system: Path) -> None:
    path = small_file_system / "j"
    acked: list[int] = []
    error: JournalUnavailableError | None = None
    with Runtime.open(path) as rt:
        agent = rt.spawn("a")
        for n in range(200):  # 4 MB into 2 MiB
            try:
                agent.set_private(f"k{n}", "x" * 20_000)
            except JournalUnavailableError as exc:
                error = exc
                break
            acked.append(n)

    assert error is not None
    assert "its file system has" in str(error) or "No space left" in str(error), error
    with Journal.open(path, readonly=True) as journal:
        stored = {r.event.key for r in journal.read(stream="agent/a") if isinstance(r.event, PrivateSet)}
    assert stored >= {f"k{n}" for n in acked}


def test_a_journal_this_user_cannot_open_is_not_called_open_read_only(tmp_path: Path) -> None:
    # py-lmdb names EACCES opening the files ReadonlyError; the journal said "is open
    # read-only" of a journal nothing had opened (simulate on files of another user)
    opening = _journal_error(tmp_path, lmdb.ReadonlyError(f"{tmp_path}: Permission denied"))
    writing = _journal_error(tmp_path, lmdb.ReadonlyError("mdb_txn_begin: Permission denied"))

    assert isinstance(opening, JournalUnavailableError)
    assert str(opening) == (
        f"{tmp_path}: Permission denied (LMDB writes its lock file, lock.mdb, even to read: "
        "this user needs write access to it)"
    )
    assert isinstance(writing, JournalReadOnlyError)
