"""A call's state after a Ctrl-C, and a method label warned of once (session 64, helper h3).

``JournaledLLM._call`` makes each call's state (its session, output, clock reading)
its thread's, and puts the caller's back when the call ends. A Ctrl-C lands where the
interpreter checks for signals: one that lands in ``contextlib``'s ``__enter__`` once
the call's generator has made its state the thread's (the check after ``next()``
returns) leaves that generator open, not run to its end, until its traceback is freed.
Closing it then put the caller's state back on whatever thread freed it: the garbage
collector, run within another call on that thread, replaced that call's state, and its
output's record named no session (or another call's). And a provider that called its
client within its answer and went on after such a Ctrl-C left its own call's records
the interrupted call's blank state: they named no session. The interrupt is injected
at that check by a trace function, where the signal would land.

A provider whose ``name`` is a method was warned of once per class, unless two threads
made their first call at once: both saw it unwarned, and both warned.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any

from cogfabric import FakeClock, InvalidArgumentError, Runtime, ScriptedProvider
from cogfabric.actors import _llm
from cogfabric.events import LlmOutputRecorded, PromptRejected

from .test_llm_nesting_s63_h1 import _in_thread
from .test_llm_pins import _events

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from types import FrameType

    import pytest

    from cogfabric import JournaledLLM

_WAIT = 5.0
"""Seconds a thread is waited for (it takes milliseconds)."""

_ENTER = contextlib._GeneratorContextManager.__enter__.__code__


def _interrupted_as_it_starts(llm: JournaledLLM, call: Callable[[], object]) -> KeyboardInterrupt:
    """``call()`` interrupted in ``__enter__`` once its call state is this thread's."""
    outer: list[object] = []  # the thread's state as __enter__ is called
    fired: list[bool] = []

    def local(frame: FrameType, event: str, arg: object) -> Any:  # noqa: ARG001 - sys.settrace's
        current = getattr(llm._calls, "current", None)
        if event == "opcode" and not fired and current is not outer[0]:
            fired.append(True)
            raise KeyboardInterrupt
        return local

    def tracer(frame: FrameType, event: str, arg: object) -> Any:  # noqa: ARG001 - sys.settrace's
        if event == "call" and frame.f_code is _ENTER and not outer:
            frame.f_trace_opcodes = True
            outer.append(getattr(llm._calls, "current", None))
            return local
        return None

    kept = sys.gettrace()
    sys.settrace(tracer)
    try:
        call()
    except KeyboardInterrupt as exc:
        assert fired  # the interrupt is this one, not the user's
        return exc
    finally:
        sys.settrace(kept)
    msg = "the call was not interrupted"
    raise AssertionError(msg)


def _turn_sessions(path: Path) -> list[str | None]:
    return [e.session for e in _events(path) if isinstance(e, LlmOutputRecorded)]


def test_an_interrupted_calls_state_freed_within_another_threads_turn_leaves_that_turn_its_session(
    tmp_path: Path,
) -> None:
    held: list[object] = []

    def script(prompt: str) -> str:
        if "collect" in prompt:
            held.clear()
            gc.collect()  # the garbage collector frees the interrupted call's traceback here
        return "answer"

    with Runtime.open(tmp_path / "j", llm_provider=ScriptedProvider(script), clock=FakeClock()) as rt:
        llm = rt.llm()
        exc = _interrupted_as_it_starts(llm, lambda: llm.generate("first"))
        held.append([exc, held])  # kept in a cycle: only the collector frees it
        del exc
        session = rt.memory.create_session("u")

        assert _in_thread(lambda: llm.turn(session, "please collect")) == ["answer"]
        rt.flush()

    # Before: the other thread's turn lost its state as the generator closed there: None.
    assert _turn_sessions(tmp_path / "j") == [session]


def test_an_interrupted_nested_call_leaves_both_turns_their_sessions(tmp_path: Path) -> None:
    held: list[object] = []
    holder: list[JournaledLLM] = []

    def script(prompt: str) -> str:
        if "outer" in prompt:  # a provider that asks its client a sub-question, interrupted as it starts
            llm = holder[0]
            held.append([_interrupted_as_it_starts(llm, lambda: llm.generate("inner")), held])
            return "outer answer"
        if "collect" in prompt:
            held.clear()
            gc.collect()
        return "answer"

    with Runtime.open(tmp_path / "j", llm_provider=ScriptedProvider(script), clock=FakeClock()) as rt:
        llm = rt.llm()
        holder.append(llm)
        first = rt.memory.create_session("u")
        second = rt.memory.create_session("u")
        assert llm.turn(first, "outer") == "outer answer"

        assert _in_thread(lambda: llm.turn(second, "please collect")) == ["answer"]
        rt.flush()

    # Before: the outer turn's record named no session (the nested call's blank state was the
    # thread's), and the second turn's named the first session once the generator closed there.
    assert _turn_sessions(tmp_path / "j") == [first, second]


def test_an_interrupted_nested_calls_state_freed_before_a_refusal_leaves_it_naming_no_session(
    tmp_path: Path,
) -> None:
    # The collector may run anywhere in a call: here before the gate refuses (no provider called).
    held: list[object] = []
    holder: list[JournaledLLM] = []

    class Collects:
        """No prompt: the gate's ``isinstance`` reads its ``__class__``, and the collector runs."""

        @property  # type: ignore[misc]
        def __class__(self) -> type:
            held.clear()
            gc.collect()
            return object

    def script(prompt: str) -> str:  # noqa: ARG001 - every call is the outer one
        llm = holder[0]
        held.append([_interrupted_as_it_starts(llm, lambda: llm.generate("inner")), held])
        return "outer answer"

    with Runtime.open(tmp_path / "j", llm_provider=ScriptedProvider(script), clock=FakeClock()) as rt:
        llm = rt.llm()
        holder.append(llm)
        session = rt.memory.create_session("u")
        assert llm.turn(session, "outer") == "outer answer"

        (refused,) = _in_thread(lambda: llm.generate(Collects()))  # type: ignore[arg-type]
        assert isinstance(refused, InvalidArgumentError)
        rt.flush()

    rejected = [e for e in _events(tmp_path / "j") if isinstance(e, PromptRejected)]
    # Before: the refusal named the session of the turn the interrupted call was made in.
    assert [(e.reason, e.session) for e in rejected] == [("not_text", None)]


# ---------------------------------------------------------------- a method label, warned of once


class _Reads:
    """A ``name`` that is a method, telling when each of ``threads`` has read it."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.readers: set[str] = set()
        self.lock = threading.Lock()
        self.all_read = threading.Event()

    def __get__(self, provider: object, owner: type | None = None) -> Callable[[], str]:
        name = threading.current_thread().name
        if name.startswith("labels-"):
            with self.lock:
                self.readers.add(name)
                if len(self.readers) == self.threads:
                    self.all_read.set()
        return lambda: "vendor"


class _MethodName:
    name = _Reads(2)
    model = "m"

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        return "ok"


class _SlowFirstCheck(set[str]):
    """The first check of a label waits until both threads have read it: both are first."""

    def __init__(self, reads: _Reads) -> None:
        super().__init__()
        self.reads = reads
        self.checked = False

    def __contains__(self, item: object) -> bool:
        seen = super().__contains__(item)
        if not self.checked:
            self.checked = True
            self.reads.all_read.wait(_WAIT)
        return seen


def test_two_threads_first_calls_at_once_warn_of_a_method_name_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    labels: weakref.WeakKeyDictionary[type, set[str]] = weakref.WeakKeyDictionary()
    reads: _Reads = _MethodName.__dict__["name"]
    labels[_MethodName] = _SlowFirstCheck(reads)
    monkeypatch.setattr(_llm, "_CALLABLE_LABELS", labels)
    start = threading.Barrier(2, timeout=_WAIT)
    answers: list[str] = []

    with (
        caplog.at_level(logging.WARNING, logger="cogfabric"),
        Runtime.open(tmp_path / "j", llm_provider=_MethodName(), clock=FakeClock()) as rt,
    ):
        llm = rt.llm()

        def ask() -> None:
            start.wait()
            answers.append(llm.generate("hello"))

        threads = [threading.Thread(target=ask, name=f"labels-{i}", daemon=True) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(_WAIT)
        assert not any(t.is_alive() for t in threads)

    assert answers == ["ok", "ok"]
    assert reads.all_read.is_set()  # both threads read it before either was marked
    warned = [r.getMessage() for r in caplog.records if "is a method, not a value" in r.getMessage()]
    assert len(warned) == 1, warned  # before: twice, once a thread
    assert "name" in warned[0]
