"""The journal writer's fail-stop at its edge: what a mutation test found no test held."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors._writer import JournalWriter
from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalFailedError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cogfabric.events import Event

WAIT = 10.0


def event(i: int) -> PrivateSet:
    return PrivateSet(at=1.0, agent="a", key=f"k{i}", value=i)


class OnceBrokenJournal:
    """A real journal: its first append waits for ``gate``; its second raises a bug; later ones work."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.calls = 0

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            assert self.gate.wait(WAIT)
        if self.calls == 2:
            msg = "a bug in the journal"
            raise RuntimeError(msg)
        return self._journal.append(events, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


def test_after_an_unexpected_error_no_later_group_of_the_same_drain_is_committed(tmp_path: Path) -> None:
    # "Not an error the journal documents: whether anything was stored is unknown, so the
    # writer goes fail-stop": a group already taken from the queue must be refused too, not
    # appended after the failure (README/issue 7: fail-stop, no retry)
    with Journal.open(tmp_path / "j") as journal:
        broken = OnceBrokenJournal(journal)
        writer = JournalWriter(broken, group_commit_max=1, call_timeout=WAIT, backlog_max=100)  # type: ignore[arg-type]
        try:
            writer.submit_nowait([event(0)])
            assert broken.entered.wait(WAIT)  # stuck in event 0's append: the next two queue up
            first = writer.submit([event(1)])
            second = writer.submit([event(2)])
            assert first is not None
            assert second is not None
            broken.gate.set()  # one drain takes both: two groups of one (group_commit_max=1)

            with pytest.raises(JournalFailedError, match="a bug in the journal"):
                first.wait(WAIT)
            with pytest.raises(JournalFailedError):
                second.wait(WAIT)
            assert [getattr(r.event, "key", None) for r in journal.read()] == ["k0"]
        finally:
            broken.gate.set()
            writer.stop(WAIT)
