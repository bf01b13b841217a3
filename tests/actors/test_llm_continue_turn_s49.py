"""``continue_turn``: a tool loop's later model calls, journaled naming their session (session 49).

After ``turn``, a tool loop adds the tool's result to the session and asks the model
again. A bare ``generate`` journals its output with no session; ``continue_turn``
names it, renders the session's window as it is, adds no user message, and puts the
answer in the session in the turn of its last message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric.actors import (
    FakeClock,
    Runtime,
    RuntimeClosedError,
    ScriptedProvider,
    SessionNotFoundError,
)
from cogfabric.events import LlmOutputRecorded, Message, ToolCall, ToolCallFunction

from .test_llm_pins import _events

if TYPE_CHECKING:
    from pathlib import Path

_CALL = ToolCall(id="call_1", function=ToolCallFunction(name="search", arguments='{"q": "x"}'))


@pytest.mark.parametrize("tagged", [False, True], ids=["untagged", "turn ids"])
def test_a_tool_loop_continues_its_turn_and_names_the_session(tmp_path: Path, *, tagged: bool) -> None:
    prompts: list[str] = []

    def model(prompt: str) -> str:
        prompts.append(prompt)
        return ["call search", "X is 42"][len(prompts) - 1]

    with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=ScriptedProvider(model)) as rt:
        session = rt.memory.create_session("u")
        if tagged:
            rt.memory.add_structured_message(session, Message(role="user", content="earlier", turn_id="t0"))
        llm = rt.llm()
        assert llm.turn(session, "find X") == "call search"
        turn_id = rt.memory.get_messages(session)[-1].turn_id
        assert bool(turn_id) is tagged
        rt.memory.add_structured_message(
            session, Message(role="assistant", content="", tool_calls=[_CALL], turn_id=turn_id)
        )
        rt.memory.add_structured_message(
            session, Message(role="tool_result", content="X: 42", tool_call_id="call_1", turn_id=turn_id)
        )

        assert llm.continue_turn(session) == "X is 42"

        messages = rt.memory.get_messages(session)
        assert [m.role for m in messages].count("user") == 1 + tagged  # no user message added
        assert (messages[-1].role, messages[-1].content, messages[-1].turn_id) == (
            "assistant",
            "X is 42",
            turn_id,
        )
        assert prompts[1].endswith(
            "user: find X\nassistant: call search\n"
            'assistant tool call call_1: search({"q": "x"})\ntool_result for call_1: X: 42'
        )

    outputs = [e for e in _events(tmp_path / "j") if isinstance(e, LlmOutputRecorded)]
    assert [(e.output, e.session) for e in outputs] == [("call search", session), ("X is 42", session)]


def test_continue_turn_on_an_unknown_session_calls_no_provider(tmp_path: Path) -> None:
    provider = ScriptedProvider(["never"])
    with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as rt:
        with pytest.raises(SessionNotFoundError) as caught:
            rt.llm().continue_turn("no-such-session")
        assert caught.value.output is None
    assert provider.calls == []


def test_continue_turn_whose_session_ends_meanwhile_carries_the_answer(tmp_path: Path) -> None:
    held: dict[str, object] = {}

    def model(prompt: str) -> str:  # noqa: ARG001
        held["rt"].memory.delete_session(held["session"])  # type: ignore[attr-defined]
        return "the paid answer"

    with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=ScriptedProvider(model)) as rt:
        held["rt"] = rt
        held["session"] = session = rt.memory.create_session("u")
        rt.memory.add_message(session, "user", "hello")
        with pytest.raises(SessionNotFoundError) as caught:
            rt.llm().continue_turn(session)
        assert caught.value.output == "the paid answer"


def test_continue_turn_after_close_raises_before_the_provider(tmp_path: Path) -> None:
    provider = ScriptedProvider(["never"])
    rt = Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider)
    session = rt.memory.create_session("u")
    llm = rt.llm()
    rt.close()
    with pytest.raises(RuntimeClosedError):
        llm.continue_turn(session)
    assert provider.calls == []


def test_continue_turn_passes_its_parameters_to_the_provider(tmp_path: Path) -> None:
    seen: list[dict[str, object]] = []

    class Provider:
        name = "p"

        def generate(self, prompt: str, **params: object) -> str:  # noqa: ARG002
            seen.append(params)
            return "ok"

    with Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=Provider()) as rt:
        session = rt.memory.create_session("u")
        rt.memory.add_message(session, "user", "hello")
        assert rt.llm().continue_turn(session, temperature=0.2) == "ok"
    assert seen == [{"temperature": 0.2}]
