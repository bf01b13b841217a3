"""The held Ctrl-C (``actors/_interrupt.py``): where the handler is installed, what a hold does.

Each test sends itself a real SIGINT (``signal.raise_signal``, whose handler runs at once
on the main thread) and puts the process's SIGINT handler back as it found it.
"""

from __future__ import annotations

import signal
import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors import _interrupt
from tests.actors.test_supervision import _stall
from tests.test_notebook_s57_h3 import _ctrl_c_at_the_commit, _Noted

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from types import FrameType

WAIT = 10.0


@pytest.fixture(autouse=True)
def _sigint_as_found() -> Iterator[None]:
    """Python's own SIGINT handler, installed by no runtime, as each test begins; then as found."""
    found, installs = signal.getsignal(signal.SIGINT), _interrupt._installs
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _interrupt._installs = 0
    yield
    signal.signal(signal.SIGINT, found)
    _interrupt._installs = installs


def test_a_runtime_opened_on_the_main_thread_chains_to_the_handler_it_replaced() -> None:
    rt = cf.Runtime.open(None)
    try:
        installed = signal.getsignal(signal.SIGINT)
        assert installed is not signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):  # outside a held section: delivered at once
            signal.raise_signal(signal.SIGINT)
    finally:
        rt.close()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_handler_is_put_back_when_the_last_runtime_closes() -> None:
    first, second = cf.Runtime.open(None), cf.Runtime.open(None)
    installed = signal.getsignal(signal.SIGINT)
    first.close()
    assert signal.getsignal(signal.SIGINT) is installed  # the second is still open
    second.close()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_handler_installed_after_open_is_left_alone_and_called_directly() -> None:
    got: list[int] = []

    def own(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
        got.append(signum)

    rt = cf.Runtime.open(None)
    try:
        signal.signal(signal.SIGINT, own)
        with _interrupt.HELD:  # not held: the program's own handler runs, not the runtime's
            signal.raise_signal(signal.SIGINT)
            assert got == [signal.SIGINT]
    finally:
        rt.close()
    assert signal.getsignal(signal.SIGINT) is own


def test_a_runtime_opened_on_another_thread_installs_nothing() -> None:
    opened: list[cf.Runtime] = []
    handlers: list[Any] = []

    def open_here() -> None:
        opened.append(cf.Runtime.open(None))
        handlers.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=open_here)
    thread.start()
    thread.join(WAIT)
    try:
        assert handlers == [signal.default_int_handler]
    finally:
        opened[0].close()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_sigint_stays_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with cf.Runtime.open(None):
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def _nested(done: list[str]) -> None:
    with _interrupt.HELD:
        with _interrupt.HELD:  # nested: delivered at the outermost end only
            signal.raise_signal(signal.SIGINT)
            done.append("inner")
        done.append("outer")


def test_a_sigint_in_a_held_section_is_raised_at_its_end() -> None:
    with cf.Runtime.open(None):
        done: list[str] = []
        with pytest.raises(KeyboardInterrupt):
            _nested(done)
        assert done == ["inner", "outer"]


def _failing() -> None:
    with _interrupt.HELD:
        signal.raise_signal(signal.SIGINT)
        msg = "the section's own error"
        raise ValueError(msg)


def test_a_held_sigint_comes_with_the_error_in_flight_as_its_context() -> None:
    with cf.Runtime.open(None):
        with pytest.raises(KeyboardInterrupt) as raised:
            _failing()
        assert isinstance(raised.value.__context__, ValueError)


def _held_then_waits(steps: list[str]) -> None:
    with _interrupt.HELD:
        signal.raise_signal(signal.SIGINT)
        steps.append("held")
        _interrupt.wait(steps.append, "waited")  # not reached: delivered as the wait begins


def _interrupted_in_a_wait(steps: list[str]) -> None:
    with _interrupt.HELD:
        _interrupt.wait(signal.raise_signal, signal.SIGINT)  # in the wait: raised there, at once
        steps.append("after")


def test_a_held_sigint_is_delivered_as_a_wait_begins_and_one_during_it_is_not_held() -> None:
    with cf.Runtime.open(None):
        steps: list[str] = []
        with pytest.raises(KeyboardInterrupt):
            _held_then_waits(steps)
        assert steps == ["held"]
        with pytest.raises(KeyboardInterrupt):
            _interrupted_in_a_wait(steps)
        assert steps == ["held"]
        assert not _interrupt._waiting


def test_a_hold_on_another_thread_changes_nothing() -> None:
    depths: list[int] = []

    def hold_there() -> None:
        with _interrupt.HELD:
            depths.append(_interrupt._depth)

    thread = threading.Thread(target=hold_there)
    thread.start()
    thread.join(WAIT)
    assert depths == [0]


def test_a_request_interrupted_at_its_commit_says_so_in_its_dead_letter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The requester was interrupted: the letter does not say the journal failed to answer.
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"noted": _Noted}) as rt:
        rt.spawn("a", behavior="noted")
        entered = threading.Event()
        gate = _stall(rt, entered=entered)
        _ctrl_c_at_the_commit(monkeypatch, entered)
        with pytest.raises(KeyboardInterrupt):
            rt.bus.request("app", "a", "ask", 1, timeout=WAIT)
        gate.set()
        rt.settle(WAIT)
        (letter,) = rt.bus.dead_letters()
        assert letter.reason == "timeout"
        assert "interrupted" in letter.error
        assert "did not acknowledge" not in letter.error


class _Registering(dict[str, Any]):
    """The bus's pending requests, where a Ctrl-C lands just as a request is registered."""

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        raise KeyboardInterrupt


def test_a_request_interrupted_as_it_is_registered_is_not_left_pending(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"noted": _Noted}) as rt:
        rt.spawn("a", behavior="noted")
        bus = rt.bus
        bus._pending = _Registering()
        with pytest.raises(KeyboardInterrupt):
            bus.request("app", "a", "ask", 1, timeout=WAIT)
        assert not bus._pending
        bus._pending = {}
    # not lettered "closed" by close(): it was never sent, nor is anyone waiting for it
    assert rt.bus.dead_letters() == []
