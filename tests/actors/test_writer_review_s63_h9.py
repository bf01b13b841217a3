"""Review of the writer's drain that raised and its full-map refusal (session 63, helper h9)."""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import RuntimeClosedError
from cogfabric.actors._writer import _FLUSH, JournalWriter
from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalFailedError

from .test_writer import WAIT, GatedJournal
from .test_writer_drain_raised_s63_h8 import _note, _ShortJournal

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from cogfabric.events import Event


class _ExitJournal(GatedJournal):
    """A real journal whose append raises SystemExit for a change keyed 'exit' (a backend's sys.exit).

    Just before, another thread queues a change (``late``): one a producer hands over
    as the writer's thread is on its way out, before it refuses more.
    """

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal)
        self.late: Callable[[], object] = lambda: None

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:
        if any(getattr(e, "key", "") == "exit" for e in events):
            producer = threading.Thread(target=self.late)
            producer.start()
            producer.join(WAIT)
            raise SystemExit(3)
        return super().append(events, **kwargs)


@pytest.fixture
def exit_writer(tmp_path: Path) -> Iterator[tuple[JournalWriter, _ExitJournal, Journal]]:
    with Journal.open(tmp_path / "j") as journal:
        exiting = _ExitJournal(journal)
        started = JournalWriter(exiting, group_commit_max=1, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
        try:
            yield started, exiting, journal
        finally:
            exiting.gate.set()
            started.stop(WAIT)


def _submit_later(journal_writer: JournalWriter, settled: list[tuple[str, bool]], ok: bool) -> None:
    """a0's post-commit action: a change queued while the drain is under way (as an agent's own)."""
    settled.append(("a0", ok))
    journal_writer.submit_nowait(
        [PrivateSet(at=1.0, agent="a4", key="k", value=1)], after=functools.partial(_note, settled, "a4")
    )


def test_a_system_exit_out_of_a_commit_fails_the_groups_behind_it_in_order_and_stores_none(
    exit_writer: tuple[JournalWriter, _ExitJournal, Journal],
) -> None:
    journal_writer, exiting, journal = exit_writer
    settled: list[tuple[str, bool]] = []
    first = [PrivateSet(at=1.0, agent="a0", key="k", value=1)]
    journal_writer.submit_nowait(first, after=functools.partial(_submit_later, journal_writer, settled))
    late = [PrivateSet(at=1.0, agent="a5", key="k", value=1)]
    exiting.late = functools.partial(
        journal_writer.submit_nowait, late, after=functools.partial(_note, settled, "a5")
    )
    assert exiting.entered.wait(WAIT)  # the drain the others wait behind
    acks = []
    for key, agent in [("exit", "a1"), ("k", "a2"), ("k", "a3")]:  # one drain, three groups
        events = [PrivateSet(at=1.0, agent=agent, key=key, value=1)]
        acks.append(journal_writer.submit(events, after=functools.partial(_note, settled, agent)))
    exiting.gate.set()
    assert journal_writer._ended.wait(WAIT)  # Pykka ran on_stop (a drain), not on_failure

    # Nothing behind the group that raised is stored (the journal would hold changes
    # whose predecessor it does not), and their callers hear of it in the order handed over.
    assert settled == [("a0", True), *((f"a{i}", False) for i in range(1, 6))]
    assert [journal.stream_head(f"agent/a{i}") > 0 for i in range(6)] == [True, *[False] * 5]
    for ack in acks:
        assert ack is not None
        with pytest.raises(JournalFailedError, match="the journal writer stopped after an error: SystemExit"):
            ack.wait(0)


class _NoDoorbell:
    """The writer actor's ref, less its doorbell: what is submitted waits for the stop's drain."""

    def __init__(self, ref: Any) -> None:
        self._ref = ref

    def tell(self, message: object) -> None:
        if message is not _FLUSH:
            self._ref.tell(message)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ref, name)


def test_the_groups_of_a_stops_drain_that_raised_are_failed_in_order_at_once(tmp_path: Path) -> None:
    # on_stop's drain raised (Pykka logs it, and runs no on_failure): _stopped fails
    # the group whose commit raised and those behind it (_drained_unsettled), not
    # their callers' timeout (a mutation round's survivor: _stopped without them)
    with Journal.open(tmp_path / "j") as journal:
        short = _ShortJournal(journal)
        short.gate.set()
        journal_writer = JournalWriter(short, group_commit_max=1, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
        try:
            journal_writer._ref = _NoDoorbell(journal_writer._ref)  # type: ignore[assignment]
            settled: list[tuple[str, bool]] = []
            acks = []
            for key, agent in [("short", "a1"), ("k", "a2"), ("k", "a3")]:
                events = [PrivateSet(at=1.0, agent=agent, key=key, value=1)]
                acks.append(journal_writer.submit(events, after=functools.partial(_note, settled, agent)))
        finally:
            journal_writer.stop(WAIT)
        assert journal_writer._ended.wait(WAIT)

    assert settled == [("a1", False), ("a2", False), ("a3", False)]
    for ack in acks:
        assert ack is not None
        with pytest.raises(RuntimeClosedError):
            ack.wait(0)
