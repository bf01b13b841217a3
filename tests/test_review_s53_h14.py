"""Review of ``Journal.backup`` and ``cogfabric backup`` (session 53, helper h14)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cogfabric.cli
from cogfabric.cli import main
from cogfabric.store import JournalUnavailableError, LmdbJournal, _lmdb
from cogfabric.store.testing import make_events

_README = Path(__file__).resolve().parent.parent / "README.md"


def _journal(path: Path, count: int = 20) -> Path:
    with LmdbJournal.open(path, map_size=1 << 22) as journal:
        journal.append(make_events(count))
    return path


def test_a_compact_backup_holds_its_seq_when_this_process_grows_the_map_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # py-lmdb invalidates every transaction when the map is replaced, and copyfd given an
    # invalidated one copies a fresh state: the backup held more than the seq it returned
    real = _lmdb.last_seq_of  # type: ignore[attr-defined]
    with LmdbJournal.open(tmp_path / "j", map_size=1 << 16, max_map_size=1 << 24) as journal:
        journal.append(make_events(10))
        grown: list[int] = []

        def then_grow(*args: Any) -> int:
            seq = real(*args)
            if not grown:  # another thread's append, growing the map, lands here
                before = journal.map_size
                journal.append(make_events(30, start=10, value="g" * 3000))
                grown.append(journal.map_size)
                assert journal.map_size > before
            return seq

        monkeypatch.setattr(_lmdb, "last_seq_of", then_grow)
        seq = journal.backup(tmp_path / "b")
        monkeypatch.setattr(_lmdb, "last_seq_of", real)
    assert grown
    with LmdbJournal.open(tmp_path / "b", readonly=True) as copied:
        assert copied.last_seq == seq == 40
        assert copied.verify(decode=True).ok


@contextlib.contextmanager
def _tmpfs(where: Path) -> Any:
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr!r}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def test_an_empty_mount_point_is_refused_before_copying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # it copied the whole journal into the parent's file system, then failed to rename
    # onto the mount point: "Device or resource busy"
    source = _journal(tmp_path / "j")
    copies: list[int] = []
    real = LmdbJournal._copy_to

    def counted(self: LmdbJournal, fd: int, *, compact: bool) -> int | None:
        copies.append(fd)
        return real(self, fd, compact=compact)

    monkeypatch.setattr(LmdbJournal, "_copy_to", counted)
    with _tmpfs(tmp_path / "mnt") as mount:
        with (
            LmdbJournal.open(source, readonly=True) as journal,
            pytest.raises(JournalUnavailableError, match="mount point"),
        ):
            journal.backup(mount)
        assert copies == []
        result = CliRunner().invoke(main, ["backup", str(source), str(mount)])
        assert result.exit_code == 2
        assert "mount point" in result.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["j", "mnt"]
        assert list(mount.iterdir()) == []


def test_a_backup_that_cannot_be_opened_to_verify_says_it_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a full disk after the copy (no room for lock.mdb) exited 2 with the open's error only,
    # while the README said a full disk leaves nothing under DEST
    source = _journal(tmp_path / "j")
    dest = tmp_path / "b"
    real = cogfabric.cli._audit

    def no_room_for_the_lock(path: Path, *, copy: bool, key: bytes | str | None) -> Any:
        if path == dest:
            msg = f"{dest}: no space left on its file system for LMDB's lock file"
            raise JournalUnavailableError(msg)
        return real(path, copy=copy, key=key)

    monkeypatch.setattr(cogfabric.cli, "_audit", no_room_for_the_lock)
    result = CliRunner().invoke(main, ["backup", str(source), str(dest)])
    assert result.exit_code == 2
    assert f"backed up 20 records to {dest}, which is kept, but could not verify it" in result.stderr
    assert (dest / "data.mdb").exists()
    readme = " ".join(_README.read_text(encoding="utf-8").split())
    assert "cannot be opened to verify" in readme


def test_readme_says_how_a_runtime_hosting_program_backs_up() -> None:
    readme = " ".join(_README.read_text(encoding="utf-8").split())
    section = readme.split("### Backing up a journal", 1)[1].split("## The journal in 20 lines", 1)[0]
    assert "JournalLockedError" in section
    assert "rt.backup(dest)" in section
