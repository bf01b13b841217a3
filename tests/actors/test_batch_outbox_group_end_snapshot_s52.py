"""A long run of changes that ends on a group's last change still gets its snapshot at the message's end.

Batch durability hands a behavior's changes over ``group_commit_max`` at a time, with no
snapshot at each hand-over (session 51). A loop whose length is a multiple of the group
(counting the delivery the agent journals first) leaves the outbox empty at the message's
end; the snapshot that was due must be taken there, not deferred to the agent's next
change (recovery would read the whole run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric.actors import FakeClock, Runtime
from cogfabric.config import Config, JournalConfig
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage

_GROUP = 4


class _Loop:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        for i in range(int(message.payload)):
            ctx.set_private(f"k{i}", i)


@pytest.mark.parametrize("changes", range(2 * _GROUP, 3 * _GROUP))  # one of them ends on a group
def test_the_snapshot_due_after_a_run_of_groups_is_taken_at_the_message_end(
    tmp_path: Path, changes: int
) -> None:
    settings = JournalConfig(durability="batch", group_commit_max=_GROUP, snapshot_interval=_GROUP)
    config = Config(journal=settings)
    path = tmp_path / "j"
    with Runtime.open(path, config=config, clock=FakeClock(), behaviors={"loop": _Loop}) as runtime:
        runtime.spawn("a", behavior="loop")
        runtime.flush(10)
        runtime.bus.send("driver", "a", "go", changes)
        runtime.flush(10)
        assert runtime.agent("a").private(f"k{changes - 1}") == changes - 1
    with Journal.open(path, readonly=True) as journal:
        snapshot = journal.load_snapshot("agent/a")
        head = journal.stream_head("agent/a")
    assert snapshot is not None
    assert snapshot.seq == head  # covers the last change of the run
    with Runtime.open(path, config=config, clock=FakeClock(), behaviors={"loop": _Loop}) as runtime:
        assert runtime.agent("a").private(f"k{changes - 1}") == changes - 1
