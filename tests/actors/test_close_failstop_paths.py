"""Batch durability: close() raises a journal failure no flush() reported, whatever path met it first."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf

from .test_supervision import _short_call_timeout

if TYPE_CHECKING:
    from pathlib import Path

CONFIG = {"journal": {"durability": "batch", "map_size": 140 << 10, "max_map_size": 140 << 10}}


def _note_failstop(rt: cf.Runtime) -> threading.Event:
    writer = rt._core.writer
    assert writer is not None
    failed, hook = threading.Event(), writer.on_failstop

    def noted() -> None:
        failed.set()
        if hook is not None:
            hook()

    writer.on_failstop = noted
    return failed


def test_mail_handled_after_a_background_failure_does_not_hide_it_from_close(tmp_path: Path) -> None:
    entered, gate, second = threading.Event(), threading.Event(), threading.Event()

    class Big:
        def on_message(self, ctx: Any, message: Any) -> None:
            if message.topic == "first":
                entered.set()
                assert gate.wait(10)
                ctx.set_private("big", "z" * 200_000)  # batch: applied; its commit fails in storage
            else:
                assert second.wait(10)
                ctx.set_private("seen", message.topic)  # an ordinary change, handed over after the failure

    path = tmp_path / "j"
    rt = cf.Runtime.open(path, clock=cf.FakeClock(), config=CONFIG, behaviors={"big": Big})
    failed = _note_failstop(rt)
    rt.spawn("a", behavior="big")
    rt.spawn("u")
    rt.flush()
    rt.bus.send("u", "a", "first")
    assert entered.wait(10)
    rt.bus.send("u", "a", "second")  # waits in a's mailbox: handled after the failure
    gate.set()
    assert failed.wait(10)
    second.set()
    rt.agent("a").private("seen")  # a read: a is past "second" (nobody was told anything)
    # nobody was told of the failure: close() must say it (a's "big" is not stored)
    with pytest.raises(cf.JournalError):
        rt.close()


def test_a_request_open_at_close_does_not_hide_the_failure_from_close(tmp_path: Path) -> None:
    entered, gate = threading.Event(), threading.Event()

    class Slow:
        def on_message(self, ctx: Any, message: Any) -> Any:  # noqa: ARG002
            entered.set()
            gate.wait(10)
            return {"ok": True}

    rt = cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config=CONFIG, behaviors={"slow": Slow})
    failed = _note_failstop(rt)
    rt.spawn("r", behavior="slow")
    rt.spawn("u")
    rt.flush()
    outcome: list[BaseException] = []

    def ask() -> None:
        try:
            rt.bus.request("u", "r", "q", timeout=60)
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    asker = threading.Thread(target=ask)
    asker.start()
    assert entered.wait(10)
    rt.agent("u").set_private("big", "z" * 200_000)  # batch: applied, refused by storage; nobody told
    assert failed.wait(10)
    try:
        # only close() has the short call_timeout (for the busy 'r'): the set-up's commits may be slow
        with _short_call_timeout(rt, 0.5), pytest.raises(cf.JournalError):
            rt.close()  # its dead letter for the open request is refused: no caller hears that
    finally:
        gate.set()
        asker.join(10)
    assert isinstance(outcome[0], cf.RuntimeClosedError)


def test_close_from_a_behavior_leaves_an_unheard_failure_to_the_programs_close(tmp_path: Path) -> None:
    entered, gate, done = threading.Event(), threading.Event(), threading.Event()
    holder: list[cf.Runtime] = []

    class Closer:
        def on_message(self, ctx: Any, message: Any) -> None:  # noqa: ARG002
            entered.set()
            assert gate.wait(10)
            holder[0].close()  # returns at once; closes on a helper thread
            done.set()

    rt = cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config=CONFIG, behaviors={"c": Closer})
    holder.append(rt)
    failed = _note_failstop(rt)
    rt.spawn("c", behavior="c")
    rt.spawn("u")
    rt.flush()
    rt.bus.send("u", "c", "close")
    assert entered.wait(10)
    rt.agent("u").set_private("big", "z" * 200_000)  # batch: applied, refused by storage; nobody told
    assert failed.wait(10)
    gate.set()
    assert done.wait(10)
    # was: the helper thread's close() raised it into threading.excepthook, and this returned
    with pytest.raises(cf.JournalError):
        rt.close()


def test_close_raises_after_a_change_raised_the_failure_and_once_only(tmp_path: Path) -> None:
    """A refused change is one caller told; close() still says what else was lost, once."""
    rt = cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config=CONFIG)
    failed = _note_failstop(rt)
    agent = rt.spawn("a")
    rt.flush()
    agent.set_private("big", "z" * 200_000)  # batch: applied, refused by storage
    assert failed.wait(10)
    with pytest.raises(cf.JournalError):
        agent.set_private("small", 1)  # refused before it changes anything
    with pytest.raises(cf.JournalError):
        rt.close()
    rt.close()  # idempotent: the failure was raised once
