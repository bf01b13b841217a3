"""The model test's ``ipc`` rule waits until what it sent is handled, before ``retire``.

``Runtime.flush`` waits for the messages in the mailboxes when it asks the agents, not
for those their behaviors send on: a "fwd" to a1 sends a note on to a0, which reaches a0
after flush asked it (in sync durability the writer delivers it after its commit), so
after one flush a0 may still be handling it, and ``retire("a0")`` raised
``AgentRunningError`` (a CI flake of ``test_runtime_against_model``). A behavior's
failure and the restart that follows are part of its message, which flush waits for.

These drive the model's own rules, in the order of that failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import CognitiveState

from . import test_runtime_model as model

if TYPE_CHECKING:
    from collections.abc import Iterator

ROUNDS = 20


class _Drawn:
    """A ``st.data()`` stand-in that hands out given values, in order."""

    def __init__(self, *values: object) -> None:
        self.values = list(values)

    def draw(self, strategy: object, label: str | None = None) -> Any:  # noqa: ARG002 - the value is given
        return self.values.pop(0)


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Iterator[model.RuntimeModel]:
    """The model machine, outside hypothesis: its notes and events go nowhere."""
    monkeypatch.setattr(model, "note", lambda *_: None)
    monkeypatch.setattr(model, "event", lambda *_: None)
    m = model.RuntimeModel()
    try:
        yield m
    finally:
        m.teardown()  # compares everything observable with the model and audits the journal


def _start(m: model.RuntimeModel, durability: str) -> None:
    m.start(
        durability=durability,
        snapshot_interval=200,
        population=[(None, "echo", None), (None, "echo", None)],
        sessions=[],
    )


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_forwarded_note_is_handled_before_the_next_step(
    machine: model.RuntimeModel, durability: str
) -> None:
    """Failed before the model's second flush: a0 still RUNNING the note (sync: 34 of 40)."""
    _start(machine, durability)
    for i in range(ROUNDS):
        machine.ipc(sender="ext", to="a1", topic="fwd", method="send", data=_Drawn("a0", i))
        machine.recover(agent_id="a0", data=_Drawn(CognitiveState()))
    machine.lifecycle(agent_id="a0", op="retire")


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_failure_and_its_restart_are_over_after_one_flush(
    machine: model.RuntimeModel, durability: str
) -> None:
    """a0's behavior raises on a "fwd" to an id no agent has; it restarts from the journal."""
    _start(machine, durability)
    for i in range(ROUNDS):
        machine.ipc(sender="ext", to="a0", topic="fwd", method="send", data=_Drawn("a2", i))
        machine.ipc(sender="ext", to="a0", topic="boom", method="send", data=_Drawn(i))
        machine.recover(agent_id="a0", data=_Drawn(CognitiveState()))
    machine.lifecycle(agent_id="a0", op="retire")
