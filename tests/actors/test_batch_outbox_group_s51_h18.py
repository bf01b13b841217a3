"""A behavior's long run of changes is handed over exactly a group at a time (helper h18, session 51).

Mutation pins for the mid-message hand-over of batch durability (helper h16's, then
h17's): the outbox goes to the writer once it holds ``group_commit_max`` events, not one
more (a commit larger than the group, and an outbox past the bound), and the ticket of
that hand-over is the change's: a ``set_task_context`` whose change filled the group
wins over a publication the writer took before it, as in replay.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import FakeClock, Runtime, replay_agent
from cogfabric.actors._writer import JournalWriter
from cogfabric.config import Config, JournalConfig
from cogfabric.store import Journal

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import Event, IpcMessage

_GROUP = 4


def test_a_long_loop_hands_over_group_commit_max_events_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[int] = []
    recording = threading.Event()
    submit_nowait = JournalWriter.submit_nowait

    def counted(writer: JournalWriter, events: Sequence[Event], **kwargs: Any) -> int:
        if recording.is_set() and threading.current_thread() is loop_thread[0]:
            sizes.append(len(events))
        return submit_nowait(writer, events, **kwargs)

    loop_thread: list[threading.Thread | None] = [None]

    class _Loop:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            loop_thread[0] = threading.current_thread()
            recording.set()
            for i in range(3 * _GROUP):
                ctx.set_private("k", i)
            recording.clear()

    monkeypatch.setattr(JournalWriter, "submit_nowait", counted)
    config = Config(journal=JournalConfig(durability="batch", group_commit_max=_GROUP))
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"loop": _Loop}) as runtime:
        runtime.spawn("a", behavior="loop")
        runtime.bus.send("driver", "a", "go")
        runtime.flush(10)
        assert runtime.agent("a").private("k") == 3 * _GROUP - 1
    assert len(sizes) >= 2
    assert set(sizes) == {_GROUP}  # never one more than the group (nor four groups in one)


@pytest.mark.parametrize("before", range(_GROUP + 1))
def test_a_set_task_context_that_fills_the_group_wins_over_an_earlier_publication(
    tmp_path: Path, before: int
) -> None:
    entered, gate = threading.Event(), threading.Event()

    class _SetsLater:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            entered.set()
            assert gate.wait(10)
            for i in range(before):  # one of these offsets makes the set_task_context fill the group
                ctx.set_private(f"k{i}", i)
            ctx.set_task_context({"by": "the behavior"})

    config = Config(journal=JournalConfig(durability="batch", group_commit_max=_GROUP))
    behaviors = {"s": _SetsLater}
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors=behaviors) as runtime:
        agent = runtime.spawn("A", task_id="t", behavior="s")
        runtime.bus.send("driver", "A", "work")
        assert entered.wait(10)
        assert runtime.publish_task_context("t", {"by": "publication"}) == ["A"]
        gate.set()
        runtime.flush(10)
        assert agent.task_context() == {"by": "the behavior"}
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        replayed = replay_agent(journal, "A")
    assert replayed is not None
    assert replayed.task_context == {"by": "the behavior"}
