"""``--copy`` with a full temporary directory names that directory, not the journal (helper h11, session 51).

An audit's ``--copy`` copies the data file under ``TMPDIR`` and opens the copy there.
When that file system had no room, the error named the user's journal: "J: no space left
on its file system for LMDB's lock file", or "J: cannot copy its data file: No space left
on device", for a journal on a disk with room to spare, while the full one was /tmp.
"""

from __future__ import annotations

import errno
import os
import tempfile
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from cogfabric import Runtime
from cogfabric.cli import main
from tests.reliability.test_disk_full import small_file_system  # noqa: F401

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    path = tmp_path / "j"
    with Runtime.open(path) as rt:
        rt.spawn("a").set_private("k", "v" * 1000)
    return path


def _full_below(where: Path, real: Callable[[Any], os.statvfs_result]) -> Callable[[Any], os.statvfs_result]:
    """``os.statvfs`` as it is, but for a file system with no free block under ``where``."""

    def statvfs(path: Any) -> os.statvfs_result:
        result = real(path)
        if not os.fsdecode(path).startswith(str(where)):
            return result
        values = list(result)
        values[3] = values[4] = 0  # f_bfree, f_bavail
        return os.statvfs_result(values)

    return statvfs


def test_no_room_for_the_copys_lock_file_names_the_temporary_directory(
    journal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setattr(os, "statvfs", _full_below(scratch, os.statvfs))

    result = CliRunner().invoke(main, ["verify", "--copy", str(journal)])

    assert result.exit_code == 2, result.output
    assert f"{journal}'s private copy under {scratch} (TMPDIR): no space left" in result.stderr, result.stderr


def test_no_room_for_the_copy_of_the_data_file_names_the_temporary_directory(
    journal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    def full(_source: Path, _target: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("cogfabric._audit._copy_used", full)

    result = CliRunner().invoke(main, ["export", "--copy", str(journal)])

    assert result.exit_code == 2, result.output
    assert f"{journal}: no room for a private copy of its data file under {scratch} " in result.stderr
    assert "set TMPDIR to one with room" in result.stderr


def test_a_real_full_temporary_directory_is_named(
    journal: Path,
    small_file_system: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a 2 MiB tmpfs (root only) holding all but 96 KiB: the copy (64 KiB) fits, LMDB's lock
    # file may not (with 32 KiB left, the copy was cut short: test_cli_audit_copy_full_tmpdir_s51_h13)
    free = os.statvfs(small_file_system)
    filler = small_file_system / "filler"
    filler.write_bytes(b"\1" * (free.f_bavail * free.f_frsize - (96 << 10)))
    monkeypatch.setattr(tempfile, "tempdir", str(small_file_system))

    result = CliRunner().invoke(main, ["verify", "--copy", str(journal)])

    assert result.exit_code == 2, result.output
    assert f"{journal}'s private copy under {small_file_system} (TMPDIR): no space left" in result.stderr
