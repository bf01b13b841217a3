"""Helper h6's review of db40642 (session 63): the callers told of a full journal, one warning.

After a commit no call waited for filled the map, each caller told hears that the
journal is full ("the journal is full, and this change is not stored"). And one failure
is one warning of the changes it drops, in the order they were handed over, also when it comes in a group the
journal refused first (split in halves until the bad change stands alone).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors._writer import JournalWriter
from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalFullError, JournalStillFullError

from .test_writer import WAIT
from .test_writer_full_s63_h3 import _FULL, _change, told_full, writer  # noqa: F401 - the fixture

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from cogfabric.events import Event

    from .test_writer_full_s63_h3 import GatedFullJournal


def _noting(settled: list[tuple[str, bool]], agent: str) -> Callable[[bool], None]:
    """A post-commit action that notes ``agent``'s change settled, and whether it was stored."""
    return lambda ok: settled.append((agent, ok))


def _filled_by_nobody(
    journal_writer: JournalWriter, gated: GatedFullJournal, failstop: threading.Event
) -> None:
    journal_writer.submit_nowait(_change("a0"))  # a snapshot's, or batch durability's: no caller
    assert gated.entered.wait(WAIT)
    gated.gate.set()
    assert failstop.wait(WAIT)


def test_changes_nobody_waits_for_behind_the_failure_leave_the_next_caller_told_it_is_full(
    writer: tuple[JournalWriter, GatedFullJournal, threading.Event],  # noqa: F811 - the fixture
) -> None:
    # refused with the commit that filled the map, of no caller
    journal_writer, gated, failstop = writer
    journal_writer.submit_nowait(_change("a0"))
    assert gated.entered.wait(WAIT)
    journal_writer.submit_nowait(_change("a1"))  # a group of its own behind it (group_commit_max=1)
    gated.gate.set()
    assert failstop.wait(WAIT)

    with pytest.raises(JournalFullError) as first:
        journal_writer.submit(_change("a2"))

    told_full(first.value)


def test_the_failed_commit_is_settled_before_the_changes_behind_it(
    writer: tuple[JournalWriter, GatedFullJournal, threading.Event],  # noqa: F811 - the fixture
) -> None:
    # _settle's order (the order they were handed over), kept by a failure too (a
    # mutation round's survivor: the groups behind it failed first)
    journal_writer, gated, failstop = writer
    settled: list[tuple[str, bool]] = []
    for agent in ("a0", "a1", "a2"):
        journal_writer.submit_nowait(_change(agent), after=_noting(settled, agent))
        if agent == "a0":
            assert gated.entered.wait(WAIT)
    gated.gate.set()
    assert failstop.wait(WAIT)
    journal_writer.stop(WAIT)

    assert settled == [("a0", False), ("a1", False), ("a2", False)]


# ------------------------------------------------------------------ a refused group


class _SplitThenFull:
    """A real journal: it refuses a group holding a 'bad' change and another ("split it");
    a commit holding a 'fill' change finds the map full (fail-stop). Its first append
    waits for ``gate``."""

    is_failed = False

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self.gate = threading.Event()
        self.entered = threading.Event()

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:
        self.entered.set()
        assert self.gate.wait(WAIT), "the test never opened the gate"
        keys = [getattr(event, "key", "") for event in events]
        if "bad" in keys and len(events) > 1:
            msg = "one of them cannot be stored"
            raise ValueError(msg)
        if "fill" in keys:
            self.is_failed = True
            raise JournalFullError(_FULL)
        return self._journal.append(events, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


def _named(key: str, agent: str) -> list[Event]:
    return [PrivateSet(at=1.0, agent=agent, key=key, value=1)]


@pytest.fixture
def split_writer(tmp_path: Path) -> Iterator[tuple[JournalWriter, _SplitThenFull]]:
    with Journal.open(tmp_path / "j") as journal:
        gated = _SplitThenFull(journal)
        started = JournalWriter(gated, group_commit_max=2, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
        try:
            yield started, gated
        finally:
            started.stop(WAIT)


def test_a_failure_in_a_split_group_fails_what_it_drops_in_order_with_one_warning(
    split_writer: tuple[JournalWriter, _SplitThenFull], caplog: pytest.LogCaptureFixture
) -> None:
    journal_writer, gated = split_writer
    settled: list[tuple[str, bool]] = []
    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        journal_writer.submit_nowait(_change("a0"))  # the drain the others wait behind
        assert gated.entered.wait(WAIT)
        # one drain: groups [fill, bad] (refused: split) and [a3, a4]
        for key, agent in [("fill", "a1"), ("bad", "a2"), ("k", "a3"), ("k", "a4")]:
            journal_writer.submit_nowait(_named(key, agent), after=_noting(settled, agent))
        gated.gate.set()
        journal_writer.stop(WAIT)

    assert settled == [("a1", False), ("a2", False), ("a3", False), ("a4", False)]  # as handed over
    dropped = [r.getMessage() for r in caplog.records if "changes applied already" in r.getMessage()]
    assert len(dropped) == 1, dropped
    assert dropped[0].startswith("the journal failed; 4 changes applied already (first to agent/a1, then")


def test_the_groups_of_the_failed_drain_are_failed_once_in_order_with_one_warning(
    split_writer: tuple[JournalWriter, _SplitThenFull], caplog: pytest.LogCaptureFixture
) -> None:
    # a drain of two groups, [a1 (fills the map), a2] and [a3]: the group left behind in
    # the drain is failed with the queue, and not committed (refused) once more after
    journal_writer, gated = split_writer
    settled: list[tuple[str, bool]] = []
    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        journal_writer.submit_nowait(_change("a0"))  # the drain the others wait behind
        assert gated.entered.wait(WAIT)
        for key, agent in [("fill", "a1"), ("k", "a2"), ("k", "a3")]:
            journal_writer.submit_nowait(_named(key, agent), after=_noting(settled, agent))
        gated.gate.set()
        journal_writer.stop(WAIT)

    assert settled == [("a1", False), ("a2", False), ("a3", False)]
    dropped = [r.getMessage() for r in caplog.records if "changes applied already" in r.getMessage()]
    expected = (
        "the journal failed; 3 changes applied already (first to agent/a1, then agent/a2, agent/a3) "
        f"are not stored: {_FULL}"
    )
    assert dropped == [expected]


def test_ten_streams_are_all_named_and_none_more(
    writer: tuple[JournalWriter, GatedFullJournal, threading.Event],  # noqa: F811 - the fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal_writer, gated, failstop = writer
    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        journal_writer.submit_nowait(_change("a0"))
        assert gated.entered.wait(WAIT)
        for i in range(1, 10):
            journal_writer.submit_nowait(_change(f"a{i}"))
        gated.gate.set()
        assert failstop.wait(WAIT)

    dropped = [r.getMessage() for r in caplog.records if "changes applied already" in r.getMessage()]
    named = ", ".join(f"agent/a{i}" for i in range(1, 10))
    expected = (
        f"the journal failed; 10 changes applied already (first to agent/a0, then {named}) are not stored"
    )
    assert dropped == [f"{expected}: {_FULL}"]


def test_a_call_among_changes_nobody_waits_for_behind_the_failure_is_told_it_is_full(
    writer: tuple[JournalWriter, GatedFullJournal, threading.Event],  # noqa: F811 - the fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    # refused at once with changes of no caller; the warning counts the changes of no
    # caller only (its caller heard)
    journal_writer, gated, failstop = writer
    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        journal_writer.submit_nowait(_change("a0"))
        assert gated.entered.wait(WAIT)
        journal_writer.submit_nowait(_change("a1"))
        ack = journal_writer.submit(_change("a2"))
        assert ack is not None
        gated.gate.set()
        assert failstop.wait(WAIT)

        with pytest.raises(JournalFullError) as first:
            ack.wait(WAIT)
        with pytest.raises(JournalStillFullError):
            journal_writer.submit(_change("a3"))

    told_full(first.value)
    dropped = [r.getMessage() for r in caplog.records if "changes applied already" in r.getMessage()]
    expected = (
        "the journal failed; 2 changes applied already (first to agent/a0, then agent/a1) are not stored"
    )
    assert dropped == [f"{expected}: {_FULL}"]


def test_the_half_of_a_split_group_refused_after_the_failure_leaves_the_next_caller_told_it_is_full(
    split_writer: tuple[JournalWriter, _SplitThenFull],
) -> None:
    # [a1 (fills the map), a2 (bad)] is refused and split: a1's commit fails, then a2's
    # half is refused, of no caller
    journal_writer, gated = split_writer
    refused = threading.Event()
    journal_writer.submit_nowait(_change("a0"))
    assert gated.entered.wait(WAIT)
    journal_writer.submit_nowait(_named("fill", "a1"))
    journal_writer.submit_nowait(_named("bad", "a2"), after=lambda _ok: refused.set())
    gated.gate.set()
    assert refused.wait(WAIT)

    with pytest.raises(JournalFullError) as first:
        journal_writer.submit(_change("a3"))

    told_full(first.value)
