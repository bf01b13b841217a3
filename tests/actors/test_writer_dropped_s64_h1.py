"""What the journal writer drops as it dies or stops on an error is logged (session 64, helper h1).

In batch durability a change is applied to the agent's live state before the writer
commits it, and nobody waits for it. A journal's failure logs one warning naming the
changes it drops ("N changes applied already ... are not stored"); the writer's own end
on a bug (``_died``), on a SystemExit out of a commit, or in the drain of its stop
(``_stopped``) logged none: the live agents held what the journal did not, unseen.
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
from .test_writer_drain_raised_s63_h8 import _note, _ShortJournal, short_writer  # noqa: F401 - the fixture
from .test_writer_full_s63_h3 import _change
from .test_writer_review_s63_h9 import _ExitJournal, _NoDoorbell, _submit_later, exit_writer  # noqa: F401

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cogfabric.events import Event

_ZIP = "ValueError('zip() argument 2 is shorter than argument 1')"
_SHORT = f"the journal writer stopped after an error: {_ZIP}"
_BEFORE = f"the journal writer stopped before committing it, after an error: {_ZIP}"
_A2_A3 = "the journal failed; 2 changes applied already (first to agent/a2, then agent/a3) are not stored: "


def _dropped(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "applied already" in r.getMessage()]


def _batch(journal_writer: JournalWriter, agent: str, key: str = "k") -> None:
    """A change handed over in batch durability: applied already, nobody waits for it."""
    journal_writer.submit_nowait([PrivateSet(at=1.0, agent=agent, key=key, value=1)])


def test_a_writer_that_died_on_a_bug_logs_the_changes_behind_the_commit_that_raised(
    short_writer: tuple[JournalWriter, _ShortJournal],  # noqa: F811 - the fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal_writer, short = short_writer
    journal_writer.submit_nowait(_change("a0"))  # the drain the others wait behind
    assert short.entered.wait(WAIT)
    for key, agent in [("short", "a1"), ("k", "a2"), ("k", "a3")]:
        _batch(journal_writer, agent, key)
    short.gate.set()
    assert journal_writer._ended.wait(WAIT)  # on_failure: _died, then _stopped

    # a1's commit raised after its append: it is stored; a2 and a3 are not
    assert [short.stream_head(f"agent/a{i}") > 0 for i in range(4)] == [True, True, False, False]
    assert _dropped(caplog) == [_A2_A3 + _SHORT]


def test_a_system_exit_out_of_a_commit_logs_the_changes_it_drops_once(
    exit_writer: tuple[JournalWriter, _ExitJournal, Journal],  # noqa: F811 - the fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal_writer, exiting, journal = exit_writer
    settled: list[tuple[str, bool]] = []
    later = functools.partial(_submit_later, journal_writer, settled)  # a4's change, on the writer's thread
    journal_writer.submit_nowait(_change("a0"), after=later)
    exiting.late = functools.partial(_batch, journal_writer, "a5")  # queued as the commit raises
    assert exiting.entered.wait(WAIT)
    for key, agent in [("exit", "a1"), ("k", "a2"), ("k", "a3")]:
        _batch(journal_writer, agent, key)
    exiting.gate.set()
    assert journal_writer._ended.wait(WAIT)  # _died in _commit, then on_stop's drain and _stopped

    assert [journal.stream_head(f"agent/a{i}") > 0 for i in range(6)] == [True, *[False] * 5]
    assert _dropped(caplog) == [
        (
            "the journal failed; 5 changes applied already (first to agent/a1, then agent/a2, agent/a3, "
            "agent/a4, agent/a5) are not stored: the journal writer stopped after an error: SystemExit(3)"
        )
    ]


class _HalvedExitJournal(GatedJournal):
    """A real journal that refuses a batch with a change keyed 'exit' (ValueError), and exits on it alone."""

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:
        if any(getattr(e, "key", "") == "exit" for e in events):
            if len(events) > 1:
                msg = "refused whole"
                raise ValueError(msg)  # the writer commits the halves apart (_refused_group)
            raise SystemExit(3)
        return super().append(events, **kwargs)


def test_a_system_exit_in_a_refused_groups_half_logs_the_group_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the half's commit and the whole group's both raise, and both call _died: one record
    with Journal.open(tmp_path / "j") as journal:
        halved = _HalvedExitJournal(journal)
        journal_writer = JournalWriter(halved, group_commit_max=2, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
        try:
            journal_writer.submit_nowait(_change("a0"))
            assert halved.entered.wait(WAIT)
            _batch(journal_writer, "a1", "exit")
            _batch(journal_writer, "a2")  # one group with a1's
            halved.gate.set()
            assert journal_writer._ended.wait(WAIT)
        finally:
            halved.gate.set()
            journal_writer.stop(WAIT)

    assert _dropped(caplog) == [
        (
            "the journal failed; 2 changes applied already (first to agent/a1, then agent/a2) are not "
            "stored: the journal writer stopped after an error: SystemExit(3)"
        )
    ]


def test_a_stops_drain_that_raised_logs_what_it_drops_and_tells_its_callers_the_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Journal.open(tmp_path / "j") as journal:
        short = _ShortJournal(journal)
        short.gate.set()
        journal_writer = JournalWriter(short, group_commit_max=1, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
        try:
            journal_writer._ref = _NoDoorbell(journal_writer._ref)  # type: ignore[assignment]
            settled: list[tuple[str, bool]] = []
            change = [PrivateSet(at=1.0, agent="a1", key="short", value=1)]
            short_ack = journal_writer.submit(change, after=functools.partial(_note, settled, "a1"))
            _batch(journal_writer, "a2")
            _batch(journal_writer, "a3")
            last_ack = journal_writer.submit(_change("a4"))
        finally:
            journal_writer.stop(WAIT)  # on_stop's drain raises at a1's commit: _stopped fails the rest
        assert journal_writer._ended.wait(WAIT)
        stored = [journal.stream_head(f"agent/a{i}") > 0 for i in range(1, 5)]

    # a1's change is stored (its commit raised after the append); a2 to a4 are not
    assert stored == [True, False, False, False]
    assert _dropped(caplog) == [_A2_A3 + _BEFORE]
    # a1's caller is told the error, not that the writer stopped before committing its
    # change (it is committed); a4's, behind it, that it stopped before committing its own
    assert settled == [("a1", False)]
    for ack, told in [(short_ack, _SHORT), (last_ack, _BEFORE)]:
        assert ack is not None
        with pytest.raises(RuntimeClosedError, match=f"^{re.escape(told)}$"):
            ack.wait(0)
