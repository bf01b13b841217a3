"""A behavior whose ``on_message`` is ``async def`` (helper h4 of session 51).

The runtime calls ``on_message`` on its agent's thread and awaits nothing. An ``async``
one returned a coroutine that was dropped: each send and broadcast was delivered
(``IpcDelivered``) and did nothing, with no failure, no dead letter and only a
"never awaited" warning at garbage collection; a request failed on the coroutine as an
unencodable reply. A spawn now refuses such a behavior, a reopen leaves the agent
without it (logged), and a plain ``on_message`` that returns a coroutine fails its
message with ``TypeError``.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import FakeClock, InvalidSpawnSpecError, IpcHandlerError, Runtime

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage


class _Async:
    async def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        ctx.set_private("got", message.payload)


class _Plain:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:
        ctx.set_private("got", message.payload)
        return "plain"


class _ReturnsCoroutine:
    async def _handle(self, ctx: AgentContext, message: IpcMessage) -> None:
        ctx.set_private("got", message.payload)

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Coroutine[Any, Any, None]:
        return self._handle(ctx, message)


_SAID = r"has an async on_message: the runtime calls it on its agent's thread and would never await it"


@pytest.mark.parametrize("journaled", [False, True])
def test_a_spawn_refuses_an_async_on_message_before_anything_is_journaled(
    tmp_path: Path, journaled: bool
) -> None:
    behaviors: dict[str, Any] = {"notes": _Async}
    path = tmp_path / "j" if journaled else None
    with Runtime.open(path, clock=FakeClock(), behaviors=behaviors) as runtime:
        with pytest.raises(InvalidSpawnSpecError, match=rf"behavior 'notes' made a _Async, which {_SAID}"):
            runtime.spawn("a", behavior="notes")
        with pytest.raises(InvalidSpawnSpecError, match=rf"behavior _Async {_SAID}"):
            runtime.spawn("a", behavior=_Async())
        with pytest.raises(InvalidSpawnSpecError, match=_SAID):
            runtime.spawn_many([{"agent_id": "b"}, {"agent_id": "c", "behavior": "notes"}])
        assert runtime.agents() == []
        assert runtime._journal is None or runtime._journal.last_seq == 0
        runtime.spawn("a")  # the id is free


def test_a_reopen_whose_factory_now_makes_an_async_behavior_leaves_the_agent_without_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"notes": _Plain}) as runtime:
        runtime.spawn("a", behavior="notes")
    behaviors: dict[str, Any] = {"notes": _Async}
    with (
        caplog.at_level("WARNING", logger="cogfabric"),
        Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=behaviors) as runtime,
    ):
        assert not runtime.agent("a").has_behavior
        runtime.bus.send("d", "a", "note", 1)
        runtime.flush()
        assert [letter.reason for letter in runtime.bus.dead_letters()] == ["no behavior"]
    assert "agent 'a': behavior 'notes' made a _Async, which has an async on_message" in caplog.text


def test_a_coroutine_returned_by_a_plain_on_message_fails_its_message(tmp_path: Path) -> None:
    behaviors: dict[str, Any] = {"notes": _ReturnsCoroutine}
    with (
        warnings.catch_warnings(),
        Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=behaviors) as runtime,
    ):
        warnings.simplefilter("error")  # the coroutine is closed: no "never awaited" warning
        runtime.spawn("a", behavior="notes")
        runtime.bus.send("d", "a", "note", 1)  # was delivered and did nothing, silently
        said = r"_ReturnsCoroutine\.on_message returned a coroutine"
        with pytest.raises(IpcHandlerError, match=said) as caught:
            runtime.bus.request("d", "a", "note", 2, timeout=5)
        assert isinstance(caught.value.__cause__, TypeError)
        runtime.flush()
        assert runtime.agent("a").private("got") is None
        assert [letter.reason for letter in runtime.bus.dead_letters()] == ["handler error", "handler error"]
