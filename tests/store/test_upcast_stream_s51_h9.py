"""A chunk read one by one: which error a read raises, and what it is caused by (helper h9, session 51).

Mutants that survived the tests of ``_records_one_by_one``: a record an upcaster moved to
another stream, before one that fails to decode, was refused as the later one (its seq
and reason); and the event layer's error was no longer the ``__cause__`` of the
``JournalRecordError`` (as its docstring says it is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.events import EventCodec, EventDecodeError
from cogfabric.store import JournalRecordDecodeError, JournalRecordError, LmdbJournal
from tests.store.test_upcast_stream_s51_h5 import OrderShipped, _ShippedV2, _split

if TYPE_CHECKING:
    from pathlib import Path


def _journal(tmp_path: Path, orders: list[str]) -> Path:
    path = tmp_path / "j"
    with LmdbJournal.open(path, codec=EventCodec([OrderShipped])) as journal:
        journal.append(
            [
                OrderShipped(at=float(i), order=order, address="bad" if order == "bad" else "A, B")
                for i, order in enumerate(orders)
            ]
        )
    return path


def _move_o5_and_break_bad(record: dict[str, Any]) -> dict[str, Any]:
    if record["address"] == "bad":
        return {**record, "street": 1}  # not valid at version 2: no city, a street of int
    return {**_split(record), "order": "o6"} if record["order"] == "o5" else _split(record)


def _codec() -> EventCodec:
    return EventCodec([_ShippedV2], {("OrderShipped", 1): _move_o5_and_break_bad})


def test_a_moved_record_before_one_that_fails_to_decode_is_the_one_refused(tmp_path: Path) -> None:
    path = _journal(tmp_path, ["o1", "o5", "o1", "bad", "o1"])

    with LmdbJournal.open(path, readonly=True, codec=_codec()) as journal:
        seen: list[int] = []
        with pytest.raises(JournalRecordError) as info:
            seen.extend(record.seq for record in journal.read())
        report = journal.verify(decode=True)

    assert seen == [1]
    assert info.value.seq == 2
    assert "filed under stream 'order/o5', but its event is of 'order/o6'" in str(info.value)
    assert (report.first_bad_seq, info.value.seq) == (2, 2)  # a read and verify name the same record


def test_a_record_that_fails_to_decode_has_the_event_layers_error_as_its_cause(tmp_path: Path) -> None:
    path = _journal(tmp_path, ["o1", "o1", "bad", "o1"])

    with LmdbJournal.open(path, readonly=True, codec=_codec()) as journal:
        seen: list[int] = []
        with pytest.raises(JournalRecordDecodeError) as info:
            seen.extend(record.seq for record in journal.read())

    assert seen == [1, 2]
    assert info.value.seq == 3
    cause = info.value.__cause__
    assert isinstance(cause, EventDecodeError)
    assert "OrderShipped record upcast from version 1 is not valid at version 2" in str(cause)
