"""A directory whose data.mdb is no LMDB file is refused before LMDB writes its lock file there."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.store import Journal, JournalDamagedError, JournalFormatError
from cogfabric.store.testing import make_events

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


def test_a_journal_whose_first_header_page_is_wiped_is_damaged_and_left_alone(tmp_path: Path) -> None:
    # page 0's meta record zeroed, page 1's whole: a damaged journal (exit 1), not a file
    # that is no journal (exit 2), and named before LMDB adds its lock file
    where = tmp_path / "journal"
    with Journal.open(where) as journal:
        journal.append(make_events(10))
    (where / "lock.mdb").unlink()
    raw = bytearray((where / "data.mdb").read_bytes())
    raw[16 : 16 + 200] = bytes(200)
    (where / "data.mdb").write_bytes(bytes(raw))

    with pytest.raises(JournalDamagedError, match=r"header page 0 .* the other header page LMDB's"):
        Journal.open(where, readonly=True)
    result = CliRunner().invoke(main, ["verify", str(where)])
    assert result.exit_code == 1, result.output
    assert "is damaged: LMDB's header page 0" in result.output
    assert sorted(p.name for p in where.iterdir()) == ["data.mdb", "writer.lock"]
    assert (where / "data.mdb").read_bytes() == bytes(raw)
