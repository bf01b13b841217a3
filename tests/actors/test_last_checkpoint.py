"""``Runtime.last_checkpoint``: an agent's latest journaled checkpoint, read back, also after a crash."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

import cogfabric as cf
from cogfabric import CognitiveState

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(params=["sync", "batch"])
def durability(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _config(durability: str) -> dict[str, Any]:
    return {"journal": {"durability": durability}}


def test_the_latest_checkpoint_is_read_back_a_copy_whatever_came_after(
    tmp_path: Path, durability: str
) -> None:
    with cf.Runtime.open(tmp_path / "j", config=_config(durability)) as rt:
        agent = rt.spawn("a")
        assert rt.last_checkpoint("a") is None  # none taken yet

        agent.set_cognitive_state(CognitiveState(context={"step": 1}))
        agent.checkpoint_cognitive()
        agent.set_cognitive_state(CognitiveState(context={"step": 2}, working_memory=[{"note": "x"}]))
        taken = agent.checkpoint_cognitive()  # found at once, without a flush, in batch too
        agent.set_cognitive_state(CognitiveState(context={"step": 3}))

        got = rt.last_checkpoint("a")
        assert got == taken
        assert got is not None
        got.working_memory[0]["note"] = "changed"  # a copy: neither the journal nor the agent changes
        assert rt.last_checkpoint("a") == taken
        assert agent.cognitive_state().context == {"step": 3}


def test_checkpoint_kill_reopen_and_recover_another_agent_from_it(tmp_path: Path, durability: str) -> None:
    # the original's checkpoint-resume test (spec section 2), with a restart in the middle
    path = tmp_path / "j"
    state = CognitiveState(context={"goal": "g"}, decision="d", working_memory=[{"k": 1}])
    with cf.Runtime.open(path, config=_config(durability)) as rt:
        first = rt.spawn("a1")
        first.set_cognitive_state(state)
        first.checkpoint_cognitive()
        rt.kill("a1")

    with cf.Runtime.open(path, config=_config(durability)) as rt:
        assert "a1" not in rt.agents()
        checkpoint = rt.last_checkpoint("a1")
        # journaled as set: version 0 upgraded to the current one
        assert checkpoint == msgspec.structs.replace(state, schema_version=cf.COGNITIVE_STATE_SCHEMA_VERSION)
        second = rt.spawn("a2")
        assert checkpoint is not None
        rt.recover("a2", checkpoint)
        resumed = second.cognitive_state()
        assert (resumed.context, resumed.decision, resumed.working_memory) == (
            {"goal": "g"},
            "d",
            [{"k": 1}],
        )


def test_an_id_killed_and_spawned_again_reads_its_latest_checkpoint_of_either_life(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j") as rt:
        rt.spawn("a").set_cognitive_state(CognitiveState(decision="first life"))
        rt.agent("a").checkpoint_cognitive()
        rt.kill("a")
        again = rt.spawn("a")
        last = rt.last_checkpoint("a")
        assert last is not None
        assert last.decision == "first life"

        again.set_cognitive_state(CognitiveState(decision="second life"))
        again.checkpoint_cognitive()
        last = rt.last_checkpoint("a")
        assert last is not None
        assert last.decision == "second life"


def test_a_behavior_reads_the_checkpoint_it_just_took(tmp_path: Path) -> None:
    # batch durability: the behavior's changes wait for its message's end, unless handed over
    seen: dict[str, Any] = {}
    done = threading.Event()
    runtime: list[cf.Runtime] = []

    class Checkpoints:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
            try:
                ctx.set_cognitive_state(CognitiveState(observation="seen"))
                seen["taken"] = ctx.checkpoint_cognitive()
                seen["read"] = runtime[0].last_checkpoint(ctx.agent_id)
            finally:
                done.set()

    with cf.Runtime.open(tmp_path / "j", config=_config("batch"), behaviors={"cp": Checkpoints}) as rt:
        runtime.append(rt)
        rt.spawn("a", behavior="cp")
        rt.bus.send("driver", "a", "go", None)
        assert done.wait(30)
    assert seen["read"] == seen["taken"]
    assert seen["read"].observation == "seen"


def test_lookups_that_cannot_answer_say_why(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j") as rt:
        rt.spawn("a")
        with pytest.raises(cf.AgentNotFoundError):
            rt.last_checkpoint("nobody")  # the journal holds no record of it
        with pytest.raises(cf.AgentNotFoundError):
            rt.last_checkpoint("a\0b")  # an id no agent can have
        with pytest.raises(cf.AgentNotFoundError):
            rt.last_checkpoint("x" * 300)
        with pytest.raises(cf.InvalidTextError):
            rt.last_checkpoint(5)  # type: ignore[arg-type]
    with pytest.raises(cf.RuntimeClosedError):
        rt.last_checkpoint("a")
    with cf.Runtime.open(None) as memory_only, pytest.raises(cf.AgentCheckpointNotSupportedError):
        memory_only.last_checkpoint("a")


def test_a_fail_stop_journal_still_answers_from_what_it_holds(tmp_path: Path) -> None:
    config = {"journal": {"map_size": 140 << 10, "max_map_size": 140 << 10}}
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config=config) as rt:
        agent = rt.spawn("a")
        agent.set_cognitive_state(CognitiveState(decision="kept"))
        agent.checkpoint_cognitive()
        with pytest.raises(cf.JournalError):
            agent.set_private("big", "z" * 200_000)  # no commit can hold it: fail-stop
        last = rt.last_checkpoint("a")
        assert last is not None
        assert last.decision == "kept"
