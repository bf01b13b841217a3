"""Pins of the stream readers: the anchor lookup on changed keys (``_anchor_from``), and the bounds of a walk.

A stream's anchors are keys of its name, a NUL and a seq. The first key at or after
the seq sought counts only if it is one of them, and is capped at the stream's head:
otherwise the walk starts at the head, as with no anchor at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.store import Journal, JournalRecordError
from cogfabric.store.testing import make_events

from .test_lmdb_journal import _raw_edit, _seq
from .test_lmdb_pins import _count_chunks

if TYPE_CHECKING:
    from pathlib import Path

_A0 = list(range(1, 300, 2))  # 300 events over 2 agents: a0's seqs; its anchors 127 and 255


def _journal_with_anchor_key(tmp_path: Path, key: bytes) -> Path:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append(make_events(300, agents=2))
    _raw_edit(path, lambda txn, _, dbs: txn.put(key, b"", db=dbs[b"anchors"]))
    return path


def _seqs_of(path: Path) -> tuple[list[int], list[int], list[int]]:
    with Journal.open(path, readonly=True) as journal:
        forward = [record.seq for record in journal.read(stream="agent/a0")]
        later = [record.seq for record in journal.read(after=260, stream="agent/a0")]
        back = [record.seq for record in journal.read_back("agent/a0", before=290)]
    return forward, later, back


def test_an_anchor_past_the_stream_head_is_capped_at_the_head(tmp_path: Path) -> None:
    path = _journal_with_anchor_key(tmp_path, b"agent/a0\0" + _seq(5000))

    assert _seqs_of(path) == (_A0, _A0[130:], _A0[::-1][5:])


def test_a_key_of_the_stream_of_another_length_is_no_anchor(tmp_path: Path) -> None:
    # sorted after a0's anchors; its last 8 bytes read as seq 260, a record of a1
    path = _journal_with_anchor_key(tmp_path, b"agent/a0\0\1" + _seq(260))

    assert _seqs_of(path) == (_A0, _A0[130:], _A0[::-1][5:])


@pytest.mark.parametrize("extra", [b"", b"\0\0\0"])
def test_stream_start_meets_a_changed_key_sorted_before_the_anchors_and_walks_from_the_head(
    tmp_path: Path, extra: bytes
) -> None:
    # A key of the stream's name, a NUL and fewer than 8 bytes is no anchor: the walk
    # starts at the head (and meets the record missing above the first anchor), not at
    # the anchor after that key.
    path = _journal_with_anchor_key(tmp_path, b"agent/a0\0" + extra)

    def damage(txn: Any, events: Any, dbs: dict[bytes, Any]) -> None:
        head = txn.get(b"agent/a0", db=dbs[b"heads"])
        txn.put(b"agent/a0", head[:16], db=dbs[b"heads"])  # no first seq: stream_start walks
        txn.delete(_seq(201), db=events)

    _raw_edit(path, damage)

    with Journal.open(path, readonly=True) as journal, pytest.raises(JournalRecordError) as caught:
        journal.stream_start("agent/a0")
    assert caught.value.seq == 201


# ---------------------------------------------------------------- the walk's bounds


def test_a_stream_read_stops_at_until_and_walks_no_step_past_it(tmp_path: Path) -> None:
    # a0's record 281 is missing, in the step above its last anchor (255): a read to 200
    # ends with the step that holds 200, and never walks down from the head to 281
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append(make_events(300, agents=2))
    _raw_edit(path, lambda txn, events, _: txn.delete(_seq(281), db=events))

    with Journal.open(path, readonly=True) as journal:
        assert [record.seq for record in journal.read(until=200, stream="agent/a0")] == _A0[:100]


def test_a_stream_read_takes_read_chunk_records_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Journal.open(tmp_path / "journal") as journal:
        journal.append(make_events(3000, agents=1))  # anchors every 64: chunks of exactly 1,024
        chunks = _count_chunks(journal, monkeypatch)  # type: ignore[arg-type]

        assert sum(1 for _ in journal.read(stream="agent/a0")) == 3000
    assert chunks == [1024, 1024, 952]


def test_a_stream_read_of_big_records_hands_out_copies_not_buffers_into_the_map(tmp_path: Path) -> None:
    # a buffer into the map is valid only while its read transaction is open
    with Journal.open(tmp_path / "journal") as journal:
        journal.append(make_events(10, agents=2, value="v" * 10_000))  # on overflow pages
        values = journal._read_chunk(0, journal.last_seq, b"agent/a1")[1]  # type: ignore[attr-defined]

    assert len(values) == 5
    assert {type(value) for value in values} == {bytes}
