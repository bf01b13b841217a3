"""A record an upcaster moved to another stream is refused on read, as verify refuses it (helper h5)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import pytest

from cogfabric.events import Event, EventCodec
from cogfabric.store import Journal, JournalRecordError, LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path


class _OrderEvent(Event, frozen=True, kw_only=True):
    order: str

    @property
    def stream(self) -> str:
        return "order/" + self.order


class OrderShipped(_OrderEvent, frozen=True, kw_only=True):
    address: str


class _OrderEventV2(Event, frozen=True, kw_only=True):
    order: str

    @property
    def stream(self) -> str:
        return "order/" + self.order


class _ShippedV2(_OrderEventV2, frozen=True, kw_only=True, tag="OrderShipped"):
    v: Annotated[int, msgspec.Meta(ge=2, le=2)] = 2
    street: str
    city: str


def _split(record: dict[str, Any]) -> dict[str, Any]:
    street, _, city = record.pop("address").partition(", ")
    return {**record, "street": street, "city": city}


def _split_and_move(record: dict[str, Any]) -> dict[str, Any]:
    return {**_split(record), "order": "o9"}  # a mistake: the field the stream is named by


def _journal(tmp_path: Path) -> Path:
    path = tmp_path / "j"
    with LmdbJournal.open(path, codec=EventCodec([OrderShipped])) as journal:
        journal.append(
            [OrderShipped(at=float(i), order=f"o{i % 2}", address="Main St 1, Town") for i in range(6)]
        )
    return path


def test_an_upcast_that_keeps_the_stream_reads_by_stream(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    codec = EventCodec([_ShippedV2], {("OrderShipped", 1): _split})

    with LmdbJournal.open(path, readonly=True, codec=codec) as journal:
        records = list(journal.read(stream="order/o1"))
        assert [(r.seq, r.stream) for r in records] == [(2, "order/o1"), (4, "order/o1"), (6, "order/o1")]
        assert all(isinstance(r.event, _ShippedV2) and r.event.city == "Town" for r in records)
        assert journal.verify(decode=True).ok


def test_an_upcast_that_moves_an_event_to_another_stream_is_refused_by_every_read(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    codec = EventCodec([_ShippedV2], {("OrderShipped", 1): _split_and_move})

    with LmdbJournal.open(path, readonly=True, codec=codec) as journal:
        report = journal.verify(decode=True)
        by_stream = journal.read(stream="order/o1")
        with pytest.raises(
            JournalRecordError, match="filed under stream 'order/o1', but its event is of 'order/o9'"
        ) as info:
            next(by_stream)  # was handed out as order/o1's record, whose stream says order/o9
        with pytest.raises(JournalRecordError, match="an upcaster must keep what names an event's stream"):
            next(journal.read_back("order/o1"))
        everything = journal.read()
        with pytest.raises(
            JournalRecordError, match="record at seq 1: the record is filed under stream 'order/o0'"
        ):
            next(everything)

    assert info.value.seq == 2
    assert (report.ok, report.first_bad_seq) == (False, 1)
    assert "filed under stream 'order/o0', but its event is of 'order/o9'" in report.reason


def test_the_records_before_a_moved_one_are_handed_out_first(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with LmdbJournal.open(path, codec=EventCodec([OrderShipped])) as journal:
        journal.append(
            [OrderShipped(at=float(i), order="o1" if i < 3 else "o5", address="A, B") for i in range(5)]
        )

    def move_o5(record: dict[str, Any]) -> dict[str, Any]:
        return {**_split(record), "order": "o6"} if record["order"] == "o5" else _split(record)

    with LmdbJournal.open(
        path, readonly=True, codec=EventCodec([_ShippedV2], {("OrderShipped", 1): move_o5})
    ) as journal:
        seen: list[int] = []
        with pytest.raises(
            JournalRecordError, match="record at seq 4: the record is filed under stream 'order/o5'"
        ):
            seen.extend(record.seq for record in journal.read())

    assert seen == [1, 2, 3]


def test_journal_open_takes_the_codec_of_your_own_events(tmp_path: Path) -> None:
    # Journal.open's docstring sends to LmdbJournal.open for "every argument": codec is one
    path = _journal(tmp_path)
    codec = EventCodec([_ShippedV2], {("OrderShipped", 1): _split})

    with Journal.open(path, readonly=True, codec=codec) as journal:
        assert [type(r.event) for r in journal.read(until=1)] == [_ShippedV2]
