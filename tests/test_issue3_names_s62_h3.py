"""The agent fabric's calls by the names issue 3 gives them (session 62, helper h3).

The issue lists each call with its parameters: ``Runtime.open(path=None, *, config=None,
clock=None, behaviors=None, allow_unverified=False, verify="full")``, ``runtime.spawn(agent_id=None,
*, task_id=None, ...)``, the bus's ``send(frm, to, topic, payload)`` and the rest. A caller may
pass any of them by that name, so the names are pinned here by calls that use them, as keywords,
and by the keyword-only markers where the issue puts them.
"""

from __future__ import annotations

import inspect
import threading
from typing import TYPE_CHECKING, Any

import cogfabric as cf

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

WAIT = 10.0


def test_runtime_open_takes_the_path_first_and_the_rest_by_keyword_with_the_issues_defaults() -> None:
    parameters = inspect.signature(cf.Runtime.open).parameters
    assert parameters["path"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert parameters["path"].default is None
    expected = {"config": None, "clock": None, "behaviors": None, "allow_unverified": False, "verify": "full"}
    assert list(parameters)[1:6] == list(expected)
    for name, default in expected.items():
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert parameters[name].default == default, name


def test_spawn_takes_the_agent_id_first_and_the_rest_by_keyword_with_the_issues_defaults() -> None:
    parameters = inspect.signature(cf.Runtime.spawn).parameters
    assert parameters["agent_id"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert parameters["agent_id"].default is None
    expected: dict[str, Any] = {
        "task_id": None,
        "task_context": None,
        "parent": None,
        "capabilities": (),
        "priority": 0.0,
        "experience_prior": None,
        "behavior": None,
    }
    assert [name for name in parameters if name not in ("self", "agent_id")] == list(expected)
    for name, default in expected.items():
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert parameters[name].default == default, name


class _Answers:
    """Answers a request with what it got; a request on ``later`` is answered from another thread."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> Any:
        if message.topic == "later":
            correlation_id = message.correlation_id
            threading.Thread(target=lambda: ctx.reply(correlation_id=correlation_id, payload="later")).start()
            return None
        return {"topic": message.topic, "payload": message.payload, "sender": message.sender}


class _Acts:
    """Acts through its ``ctx`` by the issue's names: send, request, broadcast."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> Any:  # noqa: ARG002
        ctx.send(to="b", topic="note", payload=1)
        answer = ctx.request(to="b", topic="ask", payload=2, timeout=WAIT)
        delivered = ctx.broadcast(topic="news", payload=3)
        ctx.set_private(key="seen", value=answer.payload["payload"])
        return delivered


def test_every_call_of_the_issue_takes_its_parameters_by_their_names(tmp_path: Path) -> None:
    behaviors: dict[str, Callable[[], cf.Behavior]] = {"answers": _Answers, "acts": _Acts}
    with cf.Runtime.open(path=tmp_path / "j", config=None, clock=cf.FakeClock(), behaviors=behaviors) as rt:
        a = rt.spawn(agent_id="a", task_id="t", task_context={"goal": "g"}, capabilities=["c"], priority=1.0)
        rt.spawn(agent_id="b", task_id="t", parent="a", behavior="answers", experience_prior={"p": 1})
        rt.spawn(agent_id="c", behavior="acts")

        a.set_private(key="k", value=[1])
        assert a.private(key="k") == [1]
        a.set_task_context(mapping={"goal": "h"})
        a.set_cognitive_state(state=cf.CognitiveState(decision="d"))
        assert rt.publish_task_context(task_id="t", mapping={"goal": "i"}) == ["a", "b"]
        assert a.task_context() == {"goal": "i"}
        assert (a.id, a.lifecycle, a.parent, a.task_id) == ("a", cf.AgentState.IDLE, None, "t")
        assert rt.agent(agent_id="b").parent == "a"
        assert rt.children(agent_id="a") == ["b"]

        rt.bus.subscribe(agent_id="b", topic="news")
        sent = rt.bus.send(frm="a", to="b", topic="note", payload={"x": 1})
        assert (sent.sender, sent.recipient, sent.topic, sent.payload) == ("a", "b", "note", {"x": 1})
        reply = rt.bus.request(frm="a", to="b", topic="ask", payload=5, timeout=WAIT)
        assert (reply.sender, reply.recipient, reply.topic) == ("b", "a", "reply")
        assert reply.payload == {"topic": "ask", "payload": 5, "sender": "a"}
        assert rt.bus.request(frm="a", to="b", topic="later", payload=None, timeout=WAIT).payload == "later"
        rt.bus.reply(correlation_id="no-such-request-corr", payload=1)  # dropped, as the original's
        delegated = rt.bus.delegate(frm="boss", to="b", topic="job", payload=6, timeout=WAIT)
        assert delegated.payload["sender"] == "boss"
        handed = rt.bus.handoff(frm="a", to="b", task_id="t2", snapshot={"s": 1}, timeout=WAIT)
        assert handed.payload["topic"] == "handoff-task"
        assert handed.payload["payload"] == {"task_id": "t2", "context": {"s": 1}, "artifacts": []}
        assert rt.bus.broadcast(frm="a", topic="news", payload=7) == 1

        assert rt.bus.request(frm="app", to="c", topic="go", payload=None, timeout=WAIT).payload == 1
        assert rt.agent("c").private("seen") == 2
        rt.bus.unsubscribe(agent_id="b", topic="news")
        assert rt.bus.broadcast(frm="a", topic="news", payload=8) == 0

        rt.suspend(agent_id="b")
        rt.recover(agent_id="b", state=cf.CognitiveState(context="back"))
        assert rt.agent("b").lifecycle == cf.AgentState.IDLE
        rt.suspend(agent_id="b")
        rt.resume(agent_id="b")
        rt.retire(agent_id="b")
        rt.kill(agent_id="b")
        assert rt.agents() == ["a", "c"]
        rt.settle(WAIT)
        assert rt.bus.dead_letters() == []
