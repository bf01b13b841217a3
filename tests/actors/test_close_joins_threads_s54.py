"""``close()`` returns once the threads of the actors it stopped have ended (session 54, helper h11).

Pykka acknowledges a stop from inside the actor's loop; the thread then empties its
inbox and ends. ``close()`` returned on the acknowledgement, so a ``threading.enumerate()``
right after it (README, "Testing your agents": leaks) could list agent, session and
writer threads of a closed runtime when the machine was loaded. Here each actor's
last step is slowed, as a descheduled thread is.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pykka
import pytest

import cogfabric as cf

from .test_supervision import _short_call_timeout

if TYPE_CHECKING:
    from pathlib import Path

_LINGER = 0.2  # seconds an actor's thread runs on after its stop was acknowledged


@pytest.fixture
def lingering_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    teardown = pykka.Actor._actor_loop_teardown

    def slow(self: pykka.Actor) -> None:
        teardown(self)
        threading.Event().wait(_LINGER)  # a thread descheduled after its stop: not a wait for anything

    monkeypatch.setattr(pykka.Actor, "_actor_loop_teardown", slow)


class Echo:
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
        return message.payload


@pytest.mark.parametrize("journaled", [False, True], ids=["memory", "journal"])
@pytest.mark.usefixtures("lingering_threads")
def test_no_thread_of_a_closed_runtime_is_left(tmp_path: Path, journaled: bool) -> None:
    before = set(threading.enumerate())
    with cf.Runtime.open(tmp_path / "j" if journaled else None, behaviors={"echo": Echo}) as rt:
        for n in range(3):
            rt.spawn(f"a{n}", behavior="echo")
        assert rt.bus.request("t", "a1", "ping", 1, timeout=5).payload == 1
        rt.memory.create_session("u")

    left = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == []


@pytest.mark.usefixtures("lingering_threads")
def test_a_busy_agent_s_thread_is_not_waited_for_past_call_timeout(tmp_path: Path) -> None:
    release, started = threading.Event(), threading.Event()

    class Stuck:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
            started.set()
            release.wait(10)

    rt = cf.Runtime.open(tmp_path / "j", behaviors={"stuck": Stuck})
    try:
        rt.spawn("s", behavior="stuck")
        rt.bus.send("t", "s", "go", None)
        assert started.wait(5)
        with _short_call_timeout(rt, 0.3):  # the set-up's commits keep 10 s, as a loaded machine may need
            rt.close()  # the stuck agent is given call_timeout, then left: close() returns
        assert not release.is_set()
    finally:
        release.set()
        rt.close()
