"""A deferred request whose recipient is killed before it replied says so when it times out.

The behavior returned None (the reply to come from ``ctx.reply``), then its agent was
killed: its kept ``ctx`` can no longer reply (``AgentNotFoundError``), so the request
can only time out. Its error, and its dead letter, blamed a behavior that "returned None
... and no reply came", the hint for a behavior that forgot its ``return``, and left out
that the agent was gone, which an auditor reading the letter needs to tell the two apart.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import AgentContext, AgentNotFoundError, FakeClock, IpcTimeoutError, Runtime

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.events import IpcMessage


class Deferring:
    """Returns None for every request, keeping its ctx and correlation id for later."""

    kept: dict[str, Any]
    deferred: threading.Event

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        Deferring.kept["ctx"] = ctx
        Deferring.kept["correlation_id"] = message.correlation_id
        Deferring.deferred.set()


@pytest.fixture(autouse=True)
def _reset() -> None:
    Deferring.kept = {}
    Deferring.deferred = threading.Event()


def _request_in_thread(runtime: Runtime, outcome: list[BaseException]) -> threading.Thread:
    def ask() -> None:
        try:
            runtime.bus.request("x", "d", "work", timeout=0.5)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome.append(exc)

    thread = threading.Thread(target=ask)
    thread.start()
    assert Deferring.deferred.wait(10)
    return thread


def test_a_deferred_request_whose_recipient_was_killed_names_the_kill(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"d": Deferring}) as runtime:
        runtime.spawn("d", behavior="d")
        outcome: list[BaseException] = []
        thread = _request_in_thread(runtime, outcome)
        runtime.kill("d")
        with pytest.raises(AgentNotFoundError):  # its own ctx cannot answer any more
            Deferring.kept["ctx"].reply(Deferring.kept["correlation_id"], "late")
        thread.join(10)
        assert not thread.is_alive()
        letters = [d for d in runtime.bus.dead_letters() if d.topic == "work"]

    assert len(outcome) == 1
    assert isinstance(outcome[0], IpcTimeoutError)
    assert "returned None" in str(outcome[0])
    assert "'d' was killed meanwhile" in str(outcome[0])
    assert [(d.reason, d.error) for d in letters] == [("timeout", str(outcome[0]))]


def test_a_deferred_request_whose_recipient_lives_does_not_mention_a_kill(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"d": Deferring}) as runtime:
        runtime.spawn("d", behavior="d")
        outcome: list[BaseException] = []
        thread = _request_in_thread(runtime, outcome)
        thread.join(10)
        assert not thread.is_alive()

    assert len(outcome) == 1
    assert isinstance(outcome[0], IpcTimeoutError)
    assert "returned None" in str(outcome[0])
    assert "killed" not in str(outcome[0])
