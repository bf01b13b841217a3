"""Mutation round on ``Journal.backup``, ``Runtime.backup`` and ``cogfabric backup`` (session 53, h16)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from typing import TYPE_CHECKING, Any

import lmdb
import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric.cli import main
from cogfabric.store import JournalClosedError, JournalUnavailableError, LmdbJournal
from cogfabric.store.testing import make_events
from tests.test_backup_s53_h10 import _journal, _names, _same_prefix

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_GROW = """
import sys
from cogfabric.store import LmdbJournal
from cogfabric.store.testing import make_events
with LmdbJournal.open(sys.argv[1], map_size=1 << 20, max_map_size=1 << 26) as journal:
    before = journal.map_size
    journal.append(make_events(600, start=journal.last_seq, value="g" * 3000))
    assert journal.map_size > before, (before, journal.map_size)
"""


class _SeenWaiting(threading.Condition):
    """The journal's ``_backups_done``, telling when ``close()`` begins to wait on it."""

    def __init__(self, lock: Any) -> None:
        super().__init__(lock)
        self.waiting = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        return super().wait(timeout)


def _watch_close(journal: LmdbJournal) -> _SeenWaiting:
    seen = _SeenWaiting(journal._lock)
    journal._backups_done = seen
    return seen


def _closing_meanwhile(close: Callable[[], None], seen: _SeenWaiting) -> threading.Thread:
    """Start ``close`` in a thread and return once it waits for the backup under way."""
    closer = threading.Thread(target=close, daemon=True)  # daemon: a mutant may leave it waiting
    closer.start()
    assert seen.waiting.wait(10), "close() did not wait for the backup under way"
    return closer


def test_a_backup_syncs_its_data_file_its_directory_and_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _journal(tmp_path / "j")
    synced: list[int] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real(fd)

    with LmdbJournal.open(source, readonly=True) as journal:
        monkeypatch.setattr(os, "fsync", spy)
        journal.backup(tmp_path / "b")
        monkeypatch.undo()
    dest = tmp_path / "b"
    inodes = [(dest / "data.mdb").stat().st_ino, dest.stat().st_ino, tmp_path.stat().st_ino]
    assert synced == inodes


def test_a_copy_retried_after_a_map_resize_starts_its_file_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # trailing bytes of the first try are not noticed by verify: LMDB reads up to its last page
    source = _journal(tmp_path / "j")
    with LmdbJournal.open(source, readonly=True) as journal:
        journal.backup(tmp_path / "once")
    size = (tmp_path / "once" / "data.mdb").stat().st_size
    real = LmdbJournal._copy_to
    tries: list[bool] = []

    def resized_first(self: LmdbJournal, fd: int, *, compact: bool) -> int | None:
        tries.append(compact)
        if len(tries) == 1:  # a first copy, of a larger state, cut off
            os.write(fd, b"\xff" * (3 * size))
            msg = "mdb_txn_begin: MDB_MAP_RESIZED"
            raise lmdb.MapResizedError(msg)
        return real(self, fd, compact=compact)

    monkeypatch.setattr(LmdbJournal, "_copy_to", resized_first)
    with LmdbJournal.open(source, readonly=True) as journal:
        assert journal.backup(tmp_path / "b") == 50
    assert tries == [True, True]
    assert (tmp_path / "b" / "data.mdb").stat().st_size == size
    _same_prefix(tmp_path / "b", source, 50)


@pytest.mark.parametrize("compact", [True, False])
def test_a_backup_adopts_the_map_another_process_grew(tmp_path: Path, compact: bool) -> None:
    source = tmp_path / "j"
    with LmdbJournal.open(source, map_size=1 << 20, max_map_size=1 << 26) as journal:
        journal.append(make_events(50))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with LmdbJournal.open(source, readonly=True, map_size=1 << 20) as journal:
        assert journal.map_size == 1 << 20
        subprocess.run([sys.executable, "-c", _GROW, str(source)], env=env, check=True, timeout=60)
        assert journal.backup(tmp_path / "b", compact=compact) == 650
    _same_prefix(tmp_path / "b", source, 650)


def test_close_waits_for_a_backup_under_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _journal(tmp_path / "j")
    journal = LmdbJournal.open(source, readonly=True)
    seen = _watch_close(journal)
    real = LmdbJournal._copy_to
    closers: list[threading.Thread] = []

    def close_meanwhile(self: LmdbJournal, fd: int, *, compact: bool) -> int | None:
        if not closers:
            closers.append(_closing_meanwhile(journal.close, seen))
        return real(self, fd, compact=compact)

    monkeypatch.setattr(LmdbJournal, "_copy_to", close_meanwhile)
    try:
        assert journal.backup(tmp_path / "b") == 50
    finally:
        for closer in closers:
            closer.join(10)
        if not closers:  # a closer still waiting (a failure) is left alone: closing would wait too
            journal.close()
    assert closers
    assert not closers[0].is_alive(), "close() was not told the backup ended"
    assert journal.closed
    _same_prefix(tmp_path / "b", source, 50)


def _close_before_the_copy(
    monkeypatch: pytest.MonkeyPatch, close: Callable[[], None], seen: _SeenWaiting
) -> list[threading.Thread]:
    """Close (in a thread) once the backup's sibling exists, before the copy begins."""
    real = tempfile.mkdtemp
    closers: list[threading.Thread] = []

    def then_close(*args: Any, **kwargs: Any) -> str:
        made: str = real(*args, **kwargs)
        if not closers:
            closers.append(_closing_meanwhile(close, seen))
        return made

    monkeypatch.setattr(tempfile, "mkdtemp", then_close)
    return closers


def test_a_close_before_the_copy_begins_fails_the_backup_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _journal(tmp_path / "j")
    journal = LmdbJournal.open(source, readonly=True)
    closers = _close_before_the_copy(monkeypatch, journal.close, _watch_close(journal))
    try:
        with pytest.raises(JournalClosedError):
            journal.backup(tmp_path / "b")
    finally:
        for closer in closers:
            closer.join(10)
        if not closers:  # a closer still waiting (a failure) is left alone: closing would wait too
            journal.close()
    assert closers
    assert not closers[0].is_alive()
    assert _names(tmp_path) == ["j"]


def test_a_runtime_closed_by_another_thread_during_its_backup_says_so_by_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = cf.Runtime.open(tmp_path / "j")
    rt.spawn("a")
    journal = rt._journal
    assert isinstance(journal, LmdbJournal)
    closers = _close_before_the_copy(monkeypatch, rt.close, _watch_close(journal))
    try:
        with pytest.raises(cf.RuntimeClosedError):
            rt.backup(tmp_path / "b")
    finally:
        for closer in closers:
            closer.join(10)
        if not closers:  # a closer still waiting (a failure) is left alone: closing would wait too
            rt.close()
    assert closers
    assert not closers[0].is_alive()
    assert _names(tmp_path) == ["j"]


@pytest.mark.parametrize(("flags", "compact"), [([], True), (["--no-compact"], False)])
def test_cli_backup_no_compact_copies_every_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], compact: bool
) -> None:
    source = _journal(tmp_path / "j")
    real = LmdbJournal.backup
    asked: list[bool] = []

    def spy(self: LmdbJournal, dest: Any, *, compact: bool = True) -> int:
        asked.append(compact)
        return real(self, dest, compact=compact)

    monkeypatch.setattr(LmdbJournal, "backup", spy)
    result = CliRunner().invoke(main, ["backup", str(source), str(tmp_path / "b"), *flags])
    assert result.exit_code == 0, result.output
    assert asked == [compact]


def test_a_backup_onto_the_working_directory_says_it_is_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # renaming onto "." fails with EBUSY, as onto a mount point: the message names both
    source = _journal(tmp_path / "j")
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    with (
        LmdbJournal.open(source, readonly=True) as journal,
        pytest.raises(JournalUnavailableError, match=r"in use \(a mount point, or the working directory\)"),
    ):
        journal.backup(".")
    assert list(empty.iterdir()) == []
