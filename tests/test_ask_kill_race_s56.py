"""A handle's call or a lifecycle call asked as a kill's stop ends the agent's actor is not lost.

Pykka's ``ask`` checks that the actor lives, then queues the message: a stop that ends
the actor between the two left the message in a dead inbox, and its caller waiting out
``call_timeout`` for an agent long gone, then told the call "stays in its mailbox and
takes effect" (``ActorTimeoutError``). ``Runtime._ask`` now asks under the runtime's
lock while the agent is still its id's (``_ask_current``), so the call is queued before
any kill's stop and answered; a call that comes after the kill is told at once that the
agent is gone (``AgentNotFoundError``). Found by session 56's review of the bulk reads
(helper h6).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pykka
import pytest

import cogfabric as cf
from tests.test_rounds_s55_h10 import WAIT, _Gate

if TYPE_CHECKING:
    from collections.abc import Callable

CALL_TIMEOUT = 3.0
"""Long enough for the kill and the call (a lost call would wait it out, then time out)."""


def called_as_the_kill_ends_the_actor(
    monkeypatch: pytest.MonkeyPatch, call: Callable[[cf.Runtime, cf.Agent], object]
) -> tuple[cf.Runtime, cf.Agent, object]:
    """Run ``call`` on busy agent ``a``, held between Pykka's check and its queueing while ``a`` is killed.

    The kill needs the runtime's lock, which the call holds while it queues: the call
    goes first. Before, it went after the stop and waited out ``call_timeout``. Returns
    the runtime (the caller closes it; closed here if anything fails), the handle, and
    what ``call`` returned.
    """
    gate = _Gate()
    caller = threading.current_thread()
    alive = pykka.ActorRef.is_alive
    rt = cf.Runtime.open(None, config={"runtime": {"call_timeout": CALL_TIMEOUT}})
    try:
        handle = rt.spawn("a", behavior=gate)
        entry = rt._entry("a")
        thread = entry.shared.thread
        assert thread is not None
        killer = threading.Thread(target=rt.kill, args=("a",))

        def checked_then_held(ref: pykka.ActorRef[Any]) -> bool:
            answer = alive(ref)
            if ref is entry.ref and threading.current_thread() is caller and killer.ident is None:
                killer.start()  # the kill queues behind the message in hand
                gate.release.set()
                thread.join(0.5)  # the actor ends, unless the caller holds what its kill needs
            return answer

        rt.bus.send("app", "a", "m", None)
        assert gate.started.wait(WAIT)  # busy: the call is asked, not read on this thread
        monkeypatch.setattr(pykka.ActorRef, "is_alive", checked_then_held)
        try:
            result = call(rt, handle)  # answered: queued before the kill
        finally:
            gate.release.set()
            monkeypatch.undo()
            if killer.ident is not None:
                killer.join(WAIT)
        assert killer.ident is not None  # the race was run
        assert not killer.is_alive()
    except BaseException:
        gate.release.set()
        rt.close()
        raise
    return rt, handle, result


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda _rt, handle: handle.context_view(), id="a handle's read"),
        pytest.param(lambda _rt, handle: handle.set_private("k", 1), id="a handle's change"),
        pytest.param(lambda rt, _handle: rt.suspend("a"), id="a lifecycle call"),
    ],
)
def test_a_call_asked_as_a_kill_ends_the_actor_is_answered_before_the_kill(
    monkeypatch: pytest.MonkeyPatch, call: Callable[[cf.Runtime, cf.Agent], object]
) -> None:
    rt, handle, _ = called_as_the_kill_ends_the_actor(monkeypatch, call)
    try:
        assert rt.agents() == []  # then killed
        with pytest.raises(cf.AgentNotFoundError, match="'a'"):
            call(rt, handle)  # after it: told at once
        rt.settle(WAIT)  # the slot the refused call took is given back: nothing stays in flight
        assert rt.stats().in_flight == 0
    finally:
        rt.close()
