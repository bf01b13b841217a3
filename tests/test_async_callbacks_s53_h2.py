"""User callbacks an asyncio application may write wrongly: refused early and by name.

A subclass of the ``Behavior`` protocol that defines no ``on_message`` of its own (a
misspelt one) inherits the protocol's stub, which returns None for every message: every
request to it waited out its timeout. An ``async`` provider, retriever or behavior
factory gave a coroutine that nothing awaits, and Python's "never awaited" warning.
"""

from __future__ import annotations

import gc
import logging
import warnings
from typing import TYPE_CHECKING

import pytest

import cogfabric as cf

if TYPE_CHECKING:
    from collections.abc import Iterator


class Answers(cf.Behavior):
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
        return {"by": ctx.agent_id}


class Misspelt(cf.Behavior):
    def on_mesage(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
        return "never called"


class AsyncProvider:
    async def generate(self, prompt: str, **params: object) -> str:  # noqa: ARG002
        return "answer"


class AsyncRetriever:
    async def retrieve(self, query: str) -> list[cf.Snippet]:  # noqa: ARG002
        return [cf.Snippet(source="s", content="context", score=0.9)]


async def make_answers() -> Answers:
    return Answers()


@pytest.fixture
def never_awaited() -> Iterator[list[warnings.WarningMessage]]:
    """The "coroutine ... was never awaited" warnings the test leaves behind."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def test_a_behavior_subclass_without_its_own_on_message_is_refused_at_spawn() -> None:
    with cf.Runtime.open(None, behaviors={"answers": Answers, "misspelt": Misspelt}) as rt:
        rt.spawn("a", behavior="answers")
        assert rt.bus.request("x", "a", "t", timeout=5).payload == {"by": "a"}
        for given in ("misspelt", Misspelt, Misspelt()):  # type: ignore[abstract] # mypy: the instance only
            with pytest.raises(cf.InvalidSpawnSpecError, match="no on_message"):
                rt.spawn("m", behavior=given)
        assert rt.agents() == ["a"]


def test_an_async_behavior_factory_is_refused_by_name(never_awaited: list[warnings.WarningMessage]) -> None:
    rt = cf.Runtime.open(None, behaviors={"answers": make_answers})  # type: ignore[dict-item]
    with rt, pytest.raises(cf.InvalidSpawnSpecError, match="factory is async"):
        rt.spawn("a", behavior="answers")
    gc.collect()
    assert not [w for w in never_awaited if "never awaited" in str(w.message)]


def test_an_async_provider_fails_each_call_by_name(never_awaited: list[warnings.WarningMessage]) -> None:
    rt = cf.Runtime.open(None, llm_provider=AsyncProvider())  # type: ignore[arg-type]
    with rt, pytest.raises(cf.ProviderError, match="generate is async"):
        rt.llm().generate("hello")
    gc.collect()
    assert not [w for w in never_awaited if "never awaited" in str(w.message)]


def test_an_async_retriever_is_left_out_by_name(
    never_awaited: list[warnings.WarningMessage], caplog: pytest.LogCaptureFixture
) -> None:
    with cf.Runtime.open(None) as rt:
        session = rt.memory.create_session("u")
        rt.memory.set_retrievers([AsyncRetriever()])  # type: ignore[list-item]
        with caplog.at_level(logging.WARNING, logger="cogfabric"):
            assert rt.memory.build_context("q", session).endswith("q")
    assert "retrieve is async" in caplog.text
    gc.collect()
    assert not [w for w in never_awaited if "never awaited" in str(w.message)]
