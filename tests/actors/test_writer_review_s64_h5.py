"""Review of the writer's 'not stored' warning as it dies or stops (session 64, helper h5).

A group the journal refuses whole is committed in halves (``_refused_group``): a half's
commit that raises out of the drain (a bug's) raises out of the whole group's commit too.
Only the half was appended; the rest of the group waits, not stored, behind it.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import RuntimeClosedError
from cogfabric.actors._writer import JournalWriter
from cogfabric.events import PrivateSet
from cogfabric.store import Journal

from .test_writer import WAIT, GatedJournal
from .test_writer_drain_raised_s63_h8 import _note, _ShortJournal
from .test_writer_dropped_s64_h1 import _BEFORE, _SHORT, _ZIP, _batch, _dropped
from .test_writer_full_s63_h3 import _change
from .test_writer_review_s63_h9 import _NoDoorbell

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cogfabric.events import Event


class _HalvedShortJournal(GatedJournal):
    """A real journal that refuses a batch with a change keyed 'short', and alone returns one seq too few."""

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:
        short = any(getattr(e, "key", "") == "short" for e in events)
        if short and len(events) > 1:
            msg = "refused whole"
            raise ValueError(msg)  # the writer commits the halves apart (_refused_group)
        seqs = super().append(events, **kwargs)
        return seqs[:-1] if short else seqs


def test_a_stops_drain_that_raised_in_a_refused_groups_half_tells_the_rest_of_the_group_it_is_not_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Journal.open(tmp_path / "j") as journal:
        halved = _HalvedShortJournal(journal)
        halved.gate.set()
        journal_writer = JournalWriter(halved, group_commit_max=2, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
        try:
            journal_writer._ref = _NoDoorbell(journal_writer._ref)  # type: ignore[assignment]
            settled: list[tuple[str, bool]] = []
            short_change = [PrivateSet(at=1.0, agent="a1", key="short", value=1)]
            journal_writer.submit_nowait(short_change, after=functools.partial(_note, settled, "a1"))
            a2_ack = journal_writer.submit(_change("a2"), after=functools.partial(_note, settled, "a2"))
            _batch(journal_writer, "a3")
            _batch(journal_writer, "a4")
        finally:
            # on_stop's drain: a1's group (a1, a2) is refused whole; a1 alone raises after its append
            journal_writer.stop(WAIT)
        assert journal_writer._ended.wait(WAIT)
        stored = [journal.stream_head(f"agent/a{i}") > 0 for i in range(1, 5)]

    assert stored == [True, False, False, False]
    assert settled == [("a1", False), ("a2", False)]  # in the order handed over
    # a2's caller waited, and is told its change is not stored; the warning names only
    # the changes nobody waits for (a3's, a4's), not a2's
    assert a2_ack is not None
    with pytest.raises(RuntimeClosedError, match=f"^{re.escape(_BEFORE)}$"):
        a2_ack.wait(0)
    a3_a4 = "2 changes applied already (first to agent/a3, then agent/a4) are not stored: "
    assert _dropped(caplog) == ["the journal failed; " + a3_a4 + _BEFORE]


def test_a_stops_drain_that_raised_is_still_logged_by_pykka_and_the_journal_closed_as_asked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # on_stop fails what its drain left, then raises again: Pykka logs the bug, and the
    # journal that a stop which timed out left to the writer is closed all the same
    with Journal.open(tmp_path / "j") as journal:
        short = _ShortJournal(journal)
        journal_writer = JournalWriter(short, group_commit_max=1, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
        try:
            journal_writer._ref = _NoDoorbell(journal_writer._ref)  # type: ignore[assignment]
            ack = journal_writer.submit([PrivateSet(at=1.0, agent="a1", key="short", value=1)])
            journal_writer.stop_soon()
            assert short.entered.wait(WAIT)  # the stop's drain is in a1's append
            assert not journal_writer.close_journal_when_stopped()
            short.gate.set()
            assert journal_writer._ended.wait(WAIT)
            assert journal.closed
        finally:
            short.gate.set()
            journal_writer.stop(WAIT)

    assert ack is not None
    with pytest.raises(RuntimeClosedError, match=f"^{re.escape(_SHORT)}$"):
        ack.wait(0)
    logged = [r.exc_info[1] for r in caplog.records if r.name.startswith("pykka") and r.exc_info]
    assert [repr(error) for error in logged] == [_ZIP]
