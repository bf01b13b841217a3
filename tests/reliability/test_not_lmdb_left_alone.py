"""A directory whose data.mdb is no LMDB file is refused before LMDB writes its lock file there."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.store import Journal, JournalFormatError

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("content", [b"hello\n", os.urandom(300_000), b"\0" * 200_000])
def test_a_data_file_without_lmdbs_header_is_refused_and_nothing_is_added(
    tmp_path: Path, content: bytes
) -> None:
    where = tmp_path / "not-a-journal"
    where.mkdir()
    (where / "data.mdb").write_bytes(content)

    with pytest.raises(JournalFormatError, match="not an LMDB journal this code can open"):
        Journal.open(where, readonly=True)
    for command in ("verify", "inspect", "export", "simulate"):
        option = ["--journal"] if command == "simulate" else []
        result = CliRunner().invoke(main, [command, *option, str(where)])
        assert result.exit_code == 2, result.output
        assert "not an LMDB journal" in result.output
    assert sorted(p.name for p in where.iterdir()) == ["data.mdb"]  # no lock.mdb beside it

    # an open to write takes the journal's writer lock (its file stays) before it looks
    with pytest.raises(JournalFormatError, match="not an LMDB journal this code can open"):
        Journal.open(where)
    assert sorted(p.name for p in where.iterdir()) == ["data.mdb", "writer.lock"]
    assert (where / "data.mdb").read_bytes() == content
