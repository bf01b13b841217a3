"""Review of the stale reader slots a read-only journal frees (session 61, h8; h3's commit).

A dashboard keeps ``Journal.open(path, readonly=True)`` open and polls it; readers killed
inside a read (kill -9) fill LMDB's reader table, and ``_txn_call`` frees their slots when
the table is full, then reads again. Here: that retry when the writer also grew the map
meanwhile (the read again met ``MDB_MAP_RESIZED``, which it did not adopt), and a backup
of a read-only journal, which took its read transaction outside ``_txn_call``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalUnavailableError, LmdbJournal
from tests.store.test_live_reader_s61_h3 import _done, _fill_reader_table

if TYPE_CHECKING:
    from pathlib import Path

_GROW = textwrap.dedent("""
    import sys
    from cogfabric.events import PrivateSet
    from cogfabric.store import Journal
    with Journal.open(sys.argv[1], map_size=64 * 1024, sync=False) as journal:
        start = journal.map_size
        while journal.map_size == start:
            journal.append([PrivateSet(at=0.0, agent="a", key="k", value="x" * 2000) for _ in range(20)])
        print(journal.last_seq, flush=True)
""")


def _grown_by_another_process(path: Path) -> int:
    """Appends in a child until its map grows past the one ``path`` was opened with: its last seq."""
    done = subprocess.run(
        [sys.executable, "-c", _GROW, str(path)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def _small_journal(path: Path) -> None:
    with Journal.open(path, map_size=64 * 1024, sync=False) as journal:
        journal.append([PrivateSet(at=0.0, agent="a", key="k", value=n) for n in range(5)])


def test_a_full_table_then_a_grown_map_is_one_read_not_a_failed_poll(tmp_path: Path) -> None:
    path = tmp_path / "j"
    _small_journal(path)
    with LmdbJournal.open(path, readonly=True, map_size=64 * 1024) as dashboard:
        started = dashboard.map_size
        last = _grown_by_another_process(path)
        _fill_reader_table(path, kill=True)  # LMDB says the table is full before the map grew

        assert dashboard.last_seq == last  # before: JournalUnavailableError (MDB_MAP_RESIZED)
        assert dashboard.map_size > started
        assert [record.seq for record in dashboard.read(after=last - 1)] == [last]


def test_a_read_only_journals_backup_frees_the_slots_of_killed_readers(tmp_path: Path) -> None:
    path = tmp_path / "j"
    _small_journal(path)
    with LmdbJournal.open(path, readonly=True) as dashboard:
        _fill_reader_table(path, kill=True)
        assert dashboard.backup(tmp_path / "compact") == 5  # before: LMDB's MDB_READERS_FULL
        _fill_reader_table(path, kill=True)
        assert dashboard.backup(tmp_path / "plain", compact=False) == 5
    for copy in ("compact", "plain"):
        with LmdbJournal.open(tmp_path / copy, readonly=True) as journal:
            assert journal.verify().ok
            assert journal.last_seq == 5


def test_a_backup_refused_by_a_table_of_live_readers_names_the_reader_table(tmp_path: Path) -> None:
    path = tmp_path / "j"
    _small_journal(path)
    with LmdbJournal.open(path, readonly=True) as dashboard:
        holder = _fill_reader_table(path, kill=False)
        try:
            with pytest.raises(JournalUnavailableError) as caught:
                dashboard.backup(tmp_path / "copy")
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            _done(holder)
    message = str(caught.value)
    assert message.startswith(f"cannot back up {path} to {tmp_path / 'copy'}: every slot")
    assert "reader table (254) is taken" in message
    assert "max_readers" not in message
    assert not (tmp_path / "copy").exists()


_HOLD = textwrap.dedent("""
    import sys
    from cogfabric.store import Journal
    journal = Journal.open(sys.argv[1])
    print(journal.last_seq, flush=True)
    sys.stdin.read()
""")


def _in_own_pid_namespace(code: str, *args: str) -> list[str]:
    """``python -c code`` as pid 1 of a PID namespace of its own, as a container's first process."""
    return ["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-c", code, *args]


def _pid_namespaces() -> bool:
    try:
        done = subprocess.run(
            ["unshare", "--pid", "--fork", "true"], capture_output=True, timeout=30, check=False
        )
    except OSError:
        return False
    return done.returncode == 0


def test_a_reader_with_the_pid_of_a_writer_in_another_container_is_told_why_it_cannot_read(
    tmp_path: Path,
) -> None:
    if not _pid_namespaces():
        pytest.skip("no PID namespaces here (unshare --pid needs privileges)")
    path = tmp_path / "j"
    _small_journal(path)
    writer = subprocess.Popen(  # pid 1 in its namespace
        _in_own_pid_namespace(_HOLD, str(path)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "5\n"
        dashboard = subprocess.run(
            _in_own_pid_namespace(
                "import sys\nfrom cogfabric.store import Journal\nJournal.open(sys.argv[1], readonly=True)\n",
                str(path),
            ),
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=False,
        )
        err = dashboard.stderr
    finally:
        assert writer.stdin is not None
        writer.stdin.close()
        _done(writer)
    assert dashboard.returncode != 0
    # before: "mdb_txn_begin: Resource temporarily unavailable", and nothing of why
    last = err.strip().splitlines()[-1]
    assert last.startswith("cogfabric.store._errors.JournalUnavailableError: "), err
    assert "this one's (1): most likely a process with the same id, in another PID namespace" in last
    assert "Resource temporarily unavailable" not in last
    assert writer.returncode == 0
