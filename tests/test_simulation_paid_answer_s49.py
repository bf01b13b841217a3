"""The simulation's researcher keeps a paid answer when its session ends mid-call (session 49).

``turn`` raises ``SessionNotFoundError`` with the answer as ``output`` when the session
ends while the model answers; the simulation puts that answer in a new session beside
its prompt instead of asking the model again (helper h5 found it paying twice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import cogfabric as cf
from cogfabric._simulation import _session_turn
from cogfabric.events import LlmOutputRecorded
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


def test_a_turn_whose_session_ends_while_the_model_answers_is_not_asked_twice(tmp_path: Path) -> None:
    calls: list[str] = []
    held: dict[str, Any] = {}

    def model(prompt: str) -> str:
        calls.append(prompt)
        if len(calls) == 1:
            held["rt"].memory.delete_session(held["session"])  # the session ends meanwhile
        return f"answer {len(calls)}"

    class Turn:
        def on_message(self, ctx: cf.AgentContext, message: object) -> str:  # noqa: ARG002
            ctx.set_private("session", held["session"])
            return _session_turn(ctx, "round 1")

    path = tmp_path / "j"
    with cf.Runtime.open(path, behaviors={"turn": Turn}, llm_provider=cf.ScriptedProvider(model)) as rt:
        held["rt"] = rt
        held["session"] = rt.memory.create_session("r", agent_id="r")
        rt.spawn("r", behavior="turn")
        rt.spawn("d")

        reply = rt.bus.request("d", "r", "tick", None, timeout=10)

        assert reply.payload == "answer 1"
        assert len(calls) == 1
        now = rt.agent("r").private("session")
        assert now != held["session"]
        assert [(m.role, m.content) for m in rt.memory.get_messages(now)] == [
            ("system", "New session started"),
            ("user", "round 1"),
            ("assistant", "answer 1"),
        ]

    with Journal.open(path, readonly=True) as journal:
        outputs = [r.event for r in journal.read() if isinstance(r.event, LlmOutputRecorded)]
    assert [(e.output, e.session) for e in outputs] == [("answer 1", held["session"])]
