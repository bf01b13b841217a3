"""``JournalContract`` fails a broken backend: each check held by a backend only it catches (session 50).

A mutation round on ``cogfabric.store.testing`` dropped one check of the contract at a
time: the whole suite still passed, as the LMDB journal passes either way. Each backend
here is the LMDB journal broken in one way that only that check of the contract
catches; the test runs that check on it, and on the intact LMDB journal, which passes.
The last three are broken in ways the contract let through before this session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.events import UnencodableValueError
from cogfabric.store import InvalidStreamError, LmdbJournal, Snapshot, VerifyReport
from cogfabric.store.testing import JournalContract

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from pathlib import Path

    from cogfabric.events import Event
    from cogfabric.store import Journal, Record


class _PartBatch(LmdbJournal):
    """Not atomic: of a batch with an unencodable event, the events before it are stored."""

    def append(
        self, events: Iterable[Event], *, snapshots: Sequence[Snapshot] = (), validate: bool = True
    ) -> list[int]:
        batch = list(events)
        try:
            return super().append(batch, snapshots=snapshots, validate=validate)
        except UnencodableValueError:
            for event in batch:
                try:
                    super().append([event])
                except UnencodableValueError:
                    break
            raise


class _LazyRead(LmdbJournal):
    """``read`` starts reading when iterated, so it returns records appended after the call."""

    def read(self, after: int = 0, until: int | None = None, stream: str | None = None) -> Iterator[Record]:
        yield from super().read(after, until, stream)


class _VerifyWhenClosed(LmdbJournal):
    """``verify`` of a closed journal reports it ok instead of raising."""

    def verify(self, *, after: int = 0, decode: bool = False) -> VerifyReport:
        return VerifyReport(ok=True, checked=0) if self.closed else super().verify(after=after, decode=decode)


class _IntactPastTheEnd(LmdbJournal):
    """``record_intact`` says True for a seq past the last record."""

    def record_intact(self, seq: int) -> bool:
        return seq > self.last_seq or super().record_intact(seq)


class _ReadsAnyStreamName(LmdbJournal):
    """``read`` of no stream name the journal writes returns nothing instead of raising."""

    def read(self, after: int = 0, until: int | None = None, stream: str | None = None) -> Iterator[Record]:
        try:
            return super().read(after, until, stream)
        except InvalidStreamError:
            return iter(())


class _EventsDespiteTheSnapshot(LmdbJournal):
    """A batch whose snapshot is past its end is refused, yet its events are stored."""

    def append(
        self, events: Iterable[Event], *, snapshots: Sequence[Snapshot] = (), validate: bool = True
    ) -> list[int]:
        batch = list(events)
        try:
            return super().append(batch, snapshots=snapshots, validate=validate)
        except ValueError:
            if batch:
                super().append(batch, validate=validate)
            raise


class _SnapshotOfAnyStreamName(LmdbJournal):
    """``load_snapshot`` of no stream name the journal writes returns None instead of raising."""

    def load_snapshot(self, stream: str) -> Snapshot | None:
        try:
            return super().load_snapshot(stream)
        except InvalidStreamError:
            return None


class _StreamsWhenClosed(LmdbJournal):
    """``streams`` and ``stream_head`` of a closed journal answer (empty, 0) instead of raising."""

    def streams(self, prefix: str = "") -> list[str]:
        return [] if self.closed else super().streams(prefix)

    def stream_head(self, stream: str) -> int:
        return 0 if self.closed else super().stream_head(stream)


_CASES: list[tuple[type[LmdbJournal], Callable[[JournalContract, Journal], Any]]] = [
    (_PartBatch, JournalContract.test_a_batch_with_an_unencodable_event_writes_nothing),
    (_LazyRead, JournalContract.test_read_sees_the_journal_as_it_was_when_called),
    (_VerifyWhenClosed, JournalContract.test_close_is_idempotent_and_use_after_close_raises),
    (_IntactPastTheEnd, JournalContract.test_record_intact_checks_one_record_and_refuses_a_missing_one),
    (_ReadsAnyStreamName, JournalContract.test_an_event_whose_stream_cannot_be_stored_is_refused),
    (_EventsDespiteTheSnapshot, JournalContract.test_a_snapshot_past_the_last_seq_is_refused),
    (_SnapshotOfAnyStreamName, JournalContract.test_an_event_whose_stream_cannot_be_stored_is_refused),
    (_StreamsWhenClosed, JournalContract.test_every_method_that_reads_or_writes_raises_after_close),
]


@pytest.mark.parametrize(("broken", "check"), _CASES, ids=[broken.__name__ for broken, _ in _CASES])
def test_the_contract_fails_a_backend_broken_where_it_checks(
    tmp_path: Path, broken: type[LmdbJournal], check: Callable[[JournalContract, Journal], Any]
) -> None:
    with LmdbJournal.open(tmp_path / "intact", sync=False) as journal:
        check(JournalContract(), journal)  # the check itself holds for a backend that keeps the contract

    with (
        broken.open(tmp_path / "broken", sync=False) as journal,
        pytest.raises((AssertionError, pytest.fail.Exception)),
    ):
        check(JournalContract(), journal)
