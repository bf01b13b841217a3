"""A behavior's long loop of changes hands them over without a snapshot each time (helper h17, session 51).

In batch durability an agent hands its outbox to the writer once it holds
``group_commit_max`` events, mid-message (helper h16). Each of those hand-overs also
took a snapshot when ``snapshot_interval`` events had passed, and a snapshot encodes
the whole state: a loop that grows it (100,000 new private keys of 1 KB) encoded it
every group, 7.3 s and 1.1 GB at the peak, where one snapshot at the message's end takes
1.1 s and 0.4 GB (before the hand-overs, holding the outbox: 2.0 s and 0.9 GB); the
encoded snapshots wait in the writer's queue, which counts events only. The snapshot
now waits for the message's end; a crash meanwhile replays the message's events from
the snapshot before it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from cogfabric._audit import check_snapshots
from cogfabric.actors import FakeClock, Runtime
from cogfabric.actors._writer import JournalWriter
from cogfabric.config import Config, JournalConfig
from cogfabric.store import LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage

_GROUP = 8
_KEYS = 100


class _Grows:
    def __init__(self, looped: threading.Event, release: threading.Event) -> None:
        self._looped, self._release = looped, release

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        for i in range(_KEYS):
            ctx.set_private(f"k{i}", i)
        self._looped.set()
        assert self._release.wait(10)


def test_a_long_loop_of_changes_takes_one_snapshot_at_the_messages_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted: list[str] = []
    submit_snapshot = JournalWriter.submit_snapshot

    def counted(writer: JournalWriter, stream: str, data: bytes, **kwargs: Any) -> None:
        submitted.append(stream)
        submit_snapshot(writer, stream, data, **kwargs)

    monkeypatch.setattr(JournalWriter, "submit_snapshot", counted)
    looped, release = threading.Event(), threading.Event()
    settings = JournalConfig(durability="batch", group_commit_max=_GROUP, snapshot_interval=_GROUP)
    config = Config(journal=settings)
    with Runtime.open(
        tmp_path / "j", config=config, clock=FakeClock(), behaviors={"grows": lambda: _Grows(looped, release)}
    ) as runtime:
        runtime.spawn("a", behavior="grows")
        runtime.flush(10)
        before = len(submitted)
        writer = runtime._core.writer
        assert writer is not None
        start = writer.journal.last_seq
        runtime.bus.send("driver", "a", "go")
        try:
            assert looped.wait(10)
            writer.flush(10)
            assert writer.journal.last_seq - start >= _KEYS - _GROUP  # handed over group by group
            assert submitted[before:] == []  # and no snapshot yet
        finally:
            release.set()
        # a call of its handle is handled after the message, whose end took the snapshot
        assert runtime.agent("a").private(f"k{_KEYS - 1}") == _KEYS - 1
        assert submitted[before:] == ["agent/a"]  # one, at the message's end
        runtime.flush(10)

    with LmdbJournal.open(tmp_path / "j", readonly=True) as journal:
        assert journal.load_snapshot("agent/a") is not None
        checked, bad, _ = check_snapshots(journal, until=journal.last_seq)
        assert (checked, bad) == (1, None)
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        assert runtime.agent("a").private(f"k{_KEYS - 1}") == _KEYS - 1
