"""A journal that fills up under a commit no call waits for (session 63, helper h3).

A snapshot's commit, or batch durability's changes, can be the one that finds the map
at ``max_map_size``. The first caller told of it heard that the writer "refuses changes
since an earlier failure", of which it had heard nothing; every refusal after a full map
now says first that the journal is full (a ``JournalStillFullError``, which is a
``JournalFullError``), with the failure's own message. And the changes applied
already that the failure drops were logged in one warning per group commit behind the
failed one: they are now one warning, with their count, naming each one's stream.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors._writer import JournalWriter
from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalFullError, JournalStillFullError

from .test_writer import WAIT, GatedJournal

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from cogfabric.events import Event

_FULL = "j reached max_map_size (4096 bytes): a commit of 1 record (9 bytes) did not fit (raise it)"
_REFUSED = f"the journal is full, and this change is not stored (reopen it to append again): {_FULL}"


def told_full(error: BaseException) -> None:
    """``error`` is the refusal of a change after the map filled: it says so, whoever filled it."""
    assert isinstance(error, JournalStillFullError), repr(error)  # a JournalFullError too
    assert str(error) == _REFUSED
    assert isinstance(error.__cause__, JournalFullError)


class GatedFullJournal(GatedJournal):
    """Its first append waits for ``gate``, then finds the map full: fail-stop, as LMDB's does."""

    is_failed = False

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:  # noqa: ARG002
        self.entered.set()
        assert self.gate.wait(WAIT), "the test never opened the gate"
        self.is_failed = True
        raise JournalFullError(_FULL)


def _change(agent: str) -> list[Event]:
    return [PrivateSet(at=1.0, agent=agent, key="k", value=1)]


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[tuple[JournalWriter, GatedFullJournal, threading.Event]]:
    with Journal.open(tmp_path / "j") as journal:
        gated = GatedFullJournal(journal)
        started = JournalWriter(gated, group_commit_max=1, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
        failstop = threading.Event()
        started.on_failstop = failstop.set
        try:
            yield started, gated, failstop
        finally:
            started.stop(WAIT)


def test_each_caller_after_a_commit_nobody_waited_for_filled_the_journal_hears_it_is_full(
    writer: tuple[JournalWriter, GatedFullJournal, threading.Event],
) -> None:
    journal_writer, gated, failstop = writer
    journal_writer.submit_nowait(_change("a0"))  # batch durability's, or a snapshot's: no caller
    assert gated.entered.wait(WAIT)
    gated.gate.set()
    assert failstop.wait(WAIT)

    with pytest.raises(JournalFullError) as first:
        journal_writer.submit(_change("a1"))
    with pytest.raises(JournalStillFullError) as later:
        journal_writer.submit(_change("a2"))

    told_full(first.value)  # not "since an earlier failure": it heard of none
    told_full(later.value)


def test_a_call_queued_behind_the_commit_that_filled_the_journal_hears_it_is_full(
    writer: tuple[JournalWriter, GatedFullJournal, threading.Event],
) -> None:
    journal_writer, gated, _ = writer
    journal_writer.submit_nowait(_change("a0"))
    assert gated.entered.wait(WAIT)
    ack = journal_writer.submit(_change("a1"))  # a commit of its own (group_commit_max=1), never made
    behind = journal_writer.submit(_change("a2"))
    assert ack is not None
    assert behind is not None
    gated.gate.set()

    with pytest.raises(JournalFullError) as first:
        ack.wait(WAIT)
    with pytest.raises(JournalFullError) as second:
        behind.wait(WAIT)  # refused in the same breath as the first: told alike
    with pytest.raises(JournalStillFullError):
        journal_writer.submit(_change("a3"))

    told_full(first.value)
    told_full(second.value)


def test_the_changes_one_failure_drops_are_one_warning_naming_each_stream(
    writer: tuple[JournalWriter, GatedFullJournal, threading.Event], caplog: pytest.LogCaptureFixture
) -> None:
    journal_writer, gated, failstop = writer
    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        journal_writer.submit_nowait(_change("a0"))
        assert gated.entered.wait(WAIT)
        for i in range(1, 13):  # twelve more group commits behind it, one change each
            journal_writer.submit_nowait(_change(f"a{i}"))
        gated.gate.set()
        assert failstop.wait(WAIT)
        journal_writer.stop(WAIT)

    dropped = [r.getMessage() for r in caplog.records if "changes applied already" in r.getMessage()]
    named = ", ".join(f"agent/a{i}" for i in range(1, 10))
    expected = (
        f"the journal failed; 13 changes applied already (first to agent/a0, then {named} and 3 more) "
        f"are not stored: {_FULL}"
    )
    assert dropped == [expected]


def test_a_runtime_whose_snapshot_fills_the_journal_tells_its_next_call_it_is_full(tmp_path: Path) -> None:
    # sync durability: each change is committed for its call; the snapshot after it
    # (snapshot_interval 1, the agent's whole state) is committed for nobody, and is
    # the commit that finds the map full
    limit = 256 << 10
    config = {
        "journal": {"map_size": limit, "max_map_size": limit, "snapshot_interval": 1},
    }
    errors: list[BaseException] = []
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config=config) as rt:
        agent = rt.spawn("a", task_id="t")
        for n in range(400):
            try:
                agent.set_private(f"k{n}", "x" * 900)
            except cf.JournalError as exc:
                errors.append(exc)
                if len(errors) == 2:
                    break

    assert len(errors) == 2
    assert all(isinstance(error, JournalFullError) for error in errors)
    first = str(errors[0])
    assert "reached max_map_size (262144 bytes)" in first
    assert "since an earlier failure" not in first
    # the snapshot's commit filled it (the refusal says so), or the change and its
    # snapshot went in one commit, which the caller waited for (the failure itself)
    assert first.startswith("the journal is full, and this change is not stored") or (
        type(errors[0]) is JournalFullError and re.search(r"a commit of [1-9]\d* records?", first)
    ), first
