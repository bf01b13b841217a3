"""An event whose type's ``stream`` raises is a refused record, named by its seq (helper h8).

A read checks that each record it decodes one by one is of the stream it is filed under:
that calls the event type's own ``stream``, which may raise for the fields an upcaster
gave it. The read then raised that error as it was (no seq, no typed error), before
handing out the good records of its chunk; ``verify(decode=True)`` raised it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.events import Event, EventCodec
from cogfabric.store import JournalRecordError, LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path


class Shipped(Event, frozen=True, kw_only=True):
    order: str

    @property
    def stream(self) -> str:
        return "order/" + self.order


class _ShippedV2(Event, frozen=True, kw_only=True, tag="Shipped"):
    order: str | None  # version 2: an order may be unknown
    v: int = 2

    @property
    def stream(self) -> str:
        return "order/" + self.order  # type: ignore[operator] # the mistake: None not handled


def _unknown_order_as_none(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "order": record["order"] or None}


def _journal(tmp_path: Path) -> Path:
    path = tmp_path / "j"
    with LmdbJournal.open(path, codec=EventCodec([Shipped])) as journal:
        journal.append([Shipped(at=1.0, order=order) for order in ("a", "b", "", "c")])
    return path


def _codec() -> EventCodec:
    return EventCodec([_ShippedV2], {("Shipped", 1): _unknown_order_as_none})


def test_a_read_hands_out_the_records_before_and_names_the_one_whose_stream_raises(tmp_path: Path) -> None:
    path = _journal(tmp_path)

    with LmdbJournal.open(path, readonly=True, codec=_codec()) as journal:
        seen: list[int] = []
        with pytest.raises(
            JournalRecordError, match=r"seq 3: its event's stream cannot be named: _ShippedV2\.stream"
        ) as info:
            seen.extend(record.seq for record in journal.read())
        with pytest.raises(JournalRecordError, match="record at seq 3"):
            list(journal.read_stored())

    assert seen == [1, 2]
    assert info.value.seq == 3
    assert isinstance(info.value.__cause__, TypeError)


def test_verify_names_the_record_whose_events_stream_raises(tmp_path: Path) -> None:
    path = _journal(tmp_path)

    with LmdbJournal.open(path, readonly=True, codec=_codec()) as journal:
        report = journal.verify(decode=True)

    assert (report.ok, report.checked, report.first_bad_seq) == (False, 2, 3)
    assert report.reason.startswith("its event's stream cannot be named: _ShippedV2.stream raised TypeError")
