"""What a behavior returns is checked for a coroutine by identity, never hashed (helper h8).

The check of a coroutine or an async generator looked ``type(result)`` up in a set: a
result whose class is unhashable (its metaclass defines ``__eq__`` alone, as a
value-like class's may) failed its message with "unhashable type", though a told
message's result is never used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cogfabric.actors import FakeClock, Runtime

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage


class _ByValue(type):  # noqa: PLW1641 - unhashable is the point
    def __eq__(cls, other: object) -> bool:  # and so no __hash__: its classes are unhashable
        return cls is other


class _Outcome(metaclass=_ByValue):
    pass


class _ReturnsAnOutcome:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> _Outcome | str:
        if message.topic == "ping":
            return "pong"
        ctx.set_private("got", message.payload)
        return _Outcome()


def test_a_result_of_an_unhashable_class_fails_no_told_message(tmp_path: Path) -> None:
    behaviors: dict[str, Any] = {"outcome": _ReturnsAnOutcome}
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=behaviors) as runtime:
        runtime.spawn("a", behavior="outcome")
        runtime.bus.send("d", "a", "note", 1)
        assert runtime.bus.request("d", "a", "ping", None, timeout=5).payload == "pong"  # after the note
        runtime.flush()

        assert runtime.agent("a").private("got") == 1
        assert runtime.bus.dead_letters() == []
