"""export -o onto another user's file in a sticky directory writes it in place, not beside it (session 52).

Only the file's owner, the directory's or root may rename over a file in a sticky
directory (``/tmp``): the export written beside it failed at the rename, after the whole
export, naming its own ``.partial`` file (helper h9). Such a file is written in place now,
as one in a directory you cannot write is (keeping its mode), or refused at once.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

from click.testing import CliRunner

from cogfabric.cli import _replaceable, main
from tests.test_cli_contract_edges import _journal

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

_SOMEONE = 4242  # the auditor, who owns neither the file nor the directory


def _sticky_with_a_file(tmp_path: Path) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    out = shared / "out.jsonl"
    out.write_text("old\n", encoding="utf-8")
    out.chmod(0o666)  # writable by the auditor; the directory's sticky bit still keeps its name
    return out


def test_another_users_file_in_a_sticky_directory_is_not_written_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _sticky_with_a_file(tmp_path)
    assert _replaceable(out)  # the file's owner (or root) renames over it as before
    monkeypatch.setattr(os, "geteuid", lambda: _SOMEONE)

    assert not _replaceable(out)
    assert _replaceable(out.parent / "new.jsonl")  # a new file is the auditor's own


def test_it_is_written_in_place_and_keeps_its_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _journal(tmp_path, 5)
    out = _sticky_with_a_file(tmp_path)
    inode = out.stat().st_ino
    monkeypatch.setattr(os, "geteuid", lambda: _SOMEONE)

    result = CliRunner().invoke(main, ["export", str(path), "-o", str(out)])

    assert result.exit_code == 0, result.output
    assert len(out.read_text(encoding="utf-8").splitlines()) == 5
    assert out.stat().st_ino == inode  # the same file, not one renamed over it
    assert stat.S_IMODE(out.stat().st_mode) == 0o666
    assert [p.name for p in out.parent.iterdir()] == ["out.jsonl"]  # no .partial left
