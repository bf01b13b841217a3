"""A retire or a recover made while a suspend that timed out waits in the mailbox follows it.

The spec's lifecycle (§2.3, ``TestLifecycleSuspendResumeRetireKill``,
``TestRecoverRevivesSuspendedAgent``): suspend, then retire (or recover) works. Here a
suspend of an agent whose behavior handles a long message times out and still takes
effect; a resume made then queued behind it, but a retire or a recover was refused at
once as RUNNING (``AgentRunningError``), though the agent would be SUSPENDED by the time
it got to it: the suspend had the last word, not the caller's last call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric.actors import ActorTimeoutError, AgentRunningError, AgentState
from cogfabric.events import CognitiveState
from tests.actors.test_supervision import Gate, _open, _reset_gate, _running, _short_call_timeout  # noqa: F401

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("mode", ["sync", "batch"])
def test_a_retire_after_a_suspend_that_timed_out_follows_it_in_the_mailbox(tmp_path: Path, mode: str) -> None:
    with _open(tmp_path / "j", mode=mode) as runtime:
        agent = _running(runtime)  # the set-up keeps 10 s: a loaded machine's commit may need more than 0.2
        try:
            with _short_call_timeout(runtime, 0.2):
                with pytest.raises(ActorTimeoutError):
                    runtime.suspend("a")
                with pytest.raises(ActorTimeoutError):  # queued behind the suspend, not refused
                    runtime.retire("a")
        finally:
            Gate.release.set()
        runtime.flush()

        assert agent.lifecycle == AgentState.RETIRED


def test_a_recover_after_a_suspend_that_timed_out_follows_it_in_the_mailbox() -> None:
    with _open(None) as runtime:
        agent = _running(runtime)  # the set-up keeps 10 s, as on a loaded machine it may need more than 0.2
        try:
            with _short_call_timeout(runtime, 0.2):
                with pytest.raises(ActorTimeoutError):
                    runtime.suspend("a")
                with pytest.raises(ActorTimeoutError):  # queued behind the suspend, not refused
                    runtime.recover("a", CognitiveState(decision="back"))
        finally:
            Gate.release.set()
        runtime.flush()

        assert agent.lifecycle == AgentState.IDLE
        assert agent.cognitive_state().decision == "back"


def test_a_retire_or_a_recover_of_a_running_agent_with_no_call_ahead_is_still_refused_at_once() -> None:
    with _open(None, timeout=5.0) as runtime:
        agent = _running(runtime)
        try:
            with pytest.raises(AgentRunningError):
                runtime.retire("a")
            with pytest.raises(AgentRunningError):
                runtime.recover("a", CognitiveState())
        finally:
            Gate.release.set()
        runtime.flush()

        assert agent.lifecycle == AgentState.IDLE
