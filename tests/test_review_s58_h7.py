"""Review of the held Ctrl-C (``actors/_interrupt.py``): where one was still held too long.

Each test sends itself a real SIGINT (``signal.raise_signal``: its handler runs at once, on
the main thread) from a function it controls, and puts the SIGINT handler back as found.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import TYPE_CHECKING, Any

import pykka
import pytest

import cogfabric as cf
from cogfabric.actors import _interrupt
from cogfabric.actors._agent import AgentActor
from tests.test_interrupt_hold_s58_h1 import (  # autouse: Python's own handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)

if TYPE_CHECKING:
    from types import FrameType

WAIT = 10.0


def _twice_in_one_wait(steps: list[str]) -> None:
    """A held section whose one wait gets two Ctrl-Cs; what runs after each."""

    def blocking() -> None:
        signal.raise_signal(signal.SIGINT)
        steps.append("after the first")
        signal.raise_signal(signal.SIGINT)
        steps.append("after the second")

    with _interrupt.HELD:
        _interrupt.wait(blocking)
        steps.append("after the wait")


def test_a_second_ctrl_c_in_one_wait_reaches_a_handler_that_did_not_raise_at_the_first() -> None:
    # "Press Ctrl-C again to quit": the replaced handler returns at the first (as asyncio's
    # does, cancelling its main task), raises at the second. The second landed in the same
    # wait, so it is not held: it was held (to the section's end, up to call_timeout later).
    calls: list[int] = []

    def again_to_quit(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
        calls.append(signum)
        if len(calls) > 1:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, again_to_quit)
    rt = cf.Runtime.open(None)
    try:
        steps: list[str] = []
        with pytest.raises(KeyboardInterrupt):
            _twice_in_one_wait(steps)
        assert steps == ["after the first"]
        assert len(calls) == 2
        assert not _interrupt._waiting
        assert _interrupt._pending is False
    finally:
        rt.close()
    assert signal.getsignal(signal.SIGINT) is again_to_quit


def test_under_asyncio_run_the_second_ctrl_c_in_a_wait_is_raised_at_once() -> None:
    # asyncio.run's own SIGINT handler (3.11+): the first Ctrl-C cancels the main task and
    # returns, the second raises KeyboardInterrupt. A runtime opened inside it chains to it.
    steps: list[str] = []

    async def main() -> None:
        rt = cf.Runtime.open(None)
        try:
            _twice_in_one_wait(steps)
        finally:
            rt.close()

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())
    assert steps == ["after the first"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_in_a_behavior_factory_stops_the_spawn_at_once() -> None:
    # The factory is the program's code (a model to load, a client to connect): a Ctrl-C
    # in it is not held until the spawn is through, and the spawn does not happen.
    steps: list[str] = []

    class _Quiet:
        def on_message(self, ctx: Any, message: Any) -> None:
            pass

    def slow_factory() -> _Quiet:
        signal.raise_signal(signal.SIGINT)
        steps.append("the factory ran on")
        return _Quiet()

    rt = cf.Runtime.open(None, behaviors={"slow": slow_factory})
    try:
        with pytest.raises(KeyboardInterrupt):
            rt.spawn("a", behavior="slow")
        assert steps == []
        assert "a" not in rt.agents()
        assert _interrupt._depth == 0
    finally:
        rt.close()


def test_a_ctrl_c_while_a_failed_spawn_waits_for_its_actors_to_stop_is_raised_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A spawn that fails after its actors started stops them: a Ctrl-C as it waits for
    # their stop stops that wait (it was held through it), and every one is asked to stop.
    steps: list[str] = []
    real_get = pykka.ThreadingFuture.get
    started: list[pykka.ActorRef[Any]] = []
    before: set[pykka.ActorRef[Any]] = set()

    def get(self: pykka.ThreadingFuture[Any], *, timeout: float | None = None) -> Any:
        if rt_ready and not started:
            started.extend(ref for ref in pykka.ActorRegistry.get_by_class(AgentActor) if ref not in before)
            signal.raise_signal(signal.SIGINT)
            steps.append("the stop's wait went on")
        return real_get(self, timeout=timeout)

    class _Quiet:
        def on_message(self, ctx: Any, message: Any) -> None:
            pass

    def refused(*_: object) -> None:
        msg = "refused by the test"
        raise ValueError(msg)

    rt_ready = False
    rt = cf.Runtime.open(None)
    try:
        before.update(pykka.ActorRegistry.get_by_class(AgentActor))
        monkeypatch.setattr(rt, "_submit_spawn", refused)
        monkeypatch.setattr(pykka.ThreadingFuture, "get", get)
        rt_ready = True
        with pytest.raises(KeyboardInterrupt) as raised:
            rt.spawn_many([{"agent_id": "a", "behavior": _Quiet()}, {"agent_id": "b", "behavior": _Quiet()}])
        rt_ready = False
        monkeypatch.undo()
        assert isinstance(raised.value.__context__, ValueError)
        assert steps == []
        assert len(started) == 2
        for ref in started:  # each asked to stop all the same
            assert ref.actor_stopped.wait(WAIT)
    finally:
        rt_ready = False
        monkeypatch.undo()
        rt.close()


def test_a_ctrl_c_as_open_installs_the_handler_leaves_no_runtime_open_nor_the_handler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # It landed just after the handler was installed, before the runtime noted it: the
    # runtime was left running (never closed, not even at exit) and the handler counted
    # for it forever (never put back).
    real_install = _interrupt.install
    opened: list[cf.Runtime] = []

    def install() -> bool:
        installed = real_install()
        opened.append(sys._getframe(1).f_locals["runtime"])
        signal.raise_signal(signal.SIGINT)
        return installed

    monkeypatch.setattr(_interrupt, "install", install)
    try:
        with pytest.raises(KeyboardInterrupt):
            cf.Runtime.open(None)
        monkeypatch.undo()
        (rt,) = opened
        assert rt.closed
        assert _interrupt._installs == 0
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        monkeypatch.undo()
        for rt in opened:
            rt.close()
