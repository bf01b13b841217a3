"""Mutation round of helper h7, session 54: tests for the mutants the suite let live.

Targets: store/_verify.py (the record scan, a tail check's first link, stray keys, the
chain head), events/_errors.py, config.py. Each test here fails on the mutant named in
its docstring and passes on the real code (the table: /tmp/s54/h7/mutants.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import lmdb
import msgspec
import pytest

from cogfabric.config import Config, InvalidConfigError, load_config, parse_config
from cogfabric.events import EventVersionError, PrivateSet, decode
from cogfabric.store import Journal, JournalRecordError
from cogfabric.store._lmdb import _READ_CHUNK
from cogfabric.store.testing import make_events
from tests.store.test_tail_link_s54 import _relink

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _seq(n: int) -> bytes:
    return n.to_bytes(8, "big")


def _edit(path: Path, edit: Callable[[Any, Any, Any], object]) -> None:
    """Change a closed journal with the plain lmdb package: ``edit(txn, events, ids)``."""
    env = lmdb.open(str(path), max_dbs=8, subdir=True)
    try:
        with env.begin(write=True) as txn:
            edit(txn, env.open_db(b"events", txn=txn), env.open_db(b"ids", txn=txn))
    finally:
        env.close()


def _set(agent: str, n: int) -> PrivateSet:
    return PrivateSet(at=float(n), agent=agent, key=f"k{n}", value="v")


# ------------------------------------------------------------------ store/_verify.py


def test_a_tail_check_past_its_first_chunk_holds_a_stream_s_first_record_to_a_link_before_the_tail(
    tmp_path: Path,
) -> None:
    """Mutant V1 (``tail_start = state.expected``): from the second chunk of records on,
    the tail's first seq was taken as the chunk's, so a link into the tail's first chunk
    passed as one "before the tail"."""
    path = tmp_path / "journal"
    tail = _READ_CHUNK + 76  # a's records: past one chunk of the tail
    with Journal.open(path, max_map_size=64 << 20) as journal:
        journal.append([_set("b", 1), *(_set("a", n) for n in range(2, tail + 2)), _set("b", tail + 2)])
        last = journal.last_seq
        assert journal.verify(after=1).ok  # b's last record links to 1, before the tail

    _relink(path, last, 1000)  # b's last record now follows a's 1000, inside the tail's first chunk

    with Journal.open(path, readonly=True) as journal:
        report = journal.verify(after=1)
        full = journal.verify()
    assert (report.ok, report.first_bad_seq) == (False, last), report
    assert "points to seq 1000" in report.reason
    assert (full.ok, full.first_bad_seq) == (False, last)


def test_a_short_key_between_records_is_named_as_no_seq_not_as_a_missing_record(tmp_path: Path) -> None:
    """Mutant V4 (``len(key) > 8``): a key shorter than a seq, sorted between two records,
    was read as a seq and reported as "record N is missing", though record N is there
    and the records' database was changed (readers stop at the key)."""
    path = tmp_path / "journal"
    with Journal.open(path, max_map_size=16 << 20) as journal:
        journal.append(make_events(300))
    key = bytes(6) + b"\x01"  # 7 bytes: sorts after seq 255 and before seq 256
    _edit(path, lambda txn, events, _: txn.put(key, b"junk", db=events))

    with Journal.open(path, readonly=True) as journal:
        report = journal.verify()
        assert [r.seq for r in journal.read(after=250, until=255)] == [251, 252, 253, 254, 255]
        with pytest.raises(JournalRecordError, match=f"a key that is no seq, {key.hex()}"):
            list(journal.read(after=250))

    assert (report.ok, report.first_bad_seq, report.checked) == (False, 256, 255), report
    assert f"a key that is no seq, {key.hex()}, after record 255" in report.reason
    assert "missing" not in report.reason


def test_one_record_cut_off_the_end_is_named_as_removed(tmp_path: Path) -> None:
    """Mutant V7 (``head_seq > last + 1``): with one record cut off the end (its id entry
    too), verify said the head "does not match record 19" instead of that records were
    removed, and named seq 19, which is intact."""
    path = tmp_path / "journal"
    with Journal.open(path, max_map_size=16 << 20) as journal:
        journal.append(make_events(20))
        last_id = next(journal.read(after=19)).event.id

    def cut(txn: Any, events: Any, ids: Any) -> None:
        assert txn.delete(_seq(20), db=events)
        assert txn.delete(last_id.encode(), db=ids)

    _edit(path, cut)

    with Journal.open(path, readonly=True) as journal:
        report = journal.verify()
    assert (report.ok, report.first_bad_seq) == (False, 20), report
    assert report.reason == "the chain head is at seq 20 but records end at 19: records were removed"


# ------------------------------------------------------------------ events/_errors.py


def test_a_newer_record_s_version_error_ends_at_the_known_version() -> None:
    """Mutant E2 (the detail always appended): the message ended in a stray ": "."""
    record = {"type": "PrivateSet", "v": 7, "at": 1.0, "id": "x", "agent": "a", "key": "k", "value": 1}

    with pytest.raises(EventVersionError) as info:
        decode(msgspec.msgpack.encode(record))

    known = "event type 'PrivateSet' is at version 7, newer than the known version 1"
    assert str(info.value).startswith(known + ": a newer cogfabric than this one (")  # what to do, once
    assert str(EventVersionError("PrivateSet", 7, 1)) == known  # no detail: nothing after the versions


# ------------------------------------------------------------------ config.py


def test_a_config_refused_by_its_cross_field_check_names_the_source_first(tmp_path: Path) -> None:
    """Mutant C3 (no source prefix on an ``InvalidConfigError`` of ``validated``): the
    map_size / max_map_size check came without the file's name, every other error with it."""
    text = "journal:\n  map_size: 2000000\n  max_map_size: 1000000\n"
    file = tmp_path / "cogfabric.yaml"
    file.write_text(text, encoding="utf-8")

    with pytest.raises(InvalidConfigError) as parsed:
        parse_config(text, source="my.yaml")
    with pytest.raises(InvalidConfigError) as loaded:
        load_config(file)

    assert str(parsed.value).startswith("my.yaml: map_size (2000000 bytes) is larger than max_map_size")
    assert str(loaded.value).startswith(f"{file}: map_size (2000000 bytes)")
    assert "at `$.journal.map_size`" in str(loaded.value)


@pytest.mark.parametrize("text", ["\t\n", " \t \r\n\n", b"\t\n", b"  \t\n"])
def test_a_config_of_whitespace_alone_tabs_too_means_every_default(tmp_path: Path, text: str | bytes) -> None:
    """Mutant C4 (``if text`` for ``if text.strip()``): a file holding only blanks and a
    tab went to the YAML parser, which refuses a tab that starts a token."""
    file = tmp_path / "cogfabric.yaml"
    file.write_bytes(text.encode() if isinstance(text, str) else text)

    assert parse_config(text) == Config()
    assert load_config(file) == Config()
