"""Session 60's mutation round on session 59's new code (helper h4): the tests that kill its gaps.

Each test names the mutant it kills: a plausible bug in the code session 59 added (all of
``actors/_interrupt.py``, a ``SystemExit`` in a bus call's waits, the failed thread starts
of ``start_actor_loop``, the journal's close, the lazy version) that every test before it
passed with. 65 mutants: 45 killed by the tests before these, 7 equivalent, 13 killed here.
Signals are real (``signal.raise_signal``); the SIGINT and SIGTERM handlers are put back as found.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import pykka
import pytest

import cogfabric as cf
from cogfabric import cli
from cogfabric.actors import _interrupt, _runtime
from cogfabric.actors._core import start_actor_loop
from cogfabric.actors._writer import Ack
from tests.actors.test_supervision import _stall
from tests.store.test_lmdb_journal import _read_within, _reap
from tests.test_interrupt_hold_s58_h1 import (  # autouse: Python's own SIGINT handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)
from tests.test_interrupt_sweep_s58_h1 import _Noted
from tests.test_mutation_s57_h10 import _ctrl_c_once_the_commit_is_over
from tests.test_review_s59_h4 import failed_starts as failed_starts  # noqa: PLC0414 - the fixture, used by name
from tests.test_sigterm_hold_s59_h1 import (  # autouse: SIGTERM's default action, then as found
    _sigterm_as_found as _sigterm_as_found,  # noqa: PLC0414
)
from tests.test_user_testing_s54_h8 import InMemoryJournal

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from types import FrameType

    from tests.test_review_s59_h4 import _FailedStarts

WAIT = 10.0
SHORT = {"runtime": {"call_timeout": 0.2}}

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


# --------------------------------------------------------------- actors/_interrupt.py


def _landing_here(seen: list[str]) -> None:
    with _interrupt.HELD:
        signal.raise_signal(signal.SIGINT)
        seen.append("held")


def test_a_held_signals_handler_gets_the_frame_it_landed_in() -> None:
    # mutant: _deliver passes the frame it delivers from (the section's end) for the one the
    # signal landed in: a debugger's SIGINT handler (pdb's set_trace(frame)) stopped in
    # _interrupt's own code rather than the caller's.
    frames: list[str] = []

    def handler(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
        frames.append(frame.f_code.co_name if frame is not None else "")

    signal.signal(signal.SIGINT, handler)
    with cf.Runtime.open(None):
        seen: list[str] = []
        _landing_here(seen)
    assert seen == ["held"]
    assert frames == ["_landing_here"]


def _cleaned_up_after_an_exit_in_a_wait(steps: list[str]) -> None:
    """A held section whose wait a SIGTERM's exit stops, and which cleans up after it."""
    with _interrupt.HELD:
        try:
            _interrupt.wait(signal.raise_signal, signal.SIGTERM)
        except SystemExit:
            steps.append("clean-up")  # held: a Ctrl-C comes once the section ends
            raise


def test_a_signal_landing_as_a_waits_handler_runs_is_held_through_the_sections_clean_up() -> None:
    # mutant: _on_signal leaves _waiting set while the handler it delivers to runs: a Ctrl-C
    # landing meanwhile was raised inside that handler, before its sys.exit, and the
    # section's clean-up for the exit (an interrupted request's letter, say) never ran.
    def exiting(signum: int, frame: FrameType | None) -> NoReturn:  # noqa: ARG001
        signal.raise_signal(signal.SIGINT)  # a Ctrl-C as the SIGTERM's handler runs
        sys.exit(143)

    signal.signal(signal.SIGTERM, exiting)
    steps: list[str] = []
    with cf.Runtime.open(None):
        with pytest.raises(KeyboardInterrupt) as raised:
            _cleaned_up_after_an_exit_in_a_wait(steps)
        assert steps == ["clean-up"]
        assert isinstance(raised.value.__context__, SystemExit)
        assert _interrupt._pending is False


def _fork_while_held(write_end: int, forked: list[int]) -> None:
    """Fork in a held section with a Ctrl-C held; the child writes whether it holds it too."""
    with _interrupt.HELD:
        signal.raise_signal(signal.SIGINT)
        assert _interrupt._pending
        forked.append(os.fork())
        if forked[0] == 0:  # the child: report, and leave without running anything of the parent's
            try:
                os.write(write_end, b"held!" if _interrupt._pending else b"clean")
            finally:
                os._exit(0)


def test_a_forked_child_drops_a_signal_its_parent_held() -> None:
    # mutant: _forked leaves _pending as the parent had it: a child forked while the parent
    # held a Ctrl-C got a KeyboardInterrupt for it at its own first section's end.
    read_end, write_end = os.pipe()
    forked: list[int] = []
    with cf.Runtime.open(None), pytest.raises(KeyboardInterrupt):  # the parent's: at its section's end
        _fork_while_held(write_end, forked)
    (pid,) = forked
    os.close(write_end)
    try:
        said = _read_within(read_end, 5)
    finally:
        os.close(read_end)
        assert os.waitstatus_to_exitcode(_reap(pid)) == 0
    assert said == b"clean"


# --------------------------------------------------------------- a SystemExit in a bus call's waits


def _exit_for_ctrl_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``KeyboardInterrupt`` that ``Ack.wait`` raises (as patched) made a SIGTERM handler's exit."""
    inner = Ack.wait

    def wait(self: Ack, timeout: float) -> list[int]:
        try:
            return inner(self, timeout)
        except KeyboardInterrupt:
            raise SystemExit(143) from None

    monkeypatch.setattr(Ack, "wait", wait)


def test_a_send_a_sigterms_exit_stops_just_as_its_commit_is_over_is_delivered_and_exits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mutant: _journal_message finishes the message itself after give_up() for a
    # KeyboardInterrupt only: the SystemExit was swallowed (ack.wait(0.0) returned) and
    # send() went on as if the program were not exiting.
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"noted": _Noted}) as rt:
        agent = rt.spawn("a", behavior="noted")
        outcome = _ctrl_c_once_the_commit_is_over(monkeypatch)
        _exit_for_ctrl_c(monkeypatch)
        with pytest.raises(SystemExit):
            rt.bus.send("app", "a", "note", 7)
        monkeypatch.undo()
        assert outcome == [None]  # stored
        rt.settle(WAIT)
        assert agent.private("got") == 7  # delivered, once
        assert rt.stats().in_flight == 0


def _exiting(*_: object, **__: object) -> NoReturn:
    raise SystemExit(143)


@pytest.mark.parametrize(("durability", "waits"), [("sync", "submit"), ("batch", "submit_nowait")])
def test_a_send_a_sigterms_exit_stops_before_the_writer_has_it_gives_its_slot_back(
    durability: str, waits: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mutants: _journal_message runs late(False) for a KeyboardInterrupt only, in the wait for
    # room in the writer's queue (its submit in sync durability, its journaling in batch): a
    # SystemExit there kept the message's mailbox slot for good (in flight, never delivered).
    config = {"journal": {"durability": durability}}
    with cf.Runtime.open(tmp_path / "j", behaviors={"noted": _Noted}, config=config) as rt:
        agent = rt.spawn("a", behavior="noted")
        monkeypatch.setattr(rt._core.writer, waits, _exiting)
        with pytest.raises(SystemExit):
            rt.bus.send("app", "a", "note", 7)
        monkeypatch.undo()
        assert rt.stats().in_flight == 0  # its slot given back
        rt.bus.send("app", "a", "note", 8)
        rt.settle(WAIT)
        assert agent.private("got") == 8


def test_a_request_whose_commit_times_out_says_so_in_its_letter_not_ctrl_c(tmp_path: Path) -> None:
    # mutant: a request's letter once its commit is stored says "Ctrl-C" whatever stopped the
    # wait for it: a timeout's said the requester was interrupted.
    with cf.Runtime.open(
        tmp_path / "j", clock=cf.FakeClock(), behaviors={"noted": _Noted}, config=SHORT
    ) as rt:
        rt.spawn("a", behavior="noted")
        gate = _stall(rt)
        with pytest.raises(cf.ActorTimeoutError):
            rt.bus.request("app", "a", "ask", 1, timeout=WAIT)
        gate.set()
        rt.settle(WAIT)
        (letter,) = rt.bus.dead_letters()
        assert letter.reason == "timeout"
        assert "did not acknowledge within 0.2 s" in letter.error
        assert "interrupted" not in letter.error


# --------------------------------------------------------------- start_actor_loop


class _Idle(pykka.ThreadingActor):
    pass


def test_every_ask_queued_to_an_actor_whose_start_failed_is_answered() -> None:
    # mutant: _answer_queued answers the first ask it finds and leaves the rest: their
    # callers (a stop_all, a broadcast) waited forever.
    actor = _Idle()
    pykka.ActorRegistry.register(actor.actor_ref)
    actor.actor_ref.tell("told")  # no one to answer
    asked = [actor.actor_ref.ask(n, block=False) for n in ("first", "second")]

    def start() -> None:
        raise MemoryError

    def capacity(running: int) -> Exception:  # pragma: no cover - not out of threads here
        return RuntimeError(running)

    with pytest.raises(MemoryError):
        start_actor_loop(actor, start, capacity)
    assert actor.actor_ref not in pykka.ActorRegistry.get_all()
    for future in asked:
        with pytest.raises(pykka.ActorDeadError):
            future.get(timeout=1.0)


def test_a_start_that_fails_with_another_runtime_error_raises_it_as_it_is(
    tmp_path: Path, failed_starts: Callable[[str, BaseException], _FailedStarts]
) -> None:
    # mutant: start_actor_loop takes every RuntimeError for a process out of threads: the
    # interpreter shutting down was told as AgentCapacityError ("out of threads").
    error = RuntimeError("can't create new thread at interpreter shutdown")
    starts = failed_starts("agent", error)
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        with pytest.raises(RuntimeError) as raised:
            rt.spawn("a")
        assert raised.value is error
        assert not isinstance(raised.value, cf.AgentCapacityError)
    assert starts.left_registered() == []


# --------------------------------------------------------------- a journal's close


def test_a_close_with_no_backup_under_way_delivers_a_held_ctrl_c_once_the_journal_is_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mutant: LmdbJournal._close makes its wait (where a held signal is raised) with no
    # backup under way too: a Ctrl-C held by close() was raised in the journal's close,
    # which left it open and locked (a reopen in this process refused) until another close().
    real = _runtime._close_journal

    def close_journal(journal: Any) -> None:
        signal.raise_signal(signal.SIGINT)  # held by close()'s section
        real(journal)

    rt = cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock())
    try:
        monkeypatch.setattr(_runtime, "_close_journal", close_journal)
        with pytest.raises(KeyboardInterrupt):
            rt.close()
        monkeypatch.undo()
        with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as reopened:
            assert reopened.agents() == []
    finally:
        rt.close()


def test_a_backend_whose_close_waits_for_nothing_is_closed_by_the_runtimes_hook() -> None:
    # mutant: Journal._close (the hook close() calls, for a backend without a backup) does
    # nothing: a runtime over such a backend left it open.
    journal = InMemoryJournal.open()
    waits: list[object] = []
    journal._close(lambda *args: waits.append(args))
    assert journal.closed
    assert waits == []


# --------------------------------------------------------------- the version


def test_the_version_is_read_from_the_distribution_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # mutant: __getattr__ returns _version() without keeping it: every read of __version__
    # searched the installed distributions again.
    from importlib import metadata  # noqa: PLC0415

    read: list[str] = []
    real = metadata.version

    def version(name: str) -> str:
        read.append(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version)
    monkeypatch.delitem(vars(cf), "__version__", raising=False)
    assert cf.__version__ == cf.__version__ == real("cogfabric")
    assert read == ["cogfabric"]


def test_version_prints_nothing_while_a_shell_completes_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # mutant: _print_version prints and exits during a shell's completion (click's
    # resilient parsing), as click's own version option does not: a completion of
    # "cogfabric --version <TAB>" printed the version and ended.
    with cli.main.make_context("cogfabric", ["--version"], resilient_parsing=True):
        pass
    assert capsys.readouterr().out == ""
