"""In batch durability a behavior's changes reach the writer a group at a time (helper h16, session 51).

In batch durability an agent keeps the changes its message leads to in an outbox and
hands them to the journal writer when the message is done. A behavior that changed its
state in a long loop within one message kept every change there until the end: 300,000
``ctx.set_private`` calls of 1 KB held 300,000 events (386 MB), past the writer's
bounded queue (``group_commit_max`` times four), which never saw them. The outbox is now
handed over once it holds ``group_commit_max`` events, waiting for room in the writer's
queue as a send does.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from cogfabric.actors import FakeClock, Runtime
from cogfabric.config import Config, JournalConfig
from cogfabric.events import PrivateSet
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage

_GROUP = 8
_CHANGES = 100


class _Loop:
    def __init__(self, looped: threading.Event, release: threading.Event) -> None:
        self._looped, self._release = looped, release

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        for i in range(_CHANGES):
            ctx.set_private("k", i)
        self._looped.set()
        assert self._release.wait(10)


def test_a_long_loop_of_changes_in_one_message_reaches_the_writer_before_the_message_ends(
    tmp_path: Path,
) -> None:
    looped, release = threading.Event(), threading.Event()
    config = Config(journal=JournalConfig(durability="batch", group_commit_max=_GROUP))
    with Runtime.open(
        tmp_path / "j", config=config, clock=FakeClock(), behaviors={"loop": lambda: _Loop(looped, release)}
    ) as runtime:
        runtime.spawn("a", behavior="loop")
        runtime.bus.send("driver", "a", "go")
        try:
            assert looped.wait(10)
            writer = runtime._core.writer  # what reached the writer, mid-message
            assert writer is not None
            writer.flush(10)
            records = writer.journal.read(stream="agent/a")
            with_values = [r.event.value for r in records if isinstance(r.event, PrivateSet)]
            # all but the last group's worth are committed while the message is in hand
            assert len(with_values) >= _CHANGES - _GROUP
            assert with_values == list(range(len(with_values)))
        finally:
            release.set()
        runtime.flush(10)
        assert runtime.agent("a").private("k") == _CHANGES - 1

    with Journal.open(tmp_path / "j", readonly=True) as journal:
        values = [r.event.value for r in journal.read(stream="agent/a") if isinstance(r.event, PrivateSet)]
    assert values == list(range(_CHANGES))
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as runtime:
        assert runtime.agent("a").private("k") == _CHANGES - 1
