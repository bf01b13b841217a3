"""A SIGTERM whose handler raises, held as a Ctrl-C is (README "From a notebook").

``docker stop`` and systemd send SIGTERM, then SIGKILL some seconds later. The command line
turns SIGTERM into an exception (``cogfabric.cli._on_sigterm`` raises ``_Terminated``, and
lets a second SIGTERM kill at once), and README has a program make it an exit
(``signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))``). Raised at any line, such an
exception could break the runtime as a Ctrl-C did before ``actors/_interrupt.py``: a lock
left taken (``close()`` then hangs until the SIGKILL, losing what batch durability had not
flushed), a spawned agent unreachable, a mailbox slot taken for good. A runtime opened on
the main thread while SIGTERM's handler is a Python function holds it as it holds SIGINT.

The sweep of ``tests/test_interrupt_sweep_s58_h1.py`` runs here with a SIGTERM in place of
the SIGINT, under either handler. The full sweep is slow (``pytest -m slow``); the default
suite runs every ``STRIDE``-th line of a few calls. A ``SystemExit`` that stops a spawn's or
a publication's wait for its commit leaves it as a Ctrl-C does (followed once stored), and
``cogfabric simulate`` stopped by SIGTERM exits 143 at once with a journal that verifies.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, NoReturn

import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric import cli
from cogfabric.actors import _interrupt
from cogfabric.actors._writer import Ack
from cogfabric.store import Journal
from tests import test_interrupt_sweep_s58_h1 as sweep
from tests.actors.test_supervision import _stall
from tests.test_interrupt_hold_s58_h1 import (  # autouse: Python's own SIGINT handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from types import FrameType

WAIT = 10.0
STRIDE = 37
"""The default suite's sample: every STRIDE-th landing (a prime, as the s58 sweep's)."""

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _exit_143(*_: object) -> NoReturn:
    """README's handler, ``lambda *_: sys.exit(143)``."""
    sys.exit(143)


HANDLERS: dict[str, Callable[[int, FrameType | None], Any]] = {"cli": cli._on_sigterm, "readme": _exit_143}


@pytest.fixture(autouse=True)
def _sigterm_as_found() -> Iterator[None]:
    """SIGTERM's default action as each test begins; then as found."""
    found = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, found)


class _Terminating(sweep._Landing):
    """The s58 sweep's landing, with a SIGTERM for its SIGINT."""

    def land(self) -> None:
        if callable(signal.getsignal(signal.SIGTERM)):  # never the default action: it kills pytest
            signal.raise_signal(signal.SIGTERM)


@contextlib.contextmanager
def _terminating(handler: str) -> Iterator[None]:
    """Run the s58 sweep with a SIGTERM under ``handler``, installed before each runtime opens."""
    installed = HANDLERS[handler]
    opened, ran = sweep._open, sweep._run

    def open_after_the_handler(path: Path, durability: str, name: str) -> cf.Runtime:
        # as the command line does for each command (its handler puts the default back once called)
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, installed)
        return opened(path, durability, name)

    def run(call: sweep._Call, rt: cf.Runtime, landing: sweep._Landing, problems: list[str]) -> None:
        try:
            ran(call, rt, landing, problems)  # catches the CLI's _Terminated, a KeyboardInterrupt
        except SystemExit as exc:  # README's handler's
            if not landing.fired or exc.code != 143:
                problems.append(f"{exc!r} with no SIGTERM")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sweep, "_Landing", _Terminating)
        patch.setattr(sweep, "_open", open_after_the_handler)
        patch.setattr(sweep, "_run", run)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with cli._sigterm_unwinds() if handler == "cli" else contextlib.nullcontext():
            if handler != "cli":
                signal.signal(signal.SIGTERM, installed)
            yield


def _sweep(handler: str, call: str, durability: str, directory: Path, stride: int = 1) -> sweep._Sweep:
    with _terminating(handler):
        return sweep._sweep(call, durability, directory, stride)


SWEPT = ["spawn", "send", "close"]
"""The default suite's calls (the slow sweep takes every call of the s58 sweep)."""


@pytest.mark.parametrize("handler", list(HANDLERS))
@pytest.mark.parametrize("call", SWEPT)
def test_a_sigterm_at_a_sample_of_lines_leaves_the_runtime_whole(
    handler: str, call: str, tmp_path: Path
) -> None:
    sweep._check(_sweep(handler, call, "batch", tmp_path, STRIDE))


@pytest.mark.slow
@pytest.mark.parametrize("durability", ["sync", "batch"])
@pytest.mark.parametrize("handler", list(HANDLERS))
@pytest.mark.parametrize("call", list(sweep.CALLS))
def test_a_sigterm_at_every_line_leaves_the_runtime_whole(
    handler: str, call: str, durability: str, tmp_path: Path
) -> None:
    sweep._check(_sweep(handler, call, durability, tmp_path))


def _held(steps: list[str]) -> None:
    with _interrupt.HELD:
        signal.raise_signal(signal.SIGTERM)
        steps.append("held")


def test_a_sigterm_in_a_held_section_is_raised_at_its_end() -> None:
    signal.signal(signal.SIGTERM, _exit_143)
    with cf.Runtime.open(None):
        assert signal.getsignal(signal.SIGTERM) is not _exit_143  # chained
        steps: list[str] = []
        with pytest.raises(SystemExit) as raised:
            _held(steps)
        assert steps == ["held"]
        assert raised.value.code == 143
        with pytest.raises(SystemExit):  # outside a held section: at once
            signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is _exit_143  # put back at the last close


def test_the_command_lines_handler_is_held_and_a_second_sigterm_still_kills_at_once() -> None:
    with cli._sigterm_unwinds():
        rt = cf.Runtime.open(None)
        try:
            steps: list[str] = []
            with pytest.raises(cli._Terminated):
                _held(steps)
            assert steps == ["held"]
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # as _on_sigterm left it
        finally:
            rt.close()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # not put back over it


@pytest.mark.parametrize("action", [signal.SIG_DFL, signal.SIG_IGN])
def test_a_sigterm_left_to_its_default_action_or_ignored_is_left_alone(action: signal.Handlers) -> None:
    signal.signal(signal.SIGTERM, action)
    with cf.Runtime.open(None):
        assert signal.getsignal(signal.SIGTERM) is action
    assert signal.getsignal(signal.SIGTERM) is action


def test_with_sigint_ignored_a_python_sigterm_handler_is_still_held() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_143)
    with cf.Runtime.open(None):
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        steps: list[str] = []
        with pytest.raises(SystemExit):
            _held(steps)
        assert steps == ["held"]
    assert signal.getsignal(signal.SIGTERM) is _exit_143


def _both(steps: list[str]) -> None:
    with _interrupt.HELD:
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGINT)
        steps.append("held")


def test_a_sigterm_and_a_ctrl_c_in_one_section_both_reach_their_handlers_the_sigterm_last() -> None:
    signal.signal(signal.SIGTERM, _exit_143)
    with cf.Runtime.open(None):
        steps: list[str] = []
        with pytest.raises(SystemExit) as raised:
            _both(steps)
        assert steps == ["held"]
        assert isinstance(raised.value.__context__, KeyboardInterrupt)
        assert _interrupt._pending is False


def _in_a_wait(steps: list[str]) -> None:
    with _interrupt.HELD:
        _interrupt.wait(signal.raise_signal, signal.SIGTERM)
        steps.append("after the wait")


def test_a_sigterm_while_a_section_waits_is_raised_at_once() -> None:
    # pins what a Ctrl-C does: a wait is never held (for a reply, room, settle(), a stop)
    signal.signal(signal.SIGTERM, _exit_143)
    with cf.Runtime.open(None):
        steps: list[str] = []
        with pytest.raises(SystemExit):
            _in_a_wait(steps)
        assert steps == []
        assert not _interrupt._waiting


def _sigterm_at_the_commit(monkeypatch: pytest.MonkeyPatch, entered: threading.Event) -> None:
    """A SIGTERM in the main thread's next ``Ack.wait``, once the writer is stalled on the commit."""
    real_wait = Ack.wait
    fired: list[None] = []

    def wait(self: Ack, timeout: float) -> list[int]:
        if threading.current_thread() is threading.main_thread() and not fired:
            fired.append(None)
            assert entered.wait(WAIT), "the writer never took the commit"
            signal.raise_signal(signal.SIGTERM)  # held by the call's section: raised as the wait begins
        return real_wait(self, timeout)

    monkeypatch.setattr(Ack, "wait", wait)


def test_a_spawn_whose_commit_a_sigterms_exit_stops_waiting_for_is_live_once_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a Ctrl-C there: the SystemExit was taken for the spawn's failure, its agent
    # stopped and its id let go, while the writer stored it (replay then had it).
    signal.signal(signal.SIGTERM, _exit_143)
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        entered = threading.Event()
        gate = _stall(rt, entered=entered)
        _sigterm_at_the_commit(monkeypatch, entered)
        with pytest.raises(SystemExit):
            rt.spawn("a")
        gate.set()
        rt.flush(WAIT)
        assert rt.agents() == ["a"]
        rt.agent("a").set_private("k", 1)
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        assert rt.agent("a").private("k") == 1


def test_a_publication_whose_commit_a_sigterms_exit_stops_waiting_for_reaches_its_agents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signal.signal(signal.SIGTERM, _exit_143)
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        agent = rt.spawn("a", task_id="t")
        entered = threading.Event()
        gate = _stall(rt, entered=entered)
        _sigterm_at_the_commit(monkeypatch, entered)
        with pytest.raises(SystemExit):
            rt.publish_task_context("t", {"goal": "x"})
        gate.set()
        rt.settle(WAIT)
        assert agent.task_context() == {"goal": "x"}  # as a reopen has it
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        assert rt.agent("a").task_context() == {"goal": "x"}


def test_simulate_opens_its_runtime_with_its_sigterm_handler_installed_and_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command installs its handler before the run opens the runtime: the runtime
    # chains to it, rather than the command's handler replacing the runtime's.
    seen: list[object] = []
    real_open = cf.Runtime.open

    def open_seen(*args: Any, **kwargs: Any) -> cf.Runtime:
        rt = real_open(*args, **kwargs)
        seen.append(signal.getsignal(signal.SIGTERM))
        return rt

    monkeypatch.setattr(cf.Runtime, "open", open_seen)
    result = CliRunner().invoke(
        cli.main, ["simulate", "--agents", "3", "--turns", "2", "--journal", str(tmp_path / "j")]
    )
    assert result.exit_code == 0, result.output
    assert seen != [cli._on_sigterm]  # the runtime's, chained to it
    assert seen == [_interrupt._on_signal]
    assert _interrupt._replaced[signal.SIGTERM] is cli._on_sigterm
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


_SIMULATE = """
import inspect, signal, sys
from cogfabric import cli
from cogfabric.actors import _agent

running = []

def advance(self, done, total):  # the run is under way: say so (progress shows on a terminal only)
    if done == 20:
        running.append(None)
        print("RUNNING", file=sys.stderr, flush=True)

cli._Progress._advance = advance
{landing}
cli.main(["simulate", "--agents", "8", "--turns", "1000000", "--durability", "batch",
          "--journal", sys.argv[1]])
"""

_AS_A_LOCK_IS_LET_GO = """
# The driver's 10th send once running: a SIGTERM on its way out of `with self._lock:` in
# MailboxSlots.acquire, the lock not yet let go (close() then waited for it for good).
code = _agent.MailboxSlots.acquire.__code__
source, first = inspect.getsourcelines(code)
at = first + next(n for n, line in enumerate(source) if "with self._lock:" in line)
entered, left = set(), []

def lines_of(frame, event, arg):
    if event == "line" and frame.f_lineno == at:
        if frame not in entered:
            entered.add(frame)
            return lines_of
        left.extend(running)
        if len(left) == 10:
            signal.raise_signal(signal.SIGTERM)
    return lines_of

sys.settrace(lambda frame, event, arg: lines_of if frame.f_code is code else None)
"""


def _simulate_until_running(path: Path, landing: str = "") -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _SIMULATE.format(landing=landing), str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    assert child.stderr is not None
    for line in child.stderr:
        if line == "RUNNING\n":
            return child
    child.kill()
    msg = f"the simulation ended before it ran: {child.communicate(timeout=WAIT)}"
    raise AssertionError(msg)


def _stopped_and_verified(child: subprocess.Popen[str], path: Path, *, since: float) -> None:
    """``child`` exits 143 within ``WAIT`` s of ``since``; the journal verifies and opens."""
    try:
        out, err = child.communicate(timeout=3 * WAIT)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate(timeout=WAIT)
        pytest.fail(
            f"simulate outlived its SIGTERM by {3 * WAIT} s (a SIGKILL loses what it has not flushed)"
        )
    took = time.monotonic() - since
    assert child.returncode == 143, (child.returncode, out, err)
    assert "terminated" in err
    assert took < WAIT, took
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify().ok
    with cf.Runtime.open(path):  # its agents recover
        pass


def test_simulate_stopped_by_sigterm_exits_143_promptly_and_its_journal_verifies(tmp_path: Path) -> None:
    # pins what docker stop and systemctl stop get, wherever the SIGTERM lands
    child = _simulate_until_running(tmp_path / "j")
    since = time.monotonic()
    child.send_signal(signal.SIGTERM)
    _stopped_and_verified(child, tmp_path / "j", since=since)


def test_simulate_stopped_by_a_sigterm_as_a_lock_is_let_go_exits_143_promptly(tmp_path: Path) -> None:
    # It kept a mailbox's lock: close() waited for it until the SIGKILL came, and batch
    # durability lost what it had not flushed.
    child = _simulate_until_running(tmp_path / "j", _AS_A_LOCK_IS_LET_GO)
    _stopped_and_verified(child, tmp_path / "j", since=time.monotonic())
