"""Pins from a mutation test of session 47's code (helper h9): each kills a mutant the tests let live.

``LmdbJournal.read_back`` (its snapshot bound, a link to itself, its byte bound, a malformed
record's name) and ``_short_by``'s refusal of a data file without LMDB's header (only when
no header page can hold one; a file cut right after its first header is damaged).
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.store import (
    Journal,
    JournalDamagedError,
    JournalRecordError,
    _lmdb,
    _pages,
)
from cogfabric.store._record import LINK_AT
from cogfabric.store.testing import make_events
from tests.store.test_lmdb_pins import _count_chunks
from tests.store.test_read_back import _edit_record

if TYPE_CHECKING:
    from pathlib import Path


def test_a_walk_back_from_a_before_past_the_head_sees_the_journal_as_it_was_when_called(
    tmp_path: Path,
) -> None:
    # "Like read, it sees the journal as it was when called": a before past the head is
    # bounded by the head of the call, not by the one its first read finds.
    with Journal.open(tmp_path / "j") as journal:
        journal.append(make_events(6))
        newest = journal.read_back("agent/a0", before=100)

        journal.append(make_events(6, start=6))

        assert [r.seq for r in newest] == [4, 1]


def test_a_link_to_its_own_record_is_named_not_followed_forever(tmp_path: Path) -> None:
    # "the record's stream link does not point back": a link to the record itself, too
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(20))  # a1: 2, 5, ..., 20
    _edit_record(path, 14, lambda v: v[:LINK_AT] + (14).to_bytes(8, "big") + v[LINK_AT + 8 :])

    with Journal.open(path, readonly=True) as journal:
        seen: list[int] = []
        with pytest.raises(JournalRecordError, match="does not point back") as info:
            # followed, the walk would hand out record 14 forever: take no more than 4
            seen.extend(r.seq for r in itertools.islice(journal.read_back("agent/a1"), 4))
        assert info.value.seq == 14
        assert seen == [20, 17]


def test_a_walk_back_reads_fewer_records_a_transaction_once_they_are_big(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "in chunks of 256 records (fewer of big ones)": a transaction stops once it holds
    # about _READ_BYTES of records (one record here, where any record is that big)
    with Journal.open(tmp_path / "j") as journal:
        journal.append(make_events(30))  # a1: 10 records
        assert isinstance(journal, _lmdb.LmdbJournal)
        walks = _count_chunks(journal, monkeypatch, "_read_back_txn")
        monkeypatch.setattr(_lmdb, "_READ_BYTES", 1)

        seqs = [r.seq for r in journal.read_back("agent/a1")]

    assert seqs == list(range(29, 0, -3))
    assert walks == [1] * 10


def test_a_malformed_record_a_link_names_is_called_malformed_not_another_streams(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(20))
    _edit_record(path, 14, lambda _: b"junk")

    with Journal.open(path, readonly=True) as journal:
        with pytest.raises(JournalRecordError, match="the record is malformed") as info:
            list(journal.read_back("agent/a1"))
        assert info.value.seq == 14


def test_a_journal_whose_first_header_is_damaged_is_not_said_to_hold_no_lmdb_header(tmp_path: Path) -> None:
    # _short_by refuses "no page of it where a header page can be holds LMDB's magic
    # number": here the second header page holds it, so the file is a journal whose
    # first header is damaged, named as such
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(5))
    data = bytearray((path / "data.mdb").read_bytes())
    data[16:20] = bytes(4)  # the first meta page's magic, after its page header
    (path / "data.mdb").write_bytes(bytes(data))

    with pytest.raises(JournalDamagedError, match="header page 0") as info:
        Journal.open(path, readonly=True)
    assert "holds no LMDB header" not in str(info.value)


def test_a_data_file_cut_right_after_its_first_header_is_damaged_not_foreign(tmp_path: Path) -> None:
    # the magic at byte 0 is whole (the file ends where the meta record does): a
    # truncated journal, not a file that is no journal
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(5))
    (path / "data.mdb").write_bytes((path / "data.mdb").read_bytes()[: _pages.META_END])

    with pytest.raises(JournalDamagedError, match="is damaged: its data file is"):
        Journal.open(path, readonly=True)


def test_export_to_dot_slash_dash_writes_a_file_called_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --help: "A file (default stdout, as for -; ./- names a file called -)"
    journal = tmp_path / "j"
    with Journal.open(journal) as opened:
        opened.append(make_events(3))
    monkeypatch.chdir(tmp_path)

    result = CliRunner().invoke(main, ["export", str(journal), "-o", "./-"])

    assert result.exit_code == 0, result.output
    assert result.output == ""
    assert [
        json.loads(line)["seq"] for line in (tmp_path / "-").read_text(encoding="utf-8").splitlines()
    ] == [1, 2, 3]


def test_verify_export_of_dot_slash_dash_reads_the_file_called_dash_not_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # click's Path(path_type=Path) made ./- the Path '-', read as stdin
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_text("not json\n", encoding="utf-8")

    result = CliRunner().invoke(main, ["verify-export", "./-"], input="")

    assert result.exit_code == 1, result.output
    assert "line 1" in result.output
    assert "it is not JSON" in result.output
