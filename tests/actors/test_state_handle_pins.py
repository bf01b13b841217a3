"""Promises of ``actors/_state.py`` and ``actors/_handle.py`` a second mutation test found no test held.

Each test names the docstring it holds and the mutant it was seen failing under
(hand-made mutants, one at a time, against the tests that use the two modules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import Runtime

if TYPE_CHECKING:
    from pathlib import Path


def test_a_publication_replaces_the_task_layer_of_a_suspended_and_a_retired_agent(tmp_path: Path) -> None:
    # publish_task_context replaces the task layer "of every live agent of task_id", and a
    # suspended or retired agent is live (not killed): it is listed, applies it, and replay
    # gives it the same layer (apply_event). Kills: apply_event passing over a publication
    # to a retired agent, live and in replay alike, while the runtime still lists it.
    path = tmp_path / "j"
    with Runtime.open(path) as rt:
        for agent_id in ("idle", "paused", "done"):
            rt.spawn(agent_id, task_id="t", task_context={"goal": "old"})
        rt.suspend("paused")
        rt.retire("done")
        assert sorted(rt.publish_task_context("t", {"goal": "new"})) == ["done", "idle", "paused"]
        rt.flush()
        live = {agent_id: rt.agent(agent_id).task_context() for agent_id in ("idle", "paused", "done")}
    assert live == {agent_id: {"goal": "new"} for agent_id in ("idle", "paused", "done")}
    with Runtime.open(path) as rt:
        assert {agent_id: rt.agent(agent_id).task_context() for agent_id in live} == live


@pytest.mark.parametrize("falsy", [0, "", [], False])
def test_set_task_context_refuses_a_falsy_value_that_is_no_mapping(falsy: Any) -> None:
    # Agent.set_task_context takes a mapping, or None for an empty layer: any other value
    # is refused as not encodable as a mapping (a TypeError), falsy or not, and leaves the
    # layer as it was. Kills: the handle reading every falsy value as None (`mapping or {}`).
    with Runtime.open() as rt:
        agent = rt.spawn("a", task_context={"goal": "g"})
        with pytest.raises(TypeError, match="expected a mapping"):
            agent.set_task_context(falsy)
        assert agent.task_context() == {"goal": "g"}
        agent.set_task_context(None)
        assert agent.task_context() == {}
