"""An agent application's session turns and tool-call answers (helper h3, session 49).

A turn's answer is journaled and paid for before it goes into the session: when the
session ends while the provider answers (its TTL passes during a long call, another
thread deletes it, new sessions evict it), ``SessionNotFoundError`` carries the answer
(``output``) rather than lose it. An OpenAI-compatible server that answers with tool
calls alone gets a ``ProviderError`` that says so.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from cogfabric.actors import (
    FakeClock,
    LLMConfig,
    OpenAICompatibleProvider,
    ProviderError,
    Runtime,
    ScriptedProvider,
    SessionNotFoundError,
)
from cogfabric.events import LlmOutputRecorded

from .test_llm_pins import (
    _Answers,
    _events,
    server,  # noqa: F401 - the fixture, for the test that names it
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


class _Meanwhile:
    """A provider that runs ``meanwhile`` (what another thread does during the call), then answers."""

    meanwhile: ClassVar[Callable[[], object]]

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        _Meanwhile.meanwhile()
        return "the paid answer"


@pytest.mark.parametrize("how", ["expired", "deleted", "evicted"])
def test_a_turn_whose_session_ends_while_the_model_answers_raises_with_the_answer(
    tmp_path: Path, how: str
) -> None:
    clock = FakeClock()
    config = {"memory": {"max_sessions": 1, "session_ttl": 60.0}}
    with Runtime.open(tmp_path / "j", clock=clock, config=config, llm_provider=_Meanwhile()) as rt:
        session = rt.memory.create_session("u")
        _Meanwhile.meanwhile = {
            "expired": lambda: clock.advance(61),
            "deleted": lambda: rt.memory.delete_session(session),
            "evicted": lambda: rt.memory.create_session("another user"),
        }[how]

        with pytest.raises(SessionNotFoundError) as caught:
            rt.llm().turn(session, "hello")

        assert caught.value.session_id == session
        assert caught.value.output == "the paid answer"
        assert copy.copy(caught.value).output == "the paid answer"  # as an error is copied (__reduce__)

    outputs = [e for e in _events(tmp_path / "j") if isinstance(e, LlmOutputRecorded)]
    assert [(e.output, e.session) for e in outputs] == [("the paid answer", session)]


def test_a_session_not_found_before_the_provider_has_no_output(tmp_path: Path) -> None:
    provider = ScriptedProvider(["never"])
    with (
        Runtime.open(tmp_path / "j", clock=FakeClock(), llm_provider=provider) as rt,
        pytest.raises(SessionNotFoundError) as caught,
    ):
        rt.llm().turn("no-such-session", "hello")

    assert caught.value.output is None
    assert provider.calls == []


def test_an_answer_of_tool_calls_alone_is_a_provider_error_that_says_so(server: str) -> None:  # noqa: F811
    call = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
    answer = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}
    _Answers.answers["find x"] = (200, None, json.dumps(answer).encode())
    provider = OpenAICompatibleProvider(LLMConfig(model="m", base_url=server, timeout=5))

    with pytest.raises(ProviderError, match=r"not text but 1 tool call: a provider returns text only$"):
        provider.generate("find x", tools=[{"type": "function", "function": {"name": "search"}}])
