"""Log texts whose count is one read singular (session 63, helper h8; h4 did the others).

"1 change applied already (to agent/a0) is not stored", "refused 1 event of agent/a
(PrivateSet) that was applied already", "1 of 1 retriever did not answer ... or was
still running ...; the prompt goes on without it", "a batch of 1 call", "the stream
index's heads count 1 record", not "1 changes ... are", "1 events", "1 retrievers".
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors._memory import MemoryManager, Snippet, _Overdue, _run_retrievers
from cogfabric.actors._writer import JournalWriter
from cogfabric.events import PrivateSet
from cogfabric.store import Journal
from cogfabric.store._verify import _other_heads

from .test_writer import WAIT, GatedJournal
from .test_writer_full_s63_h3 import _FULL, writer  # noqa: F401 - the fixture
from .test_writer_full_s63_h6 import _filled_by_nobody

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cogfabric.events import Event

    from .test_writer_full_s63_h3 import GatedFullJournal


def test_one_change_a_failure_drops_is_one_change(
    writer: tuple[JournalWriter, GatedFullJournal, threading.Event],  # noqa: F811 - the fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    journal_writer, gated, failstop = writer
    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        _filled_by_nobody(journal_writer, gated, failstop)

    dropped = [r.getMessage() for r in caplog.records if "applied already" in r.getMessage()]
    assert dropped == [f"the journal failed; 1 change applied already (to agent/a0) is not stored: {_FULL}"]


class _Refusing(GatedJournal):
    """A real journal that refuses every append (a value it cannot encode), storing nothing."""

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:  # noqa: ARG002
        msg = "it cannot be stored"
        raise ValueError(msg)


def test_one_event_the_journal_refuses_is_one_event(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    refused = threading.Event()
    with Journal.open(tmp_path / "j") as journal:
        started = JournalWriter(_Refusing(journal), group_commit_max=8, call_timeout=WAIT)  # type: ignore[arg-type]
        try:
            with caplog.at_level(logging.ERROR, logger="cogfabric"):
                started.submit_nowait(
                    [PrivateSet(at=1.0, agent="a", key="k", value=1)], after=lambda _ok: refused.set()
                )
                assert refused.wait(WAIT)
        finally:
            started.stop(WAIT)

    expected = (
        "the journal refused 1 event of agent/a (PrivateSet) that was applied already: it cannot be stored"
    )
    assert expected in caplog.text


def test_one_retriever_of_one_that_did_not_answer_is_one(caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()

    class Stuck:
        def retrieve(self, query: str) -> Sequence[Snippet]:  # noqa: ARG002
            release.wait(WAIT)
            return []

    try:
        with caplog.at_level(logging.WARNING, logger="cogfabric"):
            assert _run_retrievers([Stuck()], "q", 0.05, _Overdue(), "j") == []
    finally:
        release.set()

    assert (
        "1 of 1 retriever did not answer within 0.05 s, or was still running for an earlier prompt; "
        "the prompt goes on without it"
    ) in caplog.text


def test_a_session_batch_of_one_call_that_failed_is_one_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: MemoryManager, events: list[Event]) -> Exception | None:  # noqa: ARG001
        msg = "a bug"
        raise RuntimeError(msg)

    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        monkeypatch.setattr(MemoryManager, "_journal_batch", broken)
        with caplog.at_level(logging.ERROR, logger="cogfabric"), pytest.raises(RuntimeError, match="a bug"):
            rt.memory.create_session("u")
        monkeypatch.undo()

    assert "the session actor failed on a batch of 1 call\n" in caplog.text


def test_heads_that_count_one_record_say_one_record(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j") as journal:
        journal.append(
            [PrivateSet(at=1.0, agent="a", key="k", value=1), PrivateSet(at=1.0, agent="b", key="k", value=1)]
        )
        with journal._env.begin(write=True) as txn:  # type: ignore[attr-defined]
            assert txn.delete(b"agent/b", db=journal._db_heads)  # type: ignore[attr-defined]

        assert _other_heads(journal) == (  # type: ignore[arg-type]
            None,
            "the stream index's heads count 1 record, but the journal holds 2",
        )
