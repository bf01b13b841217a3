"""What the docstrings of the bus, ``IpcMessage`` and ``replay_agent`` promise, held to the code (helper h12).

- ``IpcMessage`` said a broadcast's ``recipient`` is empty: so it is in the journal,
  but the copy a subscriber's behavior gets names that subscriber.
- ``IpcBus.subscribe`` listed neither a wrong type (``InvalidTextError``) nor a busy
  agent's ``ActorTimeoutError``, both of which it raises.
- ``replay_agent`` returns None for an agent that does not live at ``until``, which
  only the README said.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    FakeClock,
    IpcBus,
    Runtime,
    replay_agent,
)
from cogfabric.events import InvalidTextError, IpcMessage
from cogfabric.store import Journal

from .test_supervision import _short_call_timeout

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.actors import AgentContext

WAIT = 10.0


def test_a_broadcast_is_journaled_without_a_recipient_and_handled_with_the_subscriber(tmp_path: Path) -> None:
    doc = IpcMessage.__doc__ or ""
    assert "``recipient`` is empty for a broadcast as journaled" in doc
    assert "names that" in doc
    seen: list[IpcMessage] = []
    done = threading.Semaphore(0)

    class Listener:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            seen.append(message)
            done.release()

    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"listen": Listener}) as rt:
        for agent in ("s1", "s2"):
            rt.spawn(agent, behavior="listen")
            rt.bus.subscribe(agent, "news")
        assert rt.bus.broadcast("x", "news", 1) == 2
        for _ in range(2):
            assert done.acquire(timeout=WAIT)
        rt.flush()
    assert sorted((m.recipient, m.kind) for m in seen) == [("s1", "broadcast"), ("s2", "broadcast")]
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        (sent,) = [r.event for r in journal.read(stream="bus") if isinstance(r.event, IpcMessage)]
    assert (sent.recipient, sent.kind) == ("", "broadcast")


def test_subscribe_raises_what_its_docstring_lists(tmp_path: Path) -> None:
    doc = IpcBus.subscribe.__doc__ or ""
    listed = ("AgentNotRegisteredError", "IpcInvalidMessageError", "InvalidTextError", "ActorTimeoutError")
    for name in listed:
        assert name in doc
    entered, release = threading.Event(), threading.Event()

    class Busy:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            entered.set()
            release.wait(WAIT)

    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"busy": Busy}) as rt:
        rt.spawn("b", behavior="busy")
        with pytest.raises(InvalidTextError):
            rt.bus.subscribe("b", 3)  # type: ignore[arg-type]
        rt.bus.send("x", "b", "work")
        assert entered.wait(WAIT)
        try:
            # only the call meant to time out has the short call_timeout: the rest may be slow
            with _short_call_timeout(rt, 0.2), pytest.raises(ActorTimeoutError):
                rt.bus.subscribe("b", "news")
        finally:
            release.set()
        rt.flush()
        assert rt.bus.subscribers("news") == ["b"]  # queued, and applied once the agent got to it


def test_replay_agent_returns_none_where_its_docstring_says(tmp_path: Path) -> None:
    assert "None when no agent of that id lives at ``until``" in (replay_agent.__doc__ or "")
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        rt.spawn("a").set_private("k", 1)
        rt.kill("a")
        rt.spawn("a").set_private("k", 2)
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        lives = [replay_agent(journal, "a", until=seq, from_snapshot=False) for seq in range(6)]
        assert replay_agent(journal, "nobody") is None
    assert [None if s is None else s.private for s in lives] == [None, {}, {"k": 1}, None, {}, {"k": 2}]
