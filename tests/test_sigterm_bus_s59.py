"""A SIGTERM handler's ``sys.exit`` stopping a bus call's wait is handled as a Ctrl-C there.

README's advice for a program stopped by SIGTERM (``signal.signal(signal.SIGTERM,
lambda *_: sys.exit(143))``, installed before the runtime opens) makes a ``SystemExit``
in whatever the main thread waits for. In a ``send``'s wait for its commit it was taken
for a refusal, although the writer stored the message: the journal had it sent and the
recipient never got it. In a ``request``'s waits it left no letter saying why nobody
took the reply.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import TYPE_CHECKING

import pytest

import cogfabric as cf
from tests.actors.test_supervision import _stall
from tests.test_interrupt_hold_s58_h1 import (  # autouse: Python's own SIGINT handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)
from tests.test_interrupt_sweep_s58_h1 import _Noted
from tests.test_sigterm_hold_s59_h1 import (  # autouse: SIGTERM's default action, then as found
    _exit_143,
    _sigterm_at_the_commit,
)
from tests.test_sigterm_hold_s59_h1 import (
    _sigterm_as_found as _sigterm_as_found,  # noqa: PLC0414
)

if TYPE_CHECKING:
    from pathlib import Path

WAIT = 10.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def test_a_send_whose_commit_a_sigterms_exit_stops_waiting_for_is_delivered_once_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signal.signal(signal.SIGTERM, _exit_143)
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"noted": _Noted}) as rt:
        rt.spawn("a", behavior="noted")
        entered = threading.Event()
        gate = _stall(rt, entered=entered)
        _sigterm_at_the_commit(monkeypatch, entered)
        with pytest.raises(SystemExit):
            rt.bus.send("app", "a", "note", 7)
        gate.set()
        rt.settle(WAIT)
        assert rt.agent("a").private("got") == 7  # as the journal has it sent
        assert rt.bus.dead_letters() == []
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"noted": _Noted}) as rt:
        assert rt.agent("a").private("got") == 7


def test_a_request_a_sigterms_exit_stops_at_its_commit_leaves_a_letter_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signal.signal(signal.SIGTERM, _exit_143)
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"noted": _Noted}) as rt:
        rt.spawn("a", behavior="noted")
        entered = threading.Event()
        gate = _stall(rt, entered=entered)
        _sigterm_at_the_commit(monkeypatch, entered)
        with pytest.raises(SystemExit):
            rt.bus.request("app", "a", "ask", 1, timeout=WAIT)
        gate.set()
        rt.settle(WAIT)
        (letter,) = rt.bus.dead_letters()
        assert letter.reason == "timeout"
        assert "request interrupted" in letter.error
        assert "the program exiting while waiting for its commit" in letter.error
        assert rt.agent("a").private("got") is None  # not delivered: nobody waits for its reply


class _Exiting:
    """Answers nothing: raises SIGTERM in the main thread while the requester waits for it."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)


def test_a_request_a_sigterms_exit_stops_at_its_reply_leaves_a_letter_saying_so(tmp_path: Path) -> None:
    signal.signal(signal.SIGTERM, _exit_143)
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"exiting": _Exiting}) as rt:
        rt.spawn("a", behavior="exiting")
        with pytest.raises(SystemExit):
            rt.bus.request("app", "a", "ask", 1, timeout=WAIT)
        rt.settle(WAIT)
        (letter,) = rt.bus.dead_letters()
        assert letter.reason == "timeout"
        assert "the program exiting while waiting for its reply" in letter.error
