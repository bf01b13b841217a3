"""A round-based simulation driven by ``settle()`` and ``stats()``: what each round may rely on."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf

if TYPE_CHECKING:
    from pathlib import Path

WAIT = 5.0
AGENTS = 24
ROUNDS = 4
HOPS = 3


def _aid(i: int) -> str:
    return f"a{i % AGENTS:02d}"


class Worker:
    """On a round's prompt: a chain of pings, every third a request, every fourth an LLM turn."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> dict[str, int] | None:
        i = int(ctx.agent_id[1:])
        payload = message.payload
        if message.topic == "prompt":
            ctx.set_private("seen", payload)
            ctx.send(_aid(i + 1), "ping", {"round": payload, "hops": HOPS})
            if i % 4 == 0:
                ctx.set_private("llm", ctx.llm.generate(f"round {payload} agent {i}"))
            if i % 3 == 0:
                reply = ctx.request(_aid(i + 7), "ask", payload, timeout=WAIT)
                ctx.set_private("answer", reply.payload["round"])
        elif message.topic == "ping":
            ctx.set_private("pings", (ctx.private("pings") or 0) + 1)
            if payload["hops"] > 1:
                ctx.send(_aid(i + 1), "ping", {"round": payload["round"], "hops": payload["hops"] - 1})
        elif message.topic == "ask":
            return {"round": payload}
        return None


class _Gate:
    """Holds each message until ``release`` is set (by the test, in a finally too)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
        self.started.set()
        assert self.release.wait(WAIT)


def _open(tmp_path: Path, mode: str, **kwargs: Any) -> cf.Runtime:
    config: dict[str, Any] = {"runtime": {"call_timeout": WAIT}}
    if mode == "memory":
        return cf.Runtime.open(None, config=config, **kwargs)
    config["journal"] = {"durability": mode, "max_map_size": 32 << 20}
    return cf.Runtime.open(tmp_path / "j", config=config, **kwargs)


@pytest.mark.parametrize("mode", ["memory", "sync", "batch"])
def test_after_each_rounds_settle_every_agent_shows_the_round_and_nothing_is_in_flight(
    tmp_path: Path, mode: str
) -> None:
    model = cf.ScriptedProvider(lambda prompt: "ok:" + prompt, keep_calls=False)
    with _open(tmp_path, mode, behaviors={"worker": Worker}, llm_provider=model) as rt:
        rt.spawn_many([{"agent_id": _aid(i), "task_id": "t", "behavior": "worker"} for i in range(AGENTS)])
        for i in range(AGENTS):
            rt.bus.subscribe(_aid(i), "prompt")
        for r in range(ROUNDS):
            rt.publish_task_context("t", {"round": r})
            assert rt.bus.broadcast("app", "prompt", r) == AGENTS  # the driver is no agent
            rt.settle(WAIT)
            stats = rt.stats()
            assert (stats.in_flight, stats.queued, stats.running, stats.idle) == (0, 0, 0, AGENTS)
            assert stats.dead_letters == {}
            for i in range(AGENTS):
                view = rt.agent(_aid(i)).context_view()
                private = view.private
                assert view.task_shared == {"round": r}
                assert (private["seen"], private["pings"]) == (r, HOPS * (r + 1))
                if i % 3 == 0:
                    assert private["answer"] == r
                if i % 4 == 0:
                    assert private["llm"] == f"ok:round {r} agent {i}"


@pytest.mark.parametrize("mode", ["sync", "batch"])
def test_an_idle_settle_or_flush_is_no_commit(tmp_path: Path, mode: str) -> None:
    """A round loop settles every round: one with nothing to commit must not count one."""
    with _open(tmp_path, mode) as rt:
        agent = rt.spawn("a")
        rt.settle(WAIT)
        before = rt.stats()
        for _ in range(5):
            rt.settle(WAIT)
            rt.flush(WAIT)
        idle = rt.stats()
        assert idle.journal_last_seq == before.journal_last_seq  # nothing was written
        assert idle.commits == before.commits
        agent.set_private("k", "v")
        rt.settle(WAIT)
        after = rt.stats()
        assert after.journal_last_seq == before.journal_last_seq + 1  # type: ignore[operator]
        assert after.commits == before.commits + 1  # type: ignore[operator]


def test_in_flight_counts_the_message_in_hand_and_those_waiting() -> None:
    gate = _Gate()
    rt = cf.Runtime.open(config={"runtime": {"call_timeout": WAIT}}, behaviors={"gate": lambda: gate})
    try:
        rt.spawn("g", behavior="gate")
        assert rt.stats().in_flight == 0
        for n in range(3):
            rt.bus.send("app", "g", "t", n)
        assert gate.started.wait(WAIT)
        stats = rt.stats()
        assert (stats.in_flight, stats.queued, stats.running) == (3, 2, 1)  # one in hand
        gate.release.set()
        rt.settle(WAIT)
        assert rt.stats().in_flight == 0
    finally:
        gate.release.set()
        rt.close()
