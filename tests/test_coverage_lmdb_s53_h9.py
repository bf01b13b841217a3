"""LmdbJournal's documented refusals that no test reached (coverage audit, s53 h9).

Each test names the line of ``store/_lmdb.py`` it holds and the mutant it kills.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import lmdb
import pytest

from cogfabric.store import (
    JournalFormatError,
    JournalIntegrityError,
    JournalReadOnlyError,
    LmdbJournal,
)
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path


def _edit(path: Path, db: bytes, edit: Any) -> None:
    """Change a closed journal's database ``db`` with the plain lmdb package."""
    env = lmdb.open(str(path), max_dbs=8)
    try:
        with env.begin(write=True) as txn:
            edit(txn, env.open_db(db, txn=txn))
    finally:
        env.close()


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    path = tmp_path / "j"
    with LmdbJournal.open(path, sync=False) as journal:
        journal.append(make_events(3))
    return path


def test_a_str_chain_key_utf8_cannot_encode_is_a_value_error_and_creates_nothing(tmp_path: Path) -> None:
    # Kills: the UnicodeEncodeError handler of _key_bytes dropped (the open raised
    # UnicodeEncodeError, no ValueError with this message).
    with pytest.raises(ValueError, match=r"^a chain key given as a str must be text UTF-8 can encode$"):
        LmdbJournal.open(tmp_path / "j", key="k\ud800")
    assert not (tmp_path / "j").exists()


@pytest.mark.parametrize(
    ("option", "value", "shown"),
    [("map_size", "1048576", "str"), ("max_map_size", True, "bool"), ("map_size", 1048576.0, "float")],
)
def test_a_map_size_that_is_no_int_is_a_type_error_and_creates_nothing(
    tmp_path: Path, option: str, value: object, shown: str
) -> None:
    # Kills: the isinstance check dropped (a str then failed in the range check's
    # comparison with another TypeError message; True passed as 1 byte).
    options: dict[str, Any] = {option: value}
    with pytest.raises(TypeError, match=f"^{option} is a number of bytes, got {shown}$"):
        LmdbJournal.open(tmp_path / "j", **options)
    assert not (tmp_path / "j").exists()


@pytest.mark.parametrize("readonly", [False, True], ids=["writable", "read-only"])
def test_an_lmdb_file_whose_header_database_has_no_format_is_not_a_cogfabric_journal(
    tmp_path: Path, readonly: bool
) -> None:
    # Kills: _check_meta's "fmt is None" check dropped (len(None) raised a TypeError).
    path = tmp_path / "other"
    path.mkdir()
    _edit(path, b"meta", lambda txn, db: txn.put(b"something", b"else", db=db))
    with pytest.raises(JournalFormatError, match=r"is not a cogfabric journal$"):
        LmdbJournal.open(path, readonly=readonly)


@pytest.mark.parametrize(
    "edit",
    [lambda txn, db: txn.delete(b"head", db=db), lambda txn, db: txn.put(b"head", b"\0" * 5, db=db)],
    ids=["missing", "too short"],
)
def test_a_missing_or_malformed_chain_head_refuses_appends_and_keeps_the_records(
    stored: Path, edit: Any
) -> None:
    # append's docstring: a head that names no record refuses appends (fail-stop), as
    # verify() names it. Kills: the "missing or malformed" check dropped (int.from_bytes
    # of None raised a TypeError at open, or a 5-byte head was read as a seq).
    _edit(stored, b"meta", edit)
    with LmdbJournal.open(stored) as journal:
        with pytest.raises(
            JournalIntegrityError, match="refuses appends: its chain head is missing or malformed"
        ):
            journal.check_appendable()
        with pytest.raises(JournalIntegrityError, match="its chain head is missing or malformed"):
            journal.append(make_events(1, start=3))
        assert journal.last_seq == 3
        assert [r.seq for r in journal.read()] == [1, 2, 3]


def test_check_appendable_refuses_a_read_only_journal(stored: Path) -> None:
    # Kills: LmdbJournal.check_appendable's readonly check dropped (it returned: "it
    # would write" for a journal that never does).
    with LmdbJournal.open(stored, readonly=True) as journal:
        with pytest.raises(JournalReadOnlyError) as info:
            journal.check_appendable()
        assert str(info.value) == f"{stored} is open read-only"


def test_a_stream_name_in_the_index_that_is_no_utf8_is_an_integrity_error(stored: Path) -> None:
    # streams()' docstring: a name no writer makes (not UTF-8) is a JournalIntegrityError.
    # Kills: the UnicodeDecodeError handler dropped (the decode error escaped).
    _edit(stored, b"heads", lambda txn, db: txn.put(b"agent/\xff", txn.get(b"agent/a0", db=db), db=db))
    with LmdbJournal.open(stored, readonly=True) as journal:
        with pytest.raises(
            JournalIntegrityError, match=r"the stream index holds a name no stream can have, b'agent/\\xff'"
        ):
            journal.streams()
        assert journal.streams("agent/a") == ["agent/a0", "agent/a1", "agent/a2"]


def test_the_repr_names_the_path_and_whether_it_is_open_read_only_or_closed(stored: Path) -> None:
    # Kills: either state of __repr__ swapped or dropped.
    journal = LmdbJournal.open(stored)
    assert repr(journal) == f"<LmdbJournal {str(stored)!r} open>"
    journal.close()
    assert repr(journal) == f"<LmdbJournal {str(stored)!r} closed>"
    with LmdbJournal.open(stored, readonly=True) as reader:
        assert repr(reader) == f"<LmdbJournal {str(stored)!r} read-only>"


def test_read_stored_goes_on_past_its_first_chunk_of_records(tmp_path: Path) -> None:
    # A verifiable export reads every record through read_stored, in chunks of 1024 a
    # transaction. Kills: the next chunk starting anywhere but after the last one read
    # (records repeated or skipped past the first 1024).
    path = tmp_path / "j"
    with LmdbJournal.open(path, sync=False) as journal:
        journal.append(make_events(1030))
        pairs = list(journal.read_stored(0))
        assert [record.seq for record, _ in pairs] == list(range(1, 1031))
        assert [record.seq for record, _ in journal.read_stored(1000, 1026)] == list(range(1001, 1027))
