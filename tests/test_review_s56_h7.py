"""Review of session 56 (helper h7): the tail check's heads, and a usage error with stderr closed.

The tail check (``verify(after=N)``) held the head of a stream with records in the tail
to its last record and first record only: its count was checked by the sum of all the
counts alone, so a count moved to it from another stream's head passed, though a stream
that starts in the tail has a count the check knows exactly; nor was such a head's first
seq looked at when its stream started before the tail. Now every head must fit its
records, and a stream that starts in the tail must count its records there.

``cogfabric CMD --bogus 2>&-``: click shows a usage error on stdout when stderr is
closed; stdout holds only the output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from cogfabric.events import PrivateSet
from cogfabric.store import Journal
from cogfabric.store.testing import make_events
from tests.test_tail_heads_s56_h3 import _head, _put_head

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.store import VerifyReport

AFTER = 280


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    """agent/a0 at the odd seqs 1..279, agent/a1 at the even ones 2..280, agent/t at 281..290."""
    path = tmp_path / "journal"
    with Journal.open(path) as opened:
        opened.append(make_events(280, agents=2))
        opened.append([PrivateSet(at=float(i), agent="t", key=f"t{i}", value=i) for i in range(10)])
    return path


def _tail_and_full(path: Path, after: int = AFTER) -> tuple[VerifyReport, VerifyReport]:
    with Journal.open(path, readonly=True) as opened:
        return opened.verify(after=after), opened.verify()


def _wrong(stream: str) -> str:
    return f"the stream index's head of {stream!r} does not match its records"


@pytest.mark.parametrize("moved", [1, 10])
def test_a_count_moved_to_a_stream_that_starts_in_the_tail_fails_the_tail_check(
    journal: Path, moved: int
) -> None:
    # a0's count lowered (it still fits: its records are spread out), t's raised as much:
    # the sum holds, but t's ten records are all in the tail
    _put_head(journal, b"agent/a0", _head(279, 140 - moved, 1))
    _put_head(journal, b"agent/t", _head(290, 10 + moved, 281))

    tail, full = _tail_and_full(journal)

    assert (tail.ok, tail.first_bad_seq, tail.reason) == (False, 290, _wrong("agent/t")), tail
    assert (full.ok, full.first_bad_seq, full.reason) == (False, 279, _wrong("agent/a0")), full


def test_a_count_moved_to_a_spread_out_stream_that_starts_in_the_tail_fails_the_tail_check(
    tmp_path: Path,
) -> None:
    # a0 at 1..100 (its anchor at 64); t at the odd seqs 101..119, u at the even ones: each
    # count still fits its records' seqs, only t's records in the tail tell its count
    path = tmp_path / "journal"
    with Journal.open(path) as opened:
        opened.append(make_events(100, agents=1))
        opened.append([PrivateSet(at=0.0, agent="tu"[i % 2], key=f"k{i}", value=i) for i in range(20)])
    _put_head(path, b"agent/a0", _head(100, 99, 1))
    _put_head(path, b"agent/t", _head(119, 11, 101))

    tail, full = _tail_and_full(path, after=100)

    assert (tail.ok, tail.first_bad_seq, tail.reason) == (False, 119, _wrong("agent/t")), tail
    assert (full.ok, full.first_bad_seq, full.reason) == (False, 100, _wrong("agent/a0")), full


def test_the_first_seq_of_a_stream_that_starts_before_the_tail_is_checked(journal: Path) -> None:
    # a0 has a record in the tail from 270 on; its head's first seq set to a later record
    # of a0, which links to an earlier one: no stream's first
    _put_head(journal, b"agent/a0", _head(279, 140, 3))

    tail, full = _tail_and_full(journal, after=270)

    assert (tail.ok, tail.first_bad_seq, tail.reason) == (False, 279, _wrong("agent/a0")), tail
    assert (full.ok, full.first_bad_seq, full.reason) == (False, 279, _wrong("agent/a0")), full


def test_counts_moved_between_streams_that_start_before_the_tail_where_each_fits_are_for_a_full_check(
    journal: Path,
) -> None:
    # as verify's docstring and the README say: each head still fits its spread-out records
    _put_head(journal, b"agent/a0", _head(279, 139, 1))
    _put_head(journal, b"agent/a1", _head(280, 141, 2))

    tail, full = _tail_and_full(journal)

    assert tail.ok, tail
    assert (full.ok, full.first_bad_seq, full.reason) == (False, 279, _wrong("agent/a0")), full


def test_an_intact_journal_passes_every_tail_check(journal: Path) -> None:
    with Journal.open(journal, readonly=True) as opened:
        opened_last = opened.last_seq
        for after in range(1, opened_last + 1):
            report = opened.verify(after=after)
            assert (report.ok, report.reason) == (True, ""), (after, report)


def test_a_usage_error_with_stderr_closed_leaves_stdout_empty(tmp_path: Path) -> None:
    # click shows a usage error on stdout when stderr is None: a script reading
    # `verify --json`'s document got click's usage text there
    done = subprocess.run(
        [sys.executable, "-m", "cogfabric", "verify", "--bogus", "--json", str(tmp_path)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
        preexec_fn=lambda: os.close(2),
    )

    assert (done.returncode, done.stdout) == (2, "")
