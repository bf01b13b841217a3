"""Review of session 60's commits (helper h7): a gap in the tests and a misleading error it found.

A message the runtime puts in an agent's mailbox must carry its own kind (``_Kind``): since
7c37450 an agent ignores any other (a host's ``pykka.ActorRegistry.broadcast``) and an ask of
it gets None, so a runtime message built with a plain ``int`` would be dropped unseen: a call
answered None at once, a flush returning before a busy agent handed its changes over, a
publication never applied.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

import pykka
import pytest

import cogfabric as cf
from cogfabric.actors._agent import AgentActor
from tests.test_pykka_neighbours_s60_h5 import OUTSIDE

if TYPE_CHECKING:
    from pathlib import Path

WAIT = 10.0


class _Worker:
    """Notes what it gets; ``hold`` waits for the test's gate (bounded), as a slow behavior."""

    gate = threading.Event()

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        if message.topic == "hold":
            assert self.gate.wait(WAIT)
        ctx.set_private(message.topic, message.payload)
        return message.payload


def _noting_asks(monkeypatch: pytest.MonkeyPatch, names: Counter[str]) -> threading.Event:
    """Set once runtime calls have asked agents each operation of ``names`` as often (``_ask_current``)."""
    ask_current = cf.Runtime._ask_current
    seen: Counter[str] = Counter()
    done = threading.Event()

    def noted(self: cf.Runtime, agent_id: str, entry: Any, message: tuple[Any, ...], **kwargs: Any) -> Any:
        future = ask_current(self, agent_id, entry, message, **kwargs)
        seen[message[1]] += 1
        if not names - seen:
            done.set()
        return future

    monkeypatch.setattr(cf.Runtime, "_ask_current", noted)
    return done


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_every_message_the_runtime_puts_in_a_mailbox_is_one_its_agents_take(
    durability: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ignored: list[object] = []
    monkeypatch.setattr(AgentActor, "_not_ours", lambda _self, message: ignored.append(message))
    monkeypatch.setattr(_Worker, "gate", threading.Event())
    config = {"journal": {"durability": durability}}
    with cf.Runtime.open(tmp_path / "j", behaviors={"w": _Worker}, config=config) as rt:
        agents = [rt.spawn(agent_id, task_id="t1", behavior="w") for agent_id in ("a", "b", "c")]
        for agent in agents:
            rt.bus.subscribe(agent.id, "news")  # a call
        assert rt.bus.broadcast("app", "news", 1) == 3  # idle agents: paced (FanOut)
        rt.bus.send("app", "b", "sent", 2)  # a message
        assert rt.bus.request("app", "c", "asked", 3, timeout=WAIT).payload == 3
        assert rt.publish_task_context("t1", {"phase": "two"}) == ["a", "b", "c"]  # a publication
        rt.suspend("b")  # lifecycle calls
        rt.resume("b")
        # A busy agent: what reaches it is not paced (FanOut), and reads of it (and, in batch
        # durability, a flush's hand-over) are asked of it, answered once it is free.
        reads = Counter({"context_view": 2, "noop": 1 if durability == "batch" else 0})
        asked = _noting_asks(monkeypatch, reads)
        rt.bus.send("app", "a", "hold", 4)
        assert rt.bus.broadcast("app", "news", 5) == 3
        assert rt.publish_task_context("t1", {"phase": "three"}) == ["a", "b", "c"]
        answers: dict[str, Any] = {}
        threads = [
            threading.Thread(target=lambda: answers.update(view=agents[0].context_view()), daemon=True),
            threading.Thread(target=lambda: answers.update(views=rt.context_views(["a"])), daemon=True),
            threading.Thread(target=rt.flush, daemon=True),
        ]
        for thread in threads:
            thread.start()
        assert asked.wait(WAIT)  # all in its mailbox, behind the message in hand
        _Worker.gate.set()
        for thread in threads:
            thread.join(WAIT)
            assert not thread.is_alive()
        assert agents[0].private("hold") == 4
        rt.settle(WAIT)
        assert ignored == []
        assert answers["view"].task_shared == answers["views"]["a"].task_shared == {"phase": "three"}
        for agent in agents:
            assert agent.context_view().task_shared == {"phase": "three"}
            assert agent.private("news") == 5
        assert rt.stats().in_flight == 0


class _Echo:
    def on_message(self, _ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        return message.payload


def test_a_message_to_an_agent_a_host_stopped_says_who_stopped_it_on_a_memory_only_runtime() -> None:
    # 7c37450 made calls after a host's stop_all() say so; on a journaled runtime a send or
    # a request says it too (the stopped journal writer refuses it first). On a memory-only
    # runtime there is no writer: a request raised "agent not registered: 'a'" for an agent
    # rt.agents() lists, and a send was dead-lettered so, returning as if delivered.
    with cf.Runtime.open(None, behaviors={"echo": _Echo}) as rt:
        rt.spawn("a", behavior="echo")
        assert rt.bus.request("app", "a", "t", 1, timeout=WAIT).payload == 1
        pykka.ActorRegistry.stop_all(block=True, timeout=WAIT)
        with pytest.raises(cf.RuntimeClosedError, match=rf"agent 'a''s actor was {OUTSIDE}"):
            rt.bus.request("app", "a", "t", 2, timeout=WAIT)
        with pytest.raises(cf.RuntimeClosedError, match=rf"agent 'a''s actor was {OUTSIDE}"):
            rt.bus.send("app", "a", "t", 3)
        assert rt.agents() == ["a"]
        letters = rt.bus.dead_letters()
        assert [letter.reason for letter in letters] == ["closed", "closed"]
        assert all(re.search(OUTSIDE, letter.error) for letter in letters)
        assert rt.stats().in_flight == 0
