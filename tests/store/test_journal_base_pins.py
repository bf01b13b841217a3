"""Promises of ``store/_journal.py`` a second mutation test found no test held.

The ``Journal`` base class's defaults and ``Journal.open``, and ``VerifyReport``'s fields.

Each test names the docstring it holds and the mutant it was seen failing under
(hand-made mutants, one at a time, against the store's tests).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric.store import Journal, JournalClosedError, LmdbJournal, VerifyReport

from .test_layout_pins import _Defaults

if TYPE_CHECKING:
    from pathlib import Path


def test_the_default_check_appendable_of_a_closed_read_only_journal_says_closed(tmp_path: Path) -> None:
    # Journal: "After close(), every method that reads or writes raises JournalClosedError",
    # as LmdbJournal.check_appendable does for a closed read-only journal. Kills: the
    # default check_appendable asking readonly before closed.
    path = tmp_path / "j"
    LmdbJournal.open(path).close()
    journal = _Defaults(LmdbJournal.open(path, readonly=True))
    journal.close()
    with pytest.raises(JournalClosedError):
        journal.check_appendable()
    with pytest.raises(JournalClosedError):
        journal.inner.check_appendable()  # the LMDB journal's own says the same


def test_journal_open_passes_the_initial_map_size_on(tmp_path: Path) -> None:
    # Journal.open: "map_size is the initial map" (then grown up to max_map_size).
    # Kills: Journal.open leaving map_size out, so every journal starts at LMDB's default.
    with Journal.open(tmp_path / "j", map_size=1 << 20, sync=False) as journal:
        assert isinstance(journal, LmdbJournal)
        assert journal.map_size == 1 << 20


def test_a_verify_report_built_as_ok_names_no_bad_seq_and_no_reason() -> None:
    # VerifyReport: first_bad_seq is "None when ok", reason "empty when it is": what a
    # backend other than LMDB gets from VerifyReport(True, checked). Kills: a default
    # first_bad_seq of 0.
    report = VerifyReport(ok=True, checked=3)
    assert report.first_bad_seq is None
    assert report.reason == ""
