"""Isolation of the three context layers against values changed in place (session 57, helper h6).

A recipient whose behavior changed a request's payload in place changed, in sync
durability, the requester's own record of it too: the ``closed`` (or ``timeout``) dead
letter its requester leaves then carried the recipient's data under the requester's name,
while the journal's request held the payload as sent (in batch durability the recipient
already had a copy of its own). The property below writes random nested values through
every public boundary, changes every copy it is given, and checks that no agent's layers
moved.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogfabric import CognitiveState, Runtime, RuntimeClosedError
from cogfabric.actors import AgentContext, Config, FakeClock, JournalConfig
from cogfabric.events import IpcDeadLettered, IpcMessage
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

WAIT = 10.0


class Keeper:
    """Writes its agent's secret into a request's payload, in place, and answers later (never)."""

    changed: ClassVar[threading.Event] = threading.Event()

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        message.payload["q"] = ctx.private("secret")
        Keeper.changed.set()


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_recipient_changing_a_request_in_place_leaves_its_requesters_letter_as_sent(
    tmp_path: Path, durability: str
) -> None:
    Keeper.changed = threading.Event()
    path = tmp_path / "j"
    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        rt = Runtime.open(path, config=config, clock=FakeClock(), behaviors={"keeper": Keeper})
        try:
            rt.spawn("b", behavior="keeper").set_private("secret", "B-SECRET")
            asked = pool.submit(rt.bus.request, "app", "b", "ask", {"q": "from-app"}, timeout=WAIT)
            assert Keeper.changed.wait(WAIT)
        finally:
            rt.close()  # fails the request still waiting for its reply: its "closed" letter
        with pytest.raises(RuntimeClosedError):
            asked.result(WAIT)
    (letter,) = rt.bus.dead_letters()
    with Journal.open(path, readonly=True) as journal:
        (journaled,) = [r.event for r in journal.read(stream="bus") if isinstance(r.event, IpcDeadLettered)]

    assert (letter.reason, letter.sender, letter.payload) == ("closed", "app", {"q": "from-app"})
    assert journaled.payload == {"q": "from-app"}


# ---------------------------------------------------------------- the property


class Box(msgspec.Struct):
    item: Any


leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=4)
    | st.binary(max_size=4)
    | st.binary(min_size=1, max_size=4).map(bytearray)
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        | st.builds(Box, inner)
    ),
    max_leaves=8,
)


def _exact(value: object) -> bytes:
    """``value`` as the layers keep it, compared type for type (``1 == True`` is not enough here)."""
    return msgspec.msgpack.encode(value)


def _kept(value: object) -> Any:
    """What a layer keeps of ``value``: its encoding decoded (tuples as lists, Structs as dicts)."""
    return msgspec.msgpack.decode(msgspec.msgpack.encode(value))


def _change(value: object) -> None:
    """Change everything of ``value`` that can change in place, at every level."""
    if isinstance(value, dict):
        for item in value.values():
            _change(item)
        value["\x00changed"] = "CHANGED"
    elif isinstance(value, list):
        for item in value:
            _change(item)
        value.append("CHANGED")
    elif isinstance(value, tuple):
        for item in value:
            _change(item)
    elif isinstance(value, Box):
        _change(value.item)
        value.item = "CHANGED"
    elif isinstance(value, bytearray):
        value[0] ^= 0xFF


def _change_view_values(mapping: Any) -> None:
    for item in mapping.values():
        _change(item)


class Taker:
    """Keeps a request's payload as its private ``got``, then changes every copy it can reach."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> object:
        ctx.set_private("got", message.payload)
        _change(message.payload)
        _change(ctx.private("got"))
        _change(ctx.task_context())
        view = ctx.context_view()
        _change_view_values(view.task_shared)
        _change_view_values(view.private)
        _change(ctx.cognitive_state().working_memory)
        return [message.payload]  # never None, which would defer the reply


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values, st.sampled_from(["sync", "batch"]))
def test_nested_values_one_agent_writes_never_move_nor_show_elsewhere(value: Any, durability: str) -> None:
    kept = _kept(value)
    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    with Runtime.open(None, config=config, clock=FakeClock(), behaviors={"taker": Taker}) as rt:
        a = rt.spawn("a", task_id="t")
        b = rt.spawn("b", task_id="t", behavior="taker")
        a.set_private("v", value)
        a.set_cognitive_state(CognitiveState(working_memory=value))
        rt.publish_task_context("t", {"v": value})
        _change(value)  # the caller's own value, after it crossed
        _change(a.private("v"))
        _change(a.task_context())
        _change(a.cognitive_state().working_memory)
        _change(a.checkpoint_cognitive().working_memory)
        for view in rt.context_views().values():
            _change_view_values(view.task_shared)
            _change_view_values(view.private)
        for state in rt.cognitive_states().values():
            _change(state.working_memory)
        payload = _kept(kept)
        reply = rt.bus.request("app", "b", "take", payload, timeout=WAIT)
        _change(payload)
        _change(reply.payload)
        rt.settle()

        views = rt.context_views()
        assert _exact(dict(views["a"].private)) == _exact({"v": kept})
        assert _exact(dict(views["a"].task_shared)) == _exact({"v": kept})
        assert _exact(a.cognitive_state().working_memory) == _exact(kept)
        assert _exact(dict(views["b"].task_shared)) == _exact({"v": kept})  # its own copy of the publication
        assert _exact(dict(views["b"].private)) == _exact({"got": kept})  # nothing of a's, nothing changed
        assert b.cognitive_state().working_memory is None
