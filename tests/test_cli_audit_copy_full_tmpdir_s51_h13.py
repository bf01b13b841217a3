"""``--copy`` notices a write of its copy cut short by a full file system (helper h13, session 51).

A write that fills the file system writes part of its bytes and raises nothing; only the
next one raises ENOSPC. The copy took that part for the whole, so a copy whose last write
was cut short was a journal with zeros for its end: the audit then said "no space left
for LMDB's lock file" where the data file did not fit, or, once room came back (another
process freeing some, a quota statvfs does not show), that the user's sound journal was
damaged and should be restored from a copy.
"""

from __future__ import annotations

import errno
import os
import tempfile
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric import Runtime
from cogfabric.cli import main
from tests.reliability.test_disk_full import small_file_system  # noqa: F401

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    path = tmp_path / "j"
    with Runtime.open(path) as rt:
        agent = rt.spawn("a")
        for n in range(40):
            agent.set_private(f"k{n}", f"{n}" * 5000)  # about 200 KiB of records
    return path


def test_a_copy_that_fills_its_file_system_is_no_room_not_damage(
    journal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    room = [64 << 10]  # what a file system with 64 KiB free does with the copy's writes
    real = os.pwrite

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        if not room[0]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = real(fd, bytes(data[: room[0]]), offset)
        room[0] -= written
        return written

    monkeypatch.setattr(os, "pwrite", pwrite)

    result = CliRunner().invoke(main, ["verify", "--copy", str(journal)])

    assert result.exit_code == 2, result.output
    assert "damaged" not in result.stderr
    assert f"{journal}: no room for a private copy of its data file under {scratch} " in result.stderr


def test_a_real_file_system_too_small_for_the_copy_is_named_as_such(
    journal: Path,
    small_file_system: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a 2 MiB tmpfs holding all but 64 KiB: the copy's one write (its data is less than a
    # chunk) is cut short, and the file system is full for the lock file after it
    free = os.statvfs(small_file_system)
    (small_file_system / "filler").write_bytes(b"\1" * (free.f_bavail * free.f_frsize - (64 << 10)))
    monkeypatch.setattr(tempfile, "tempdir", str(small_file_system))

    result = CliRunner().invoke(main, ["verify", "--copy", str(journal)])

    assert result.exit_code == 2, result.output
    expected = f"{journal}: no room for a private copy of its data file under {small_file_system} "
    assert expected in result.stderr
