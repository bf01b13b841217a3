"""``ctx.last_checkpoint()``: a behavior reads its agent's latest checkpoint back from the journal."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric import CognitiveState

if TYPE_CHECKING:
    from pathlib import Path


class _Checkpoints:
    """``save``: set and checkpoint a decision; ``spoil``: change it, then raise;
    ``restore``: go back to the last checkpoint; ``show``: the decision now."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> Any:
        if message.topic == "save":
            ctx.set_cognitive_state(CognitiveState(decision=message.payload))
            ctx.checkpoint_cognitive()
            last = ctx.last_checkpoint()  # taken in this very message, batch durability too
            return None if last is None else last.decision
        if message.topic == "spoil":
            ctx.set_cognitive_state(CognitiveState(decision="spoiled"))
            ctx.flush()
            msg = "the behavior fails after spoiling its state"
            raise RuntimeError(msg)
        if message.topic == "restore":
            last = ctx.last_checkpoint()
            if last is None:
                return "none"
            ctx.set_cognitive_state(last)
        return ctx.cognitive_state().decision


def _ask(rt: cf.Runtime, topic: str, payload: object = None) -> Any:
    return rt.bus.request("driver", "a", topic, payload, 30).payload


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_restarted_behavior_goes_back_to_the_checkpoint_an_earlier_instance_took(
    tmp_path: Path, durability: str
) -> None:
    path = tmp_path / "j"
    config = {"journal": {"durability": durability}}
    with cf.Runtime.open(path, config=config, behaviors={"cp": _Checkpoints}) as rt:
        rt.spawn("a", behavior="cp")
        assert _ask(rt, "restore") == "none"
        assert _ask(rt, "save", "plan A") == "plan A"
        with pytest.raises(cf.IpcHandlerError):
            _ask(rt, "spoil")  # the agent is restarted from the journal, a fresh behavior
        assert _ask(rt, "show") == "spoiled"
        assert _ask(rt, "restore") == "plan A"

    with cf.Runtime.open(path, config=config, behaviors={"cp": _Checkpoints}) as rt:
        assert _ask(rt, "show") == "plan A"
        assert _ask(rt, "save", "plan B") == "plan B"
        rt.agent("a").set_cognitive_state(CognitiveState(decision="changed from outside"))
        assert _ask(rt, "restore") == "plan B"


def test_a_behavior_without_a_journal_is_told_it_cannot_look_up_a_checkpoint() -> None:
    with cf.Runtime.open(None, behaviors={"cp": _Checkpoints}) as rt:
        rt.spawn("a", behavior="cp")
        with pytest.raises(cf.IpcHandlerError) as failed:
            _ask(rt, "restore")
        assert isinstance(failed.value.__cause__, cf.AgentCheckpointNotSupportedError)
