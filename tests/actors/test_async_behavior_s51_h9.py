"""An ``async def on_message`` that yields (an async generator function) is refused as a coroutine one is.

Helper h9's mutation round of session 51: the spawn check was kept with only
``inspect.iscoroutinefunction``, and every test still passed; such a behavior was then
spawned, and each of its messages failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import FakeClock, InvalidSpawnSpecError, Runtime

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage


class _AsyncGenerator:
    async def on_message(self, ctx: AgentContext, message: IpcMessage) -> AsyncIterator[None]:
        ctx.set_private("got", message.payload)
        yield


_SAID = r"has an async on_message: the runtime calls it on its agent's thread and would never await it"


def test_a_spawn_refuses_an_async_generator_on_message_given_or_made(tmp_path: Path) -> None:
    behaviors: dict[str, Any] = {"notes": _AsyncGenerator}
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=behaviors) as runtime:
        with pytest.raises(InvalidSpawnSpecError, match=rf"behavior _AsyncGenerator {_SAID}"):
            runtime.spawn("a", behavior=_AsyncGenerator())
        with pytest.raises(
            InvalidSpawnSpecError, match=rf"behavior 'notes' made a _AsyncGenerator, which {_SAID}"
        ):
            runtime.spawn("a", behavior="notes")
        assert runtime.agents() == []
