"""A deferred request that times out while ``close()`` stops its recipient names no kill.

Session 50 made a deferred request's timeout say "<recipient> was killed meanwhile" once
its recipient was no longer listed. ``close()`` unlists every agent first, then waits
for the busy ones before it fails the open requests: a request that timed out in that
wait said, and its dead letter kept in the journal, that an agent was killed that the
journal holds no kill of.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from cogfabric.actors import AgentContext, FakeClock, IpcTimeoutError, Runtime
from cogfabric.events import AgentKilled, IpcDeadLettered
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.events import IpcMessage


def test_a_deferred_request_timing_out_during_close_does_not_say_its_recipient_was_killed(
    tmp_path: Path,
) -> None:
    deferred, started, release = threading.Event(), threading.Event(), threading.Event()

    class Deferring:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            deferred.set()

    class Blocking:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            started.set()
            release.wait(10)

    path = tmp_path / "j"
    runtime = Runtime.open(path, clock=FakeClock(), behaviors={"d": Deferring, "b": Blocking})
    outcome: list[BaseException] = []
    try:
        runtime.spawn("d", behavior="d")
        runtime.spawn("b", behavior="b")
        runtime.bus.send("x", "b", "block")
        assert started.wait(10)

        def ask() -> None:
            try:
                runtime.bus.request("x", "d", "work", timeout=0.5)
            except BaseException as exc:  # noqa: BLE001 - the test reads it
                outcome.append(exc)

        requester = threading.Thread(target=ask)
        requester.start()
        assert deferred.wait(10)
        closer = threading.Thread(target=runtime.close)
        closer.start()  # unlists both agents, then waits for b's message
        requester.join(10)  # the request times out in that wait
        assert not requester.is_alive()
    finally:
        release.set()
        runtime.close()

    assert len(outcome) == 1
    assert isinstance(outcome[0], IpcTimeoutError)
    assert "returned None" in str(outcome[0])
    assert "killed" not in str(outcome[0])
    with Journal.open(path, readonly=True) as journal:
        events = [record.event for record in journal.read()]
    assert not any(isinstance(event, AgentKilled) for event in events)
    letters = [e for e in events if isinstance(e, IpcDeadLettered) and e.reason == "timeout"]
    assert [letter.error for letter in letters] == [str(outcome[0])]
