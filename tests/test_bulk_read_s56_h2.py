"""``Runtime.context_views`` and ``cognitive_states``: many agents' state read at once, between rounds."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors._agent import ASK
from tests.test_rounds_s55_h10 import AGENTS, HOPS, WAIT, Worker, _aid, _Gate, _open

if TYPE_CHECKING:
    from pathlib import Path

MODES = ["memory", "sync", "batch"]


def _spawn_with_secrets(rt: cf.Runtime, count: int) -> list[str]:
    ids = [f"s{i}" for i in range(count)]
    rt.spawn_many([{"agent_id": a, "task_id": "t", "task_context": {"goal": {"text": "g"}}} for a in ids])
    for a in ids:
        rt.agent(a).set_private(f"secret-{a}", {"owner": a, "items": [a]})
        rt.agent(a).set_cognitive_state(cf.CognitiveState(working_memory={"by": a, "notes": [a]}))
    return ids


@pytest.mark.parametrize("mode", MODES)
def test_after_each_rounds_settle_the_views_are_what_the_round_left_as_each_agents_own_reads(
    tmp_path: Path, mode: str
) -> None:
    model = cf.ScriptedProvider(lambda prompt: "ok:" + prompt, keep_calls=False)
    with _open(tmp_path, mode, behaviors={"worker": Worker}, llm_provider=model) as rt:
        rt.spawn_many([{"agent_id": _aid(i), "task_id": "t", "behavior": "worker"} for i in range(AGENTS)])
        for i in range(AGENTS):
            rt.bus.subscribe(_aid(i), "prompt")
        for r in range(3):
            rt.publish_task_context("t", {"round": r})
            rt.bus.broadcast("app", "prompt", r)
            rt.settle(WAIT)
            views = rt.context_views()
            assert list(views) == rt.agents()
            assert views == {a: rt.agent(a).context_view() for a in rt.agents()}
            for view in views.values():
                assert view.task_shared == {"round": r}
                assert (view.private["seen"], view.private["pings"]) == (r, HOPS * (r + 1))
            states = rt.cognitive_states()
            assert states == {a: rt.agent(a).cognitive_state() for a in rt.agents()}


@pytest.mark.parametrize("mode", MODES)
def test_values_are_copies_and_each_agent_shows_only_its_own_private(tmp_path: Path, mode: str) -> None:
    with _open(tmp_path, mode) as rt:
        ids = _spawn_with_secrets(rt, 6)
        views = rt.context_views()
        states = rt.cognitive_states()
        for a in ids:
            assert dict(views[a].private) == {f"secret-{a}": {"owner": a, "items": [a]}}
            assert states[a].working_memory == {"by": a, "notes": [a]}
        with pytest.raises(TypeError):
            views["s0"].private["x"] = 1  # type: ignore[index]  # read-only
        views["s0"].private["secret-s0"]["items"].append("mutated")
        views["s0"].task_shared["goal"]["text"] = "mutated"
        states["s0"].working_memory["notes"].append("mutated")
        # two reads never share a value
        assert rt.context_views(["s0"])["s0"].private["secret-s0"] == {"owner": "s0", "items": ["s0"]}
        assert rt.agent("s0").private("secret-s0") == {"owner": "s0", "items": ["s0"]}
        assert rt.agent("s0").task_context() == {"goal": {"text": "g"}}
        assert rt.cognitive_states(["s0"])["s0"].working_memory == {"by": "s0", "notes": ["s0"]}
        assert rt.agent("s0").cognitive_state().working_memory == {"by": "s0", "notes": ["s0"]}


def test_given_ids_in_the_order_given_once_each_suspended_and_retired_agents_read(
    tmp_path: Path,
) -> None:
    with _open(tmp_path, "memory") as rt:
        _spawn_with_secrets(rt, 4)
        rt.suspend("s1")
        rt.retire("s2")
        assert list(rt.context_views(["s3", "s1", "s3", "s2"])) == ["s3", "s1", "s2"]
        assert list(rt.cognitive_states()) == ["s0", "s1", "s2", "s3"]
        assert rt.context_views([]) == {}


def test_unknown_killed_and_malformed_ids(tmp_path: Path) -> None:
    with _open(tmp_path, "sync") as rt:
        _spawn_with_secrets(rt, 3)
        rt.kill("s1")
        with pytest.raises(cf.AgentNotFoundError) as caught:
            rt.context_views(["s0", "nobody"])
        assert caught.value.agent_id == "nobody"
        with pytest.raises(cf.AgentNotFoundError, match="s1"):
            rt.cognitive_states(["s1"])
        assert list(rt.context_views()) == ["s0", "s2"]  # a killed agent is no current one
        with pytest.raises(TypeError, match=r"\['s0'\]"):
            rt.context_views("s0")
        with pytest.raises(cf.InvalidTextError):
            rt.context_views([7])  # type: ignore[list-item]
        with pytest.raises(TypeError):
            rt.context_views(timeout="1")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["memory", "sync"])
def test_a_closed_runtime_refuses(tmp_path: Path, mode: str) -> None:
    rt = _open(tmp_path, mode)
    _spawn_with_secrets(rt, 2)
    rt.close()
    with pytest.raises(cf.RuntimeClosedError):
        rt.context_views()
    with pytest.raises(cf.RuntimeClosedError):
        rt.cognitive_states(["s0"])


class _Reader:
    """Reads the others' views from its behavior: the runtime is given after open."""

    rt: cf.Runtime

    def __init__(self) -> None:
        self.outcome: Any = None

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
        try:
            self.outcome = self.rt.context_views(message.payload)
        except cf.AgentRunningError as exc:
            self.outcome = exc


@pytest.mark.parametrize("mode", ["memory", "sync"])
def test_from_a_behavior_its_own_agent_is_refused_the_others_are_read(tmp_path: Path, mode: str) -> None:
    reader = _Reader()
    with _open(tmp_path, mode) as rt:
        reader.rt = rt
        _spawn_with_secrets(rt, 2)
        rt.spawn("reader", behavior=reader)
        rt.bus.send("app", "reader", "read", None)  # every agent: itself too
        rt.settle(WAIT)
        assert isinstance(reader.outcome, cf.AgentRunningError)
        assert reader.outcome.agent_id == "reader"
        assert "ctx" in str(reader.outcome)
        rt.bus.send("app", "reader", "read", ["s0", "s1"])
        rt.settle(WAIT)
        outcome: object = reader.outcome
        assert outcome == rt.context_views(["s0", "s1"])


@pytest.mark.parametrize("mode", ["memory", "batch"])
def test_a_busy_agent_is_read_after_the_messages_its_mailbox_held_or_named_when_it_times_out(
    tmp_path: Path, mode: str
) -> None:
    gate = _Gate()

    class Setter:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
            gate.on_message(ctx, message)
            ctx.set_private("last", message.payload)

    with _open(tmp_path, mode) as rt:
        rt.spawn("idle")
        rt.spawn("busy", behavior=Setter())
        try:
            rt.bus.send("app", "busy", "m", 1)
            assert gate.started.wait(WAIT)
            with pytest.raises(cf.ActorTimeoutError, match="'busy'") as caught:
                rt.context_views(timeout=0.2)
            assert "idle" not in str(caught.value)  # the idle agent answered
            rt.bus.send("app", "busy", "m", 2)  # queued before the next read
            read: dict[str, Any] = {}
            reader = threading.Thread(target=lambda: read.update(views=rt.context_views(["busy"])))
            reader.start()
        finally:
            gate.release.set()
        reader.join(WAIT)
        assert not reader.is_alive()
        assert read["views"]["busy"].private == {"last": 2}
        rt.settle(WAIT)


def _actor(rt: cf.Runtime, agent_id: str) -> Any:
    return rt._entry(agent_id).shared.read_now.__self__  # type: ignore[attr-defined]


def test_an_agent_not_busy_yet_with_mail_waiting_is_asked_not_read_before_that_mail(tmp_path: Path) -> None:
    class Setter:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
            ctx.set_private("last", message.payload)

    with _open(tmp_path, "memory") as rt:
        rt.spawn("a", behavior=Setter())
        lock = _actor(rt, "a")._foreign_lock
        with lock:  # the actor takes its message up, then waits here before it is busy
            rt.bus.send("app", "a", "m", 1)
            with pytest.raises(cf.ActorTimeoutError, match="'a'"):
                rt.context_views(timeout=0.2)  # read_now takes the (reentrant) lock: mail waits
        rt.settle(WAIT)
        assert rt.context_views()["a"].private == {"last": 1}


@pytest.mark.parametrize("flag", ["_stale", "_killed"])
def test_an_agent_that_must_take_the_journals_word_or_is_killed_is_asked(tmp_path: Path, flag: str) -> None:
    with _open(tmp_path, "sync") as rt:
        rt.spawn("a")
        actor = _actor(rt, "a")
        assert rt._entry("a").shared.read_now("context_view") == ({}, {})
        with actor._foreign_lock:
            setattr(actor, flag, True)
            try:
                assert rt._entry("a").shared.read_now("context_view") is ASK
            finally:
                setattr(actor, flag, False)


def test_a_mailbox_that_stays_full_is_named_after_the_others_were_read() -> None:
    gate = _Gate()
    config = {"runtime": {"call_timeout": WAIT, "mailbox_size": 1}}
    with cf.Runtime.open(None, config=config) as rt:
        rt.spawn("idle")
        rt.spawn("busy", behavior=gate)
        try:
            rt.bus.send("app", "busy", "m", 1)
            assert gate.started.wait(WAIT)
            rt.bus.send("app", "busy", "m", 2)  # fills its mailbox
            with pytest.raises(cf.MailboxFullError, match="'busy'"):
                rt.context_views(timeout=0.2)
            assert list(rt.context_views(["idle"])) == ["idle"]
        finally:
            gate.release.set()
        rt.settle(WAIT)
        assert list(rt.context_views()) == ["idle", "busy"]
