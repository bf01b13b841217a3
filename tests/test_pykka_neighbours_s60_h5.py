"""A host application that runs its own Pykka actors beside an embedded runtime.

Pykka's registry is one per process: ``pykka.ActorRegistry.broadcast`` reaches the
runtime's agents, journal writer and session actor too, and ``stop_all`` stops them.
A message the runtime did not send is ignored (it stopped every agent before, and a
NumPy-like one the writer), and a call after ``stop_all`` says who stopped the runtime's
actors (it said the agent was not found before, and the session calls that the runtime
was closed).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import TYPE_CHECKING, Any

import pykka
import pytest

import cogfabric as cf
from cogfabric.actors._agent import AgentActor
from cogfabric.actors._memory import SessionActor
from cogfabric.actors._writer import JournalWriterActor

if TYPE_CHECKING:
    from pathlib import Path

WAIT = 10.0
OUTSIDE = r"stopped from outside the runtime, by pykka\.ActorRegistry\.stop_all\(\)"


class _Echo:
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        ctx.set_private("seen", message.payload)
        return message.payload


class _Ambiguous:
    """Compares as a NumPy array does: ``==`` gives an object whose truth raises."""

    def __eq__(self, other: object) -> Any:
        return self

    def __bool__(self) -> bool:
        msg = "the truth value of an array with more than one element is ambiguous"
        raise ValueError(msg)

    __hash__ = object.__hash__


def _batch() -> cf.Config:
    return cf.Config(journal=cf.JournalConfig(durability="batch"))


@pytest.mark.parametrize(
    "message",
    ["hello", {"cmd": "tick"}, (1, "tick"), (0, "kill", ()), (), 5, object(), _Ambiguous()],
    ids=["str", "dict", "ipc-shaped", "call-shaped", "empty-tuple", "int", "object", "ambiguous"],
)
def test_a_hosts_pykka_broadcast_leaves_every_agent_working(
    tmp_path: Path, message: object, caplog: pytest.LogCaptureFixture
) -> None:
    # Before, each agent's actor failed on the message (a KeyError, a TypeError, or its
    # mailbox count given back for a slot never taken) and Pykka stopped it: the agents
    # were gone until a reopen, and calls said "agent not found".
    with cf.Runtime.open(tmp_path / "j", behaviors={"echo": _Echo}) as rt:
        handles = [rt.spawn(agent_id, behavior="echo") for agent_id in ("a", "b")]
        with caplog.at_level(logging.WARNING, logger="cogfabric"):
            pykka.ActorRegistry.broadcast(message)
            # queued behind the broadcast in each mailbox: answered once it was handled
            replies = [rt.bus.request("app", h.id, "t", h.id, timeout=WAIT).payload for h in handles]
        assert replies == ["a", "b"]
        for handle in handles:
            handle.set_private("k", 1)
            assert handle.context_view().private == {"seen": handle.id, "k": 1}
        assert all(ref.is_alive() for ref in pykka.ActorRegistry.get_by_class(AgentActor))
        ignored = [r for r in caplog.records if "did not send" in r.getMessage()]
        assert len(ignored) == 1  # once per runtime, not once per agent
        assert "target_class" in ignored[0].getMessage()
        assert rt.stats().behavior_failures == 0


def test_a_message_asked_of_an_agents_actor_by_a_host_is_answered_none(tmp_path: Path) -> None:
    # as Pykka's own Actor.on_receive answers a message it does not know
    with cf.Runtime.open(tmp_path / "j") as rt:
        a = rt.spawn("a")
        (ref,) = pykka.ActorRegistry.get_by_class(AgentActor)
        assert ref.ask({"cmd": "status"}, timeout=WAIT) is None
        a.set_private("k", 1)
        assert a.context_view().private == {"k": 1}


def test_an_ambiguous_broadcast_leaves_the_journal_writer_and_the_session_actor_working(
    tmp_path: Path,
) -> None:
    # Before, the writer's "message == 'flush'" raised on it: the writer failed, and the
    # journal went fail-stop (JournalFailedError on every change); the session actor stopped.
    path = tmp_path / "j"
    with cf.Runtime.open(path) as rt:
        a = rt.spawn("a")
        for target in (JournalWriterActor, SessionActor):
            pykka.ActorRegistry.broadcast(_Ambiguous(), target_class=target)
            for ref in pykka.ActorRegistry.get_by_class(target):  # handled once an ask behind it is
                assert ref.ask("ping", timeout=WAIT) is None
        a.set_private("k", 1)
        session = rt.memory.create_session("u", agent_id="a")
        rt.memory.add_message(session, "user", "hi")
    with cf.Runtime.open(path) as rt:
        assert rt.agent("a").context_view().private == {"k": 1}
        assert [m.content for m in rt.memory.get_session(session).messages][-1:] == ["hi"]


def test_calls_after_a_hosts_stop_all_say_who_stopped_the_runtimes_actors(tmp_path: Path) -> None:
    # Before: "agent not found: 'a'" for an agent the journal has alive, and "the runtime
    # is closed" from a session call, for a runtime nobody closed.
    path = tmp_path / "j"
    rt = cf.Runtime.open(path, config=_batch())
    a = rt.spawn("a")
    a.set_private("k", 1)  # handed over, not flushed: stop_all's writer commits it
    session = rt.memory.create_session("u", agent_id="a")
    pykka.ActorRegistry.stop_all(block=True, timeout=WAIT)
    with pytest.raises(cf.RuntimeClosedError, match=rf"agent 'a''s actor was {OUTSIDE}"):
        a.set_private("k", 2)
    with pytest.raises(cf.RuntimeClosedError, match=rf"agent 'a''s actor was {OUTSIDE}"):
        a.context_view()
    with pytest.raises(cf.RuntimeClosedError, match=rf"agent 'a''s actor was {OUTSIDE}"):
        rt.context_views()
    with pytest.raises(cf.RuntimeClosedError, match=rf"the journal writer was {OUTSIDE}"):
        rt.spawn("b")
    with pytest.raises(cf.RuntimeClosedError, match=rf"the session actor was {OUTSIDE}"):
        rt.memory.add_message(session, "user", "hi")
    with pytest.raises(cf.RuntimeClosedError, match=r"Runtime\.close\(\)"):
        rt.flush(timeout=WAIT)
    rt.close()  # after stop_all: returns, the journal unlocked
    with cf.Runtime.open(path) as reopened:
        assert reopened.agent("a").context_view().private == {"k": 1}
        assert reopened.memory.get_session(session).agent_id == "a"


def test_a_behaviors_changes_after_a_hosts_stop_all_stopped_the_writer_say_they_are_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # stop_all(block=False) stops the idle writer while a behavior still runs: its later
    # change cannot be journaled, and raises (applied nowhere), naming the cause; the one
    # it made before (applied at once in batch durability, handed over as the message
    # ends) is journaled nowhere either, which was only a debug record before.
    entered, go, said = threading.Event(), threading.Event(), []

    class Slow:
        def on_message(self, ctx: cf.AgentContext, _message: cf.IpcMessage) -> None:
            ctx.set_private("early", 1)
            entered.set()
            assert go.wait(WAIT)
            try:
                ctx.set_private("late", 1)
            except cf.RuntimeClosedError as exc:
                said.append(str(exc))

    path = tmp_path / "j"
    rt = cf.Runtime.open(path, config=_batch(), behaviors={"slow": Slow})
    rt.spawn("a", behavior="slow")
    (writer,) = pykka.ActorRegistry.get_by_class(JournalWriterActor)
    (agent,) = pykka.ActorRegistry.get_by_class(AgentActor)
    rt.bus.send("app", "a", "t")
    assert entered.wait(WAIT)
    pykka.ActorRegistry.stop_all(block=False)
    assert writer.actor_stopped.wait(WAIT)
    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        go.set()
        assert agent.actor_stopped.wait(WAIT)  # its stop queued behind the message in hand
    assert len(said) == 1
    assert "the journal writer was stopped from outside the runtime" in said[0]
    lost = [r.getMessage() for r in caplog.records if "not journaled" in r.getMessage()]
    assert len(lost) == 1
    # its message's delivery record and the PrivateSet
    first = r"agent a: events it applied were not journaled \(2 events, the first IpcDelivered\): "
    assert re.search(first + "the journal writer was " + OUTSIDE, lost[0])
    rt.close()
    with cf.Runtime.open(path) as reopened:
        assert reopened.agent("a").context_view().private == {}  # as after a crash: not flushed
