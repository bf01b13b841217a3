"""A plain ``on_message`` that returns an async generator fails its message (session 51).

A spawn refuses an ``async def`` (or async generator) ``on_message``; the agent's check of
what a plain one returns caught a coroutine only, so a behavior returning an async
generator still did nothing, silently: no failure, no dead letter, a request answered
with an unencodable reply (helper h7's review).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import FakeClock, IpcHandlerError, Runtime

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage


class _ReturnsAsyncGenerator:
    async def _steps(self, ctx: AgentContext, message: IpcMessage) -> AsyncGenerator[int, None]:
        ctx.set_private("got", message.payload)
        yield 1

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> AsyncGenerator[int, None]:
        return self._steps(ctx, message)


def test_an_async_generator_returned_by_a_plain_on_message_fails_its_message(tmp_path: Path) -> None:
    behaviors: dict[str, Any] = {"steps": _ReturnsAsyncGenerator}
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=behaviors) as runtime:
        runtime.spawn("a", behavior="steps")
        runtime.bus.send("d", "a", "note", 1)
        said = r"_ReturnsAsyncGenerator\.on_message returned an async generator: has an async on_message"
        with pytest.raises(IpcHandlerError, match=said) as caught:
            runtime.bus.request("d", "a", "note", 2, timeout=5)
        assert isinstance(caught.value.__cause__, TypeError)
        runtime.flush()
        assert runtime.agent("a").private("got") is None
        assert [letter.reason for letter in runtime.bus.dead_letters()] == ["handler error", "handler error"]
