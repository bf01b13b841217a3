"""close() names the messages it leaves undelivered in agents that did not stop (session 49).

An agent still in its behavior once close() has waited ``call_timeout`` keeps its
mailbox; what waits there is dropped, not handled, and the journal holds each as sent
with no delivery. The warning says how many, so a simulation sees what it lost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cogfabric.actors import _runtime

from .test_supervision import Gate, _open, _reset_gate, _running, _short_call_timeout

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

__all__ = ["_reset_gate"]  # the Gate's autouse reset, used here too


def test_close_counts_the_messages_a_late_agent_drops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = _open(tmp_path / "j")  # the sends' synced commits get the usual 10 s
    agent = _running(runtime)  # in its behavior until Gate.release
    for n in range(4):
        runtime.bus.send("x", "a", f"later {n}")
    assert agent.queued == 4
    stopped = runtime._entry("a").ref.actor_stopped
    try:
        with caplog.at_level("WARNING", logger=_runtime.__name__), _short_call_timeout(runtime, 0.3):
            runtime.close()
    finally:
        Gate.release.set()

    assert (
        "1 agent actor did not stop within 0.3 s; about 4 messages still wait in its mailbox "
        "and will be dropped, not handled"
    ) in caplog.text
    assert stopped.wait(10)
    assert [m.topic for m in Gate.seen if m.topic.startswith("later")] == []  # none reached the behavior
