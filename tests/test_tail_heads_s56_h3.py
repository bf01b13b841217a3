"""A tail check reads the head of every stream, not only of those with a record in the tail.

Helper h3, session 56: ``verify(after=N)`` (``Runtime.open(verify="tail")``) held only the
heads of the streams it saw records of to them. A head of another stream set back to an
earlier record of its own stream, pointed at another stream's record, added for a stream
with no records, or removed, passed; a read of the stream then left out its later
records, and the next append to it linked past them, so the journal failed a full check
there for good. Now every head is checked (a few lookups each) and their counts must add
up to the journal's records; a failure names the stream and the seq a full check names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import Config, JournalConfig, Runtime
from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalIntegrityError
from cogfabric.store.testing import make_events
from tests.store.test_lmdb_journal import _raw_edit, _seq

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.store import VerifyReport

AFTER = 280  # the tail: agent/t's ten records, 281 to 290


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    """agent/a0 at the odd seqs 1..279 (140 records, anchors at 127 and 255), agent/a1 at
    the even ones 2..280, then agent/t at 281..290: a0 and a1 have no record in the tail."""
    path = tmp_path / "journal"
    with Journal.open(path) as opened:
        opened.append(make_events(280, agents=2))
        opened.append([PrivateSet(at=float(i), agent="t", key=f"t{i}", value=i) for i in range(10)])
        assert opened.verify(after=AFTER).ok
    return path


def _head(last: int, count: int, first: int) -> bytes:
    return _seq(last) + count.to_bytes(8, "big") + _seq(first)


def _put_head(path: Path, stream: bytes, value: bytes) -> None:
    _raw_edit(path, lambda txn, _, dbs: txn.put(stream, value, db=dbs[b"heads"]))


def _tail_and_full(path: Path) -> tuple[VerifyReport, VerifyReport]:
    with Journal.open(path, readonly=True) as opened:
        return opened.verify(after=AFTER), opened.verify()


def _same_as_full(path: Path) -> VerifyReport:
    """The tail check's report, which fails naming what the full check names."""
    tail, full = _tail_and_full(path)
    assert (tail.ok, tail.first_bad_seq, tail.reason) == (False, full.first_bad_seq, full.reason), (
        tail,
        full,
    )
    assert tail.head_seq == full.head_seq == 290
    return tail


A0_WRONG = "the stream index's head of 'agent/a0' does not match its records"


@pytest.mark.parametrize(
    "value",
    [
        _head(277, 139, 1),  # set back one record, its count with it
        _head(277, 140, 1),  # ... its count left as it was: a0's records are not dense
        _head(253, 127, 1),  # set back past the anchor at 255 (a0's 128th record)
        _head(253, 140, 1),
        _head(1, 1, 1),  # to its first record
        _head(278, 140, 1),  # at a record of agent/a1
        _head(279, 141, 1),  # its count one too many
        _head(279, 140, 3),  # its first record a later one
        _head(279, 140, 2),  # ... one of another stream
        _head(279, 140, 1)[:16],  # cut short
    ],
    ids=lambda value: value.hex(" ", 8),
)
def test_a_wrong_head_of_a_stream_with_no_record_in_the_tail_fails_the_tail_check(
    journal: Path, value: bytes
) -> None:
    _put_head(journal, b"agent/a0", value)
    if value == _head(277, 140, 1):
        # its count no longer says how many records precede its head, which only a walk
        # of its records could tell: found by a full check only (verify's docstring)
        tail, full = _tail_and_full(journal)
        assert tail.ok, tail
        assert (full.ok, full.first_bad_seq, full.reason) == (False, 279, A0_WRONG)
        return
    report = _same_as_full(journal)
    assert (report.first_bad_seq, report.reason) == (279, A0_WRONG)


def test_a_head_past_the_last_record_fails_the_tail_check(journal: Path) -> None:
    _put_head(journal, b"agent/a0", _head(300, 140, 1))

    report = _same_as_full(journal)

    assert (report.first_bad_seq, report.reason) == (
        None,
        "the stream index's head of 'agent/a0' names no record of it",
    )


def test_a_head_set_back_in_a_dense_stream_with_its_count_kept_fails_the_tail_check(tmp_path: Path) -> None:
    # seqs 1..100 all agent/a0's: 36 records after its anchor at 64 cannot fit below 99
    path = tmp_path / "journal"
    with Journal.open(path) as opened:
        opened.append(make_events(100, agents=1))
        opened.append([PrivateSet(at=0.0, agent="t", key="t", value=0)])
    _put_head(path, b"agent/a0", _head(99, 100, 1))

    with Journal.open(path, readonly=True) as opened:
        tail, full = opened.verify(after=100), opened.verify()

    assert (tail.ok, tail.first_bad_seq, tail.reason) == (False, 100, A0_WRONG), tail
    assert (full.ok, full.first_bad_seq, full.reason) == (False, 100, A0_WRONG), full


def test_a_removed_head_of_a_stream_with_no_record_in_the_tail_fails_the_tail_check(journal: Path) -> None:
    _raw_edit(journal, lambda txn, _, dbs: txn.delete(b"agent/a1", db=dbs[b"heads"]))

    report = _same_as_full(journal)
    assert (report.first_bad_seq, report.reason) == (280, "a stream is missing from the stream index")


@pytest.mark.parametrize(
    "value",
    [_head(3, 1, 3), _head(281, 1, 281), _head(3, 0, 3), _head(999, 1, 999)],  # a0's, t's, no count, none
    ids=lambda value: value.hex(" ", 8),
)
def test_a_head_of_a_stream_without_records_fails_the_tail_check(journal: Path, value: bytes) -> None:
    _put_head(journal, b"agent/ghost", value)
    last = int.from_bytes(value[:8], "big")

    report = _same_as_full(journal)

    if last <= 290:
        assert (report.first_bad_seq, report.reason) == (
            last,
            "the stream index names stream 'agent/ghost', which has no records",
        )
    else:  # as for a head past the records of a stream that has some
        assert (report.first_bad_seq, report.reason) == (
            None,
            "the stream index's head of 'agent/ghost' names no record of it",
        )


@pytest.mark.parametrize("seq", [281, 279])  # past a0's head (agent/t's record), at it (a0's own)
def test_an_anchor_past_or_at_a_fitting_head_is_named_as_a_full_check_names_it(
    journal: Path, seq: int
) -> None:
    # the head fits its records: the anchor is what is wrong, and the report says so
    _raw_edit(journal, lambda txn, _, dbs: txn.put(b"agent/a0\0" + _seq(seq), b"", db=dbs[b"anchors"]))

    report = _same_as_full(journal)

    assert (report.first_bad_seq, report.reason) == (seq, "the stream index does not match the records")


def test_a_changed_count_of_a_stream_in_the_tail_fails_the_tail_check(journal: Path) -> None:
    # the tail check held a tail stream's head to its last record only: the writer
    # would have put its next anchors at the wrong records
    _put_head(journal, b"agent/t", _head(290, 11, 281))

    report = _same_as_full(journal)
    assert (report.first_bad_seq, report.reason) == (
        290,
        "the stream index's head of 'agent/t' does not match its records",
    )


def test_an_intact_journal_with_many_streams_outside_the_tail_passes(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with Journal.open(path) as opened:
        opened.append(make_events(700, agents=7))  # 100 records each: one anchor, 36 after it
        opened.append(make_events(1, agents=1, start=0))
        for after in (0, 1, 350, 700, 701):
            report = opened.verify(after=after)
            assert (report.ok, report.reason) == (True, ""), (after, report)


def _runtime_journal(path: Path) -> Config:
    """Two task-context publications (the runtime stream: seqs 1, 2), then agent "a"
    and twelve private values, with snapshots: a tail check starts at a's snapshot."""
    config = Config(journal=JournalConfig(snapshot_interval=5))
    with Runtime.open(path, config=config) as runtime:
        runtime.publish_task_context("t", {"goal": "one"})
        runtime.publish_task_context("t", {"goal": "two"})
        agent = runtime.spawn("a")
        for i in range(12):
            agent.set_private(f"k{i}", i)
    return config


def test_a_runtime_refuses_with_a_tail_check_a_head_set_back_outside_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "j"
    config = _runtime_journal(path)
    with Journal.open(path, readonly=True) as opened:
        assert [r.seq for r in opened.read(stream="runtime")] == [1, 2]
    _put_head(path, b"runtime", _head(1, 1, 1))  # as if the second publication never was

    with pytest.raises(JournalIntegrityError) as caught:
        Runtime.open(path, config=config, verify="tail")

    assert "seq 2: the stream index's head of 'runtime' does not match its records" in str(caught.value)
    report: Any = caught.value.report
    assert (report.first_bad_seq, report.reason) == (
        2,
        "the stream index's head of 'runtime' does not match its records",
    )
