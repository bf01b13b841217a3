"""Hostile-input review of session 54's salvage, backup and tail check (helper h2, session 55).

- a DEST whose name is near the file system's 255-byte limit was refused: the hidden
  sibling ``write_beside`` fills (``.NAME.salvage-`` and a suffix) was too long a name;
- a tail check passed a stream's head set past the last record (one lookup found it in
  a full check; a read and an append refuse it later), and a head of the wrong length.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lmdb
import pytest
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.store import Journal, JournalRecordError
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path

_LONG = "d" * 250  # a name a directory can have (255 bytes at most), too long with ".salvage-XXXXXXXX"


def _journal(path: Path, count: int = 40) -> Path:
    with Journal.open(path, max_map_size=1 << 24) as journal:
        journal.append(make_events(count))
    return path


@pytest.mark.parametrize("command", ["salvage", "backup"])
def test_a_dest_named_near_the_limit_is_written(tmp_path: Path, command: str) -> None:
    source = _journal(tmp_path / "j")
    dest = tmp_path / _LONG

    result = CliRunner().invoke(main, [command, str(source), str(dest)])

    assert result.exit_code == 0, result.stderr
    with Journal.open(dest, readonly=True) as copy:
        assert copy.verify().ok
        assert copy.last_seq == 40
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["j", _LONG])  # no sibling left


def _set_head(path: Path, stream: bytes, value: bytes) -> None:
    env = lmdb.open(str(path), max_dbs=8)
    try:
        heads = env.open_db(b"heads")
        with env.begin(write=True, db=heads) as txn:
            txn.put(stream, value)
    finally:
        env.close()


def _head(path: Path, stream: bytes) -> bytes:
    env = lmdb.open(str(path), max_dbs=8, readonly=True, lock=False)
    try:
        with env.begin(db=env.open_db(b"heads", create=False)) as txn:
            value = txn.get(stream)
            assert value is not None
            return bytes(value)
    finally:
        env.close()


def test_a_tail_check_refuses_a_head_set_past_the_last_record(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j")
    value = _head(path, b"agent/a0")
    _set_head(path, b"agent/a0", (10**6).to_bytes(8, "big") + value[8:])

    with Journal.open(path) as journal:
        report = journal.verify(after=35)
        with pytest.raises(JournalRecordError, match="names a record that is missing"):
            list(journal.read(stream="agent/a0"))  # what the tail check let through

    assert not report.ok
    assert report.first_bad_seq == 40  # agent/a0's last record (every third, from seq 1)
    assert report.reason == "the stream index's head of 'agent/a0' names no record of it"


def test_a_tail_check_refuses_a_head_of_the_wrong_length(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j")
    _set_head(path, b"agent/a0", _head(path, b"agent/a0")[:8])  # its last seq, nothing more

    with Journal.open(path) as journal:
        report = journal.verify(after=35)

    assert not report.ok
    assert report.reason == "the stream index's head of 'agent/a0' does not match its records"
