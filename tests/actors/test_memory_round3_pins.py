"""Session memory behaviours that a third mutation test of ``actors/_memory.py`` found no test held.

Aimed at the session actor's batches and reloads (``_run``, ``_journal_batch``,
``_recover``, ``_read_again``), its LRU bookkeeping (``_out_of_order``, the eviction a
new session makes) and retrieval. Each test says in its docstring what behaviour it
holds, and its comment names the mutant that every other session test let through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric.actors import FakeClock, Runtime
from cogfabric.events import SessionExpired

from .test_memory_pins import _journal, _Recording
from .test_session_bus_pins import TTL, _config, _gate_appends

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.events import Event


def _expiries(events: list[Event]) -> bool:
    return any(isinstance(e, SessionExpired) for e in events)


def test_a_sweep_whose_expiries_the_journal_refuses_answers_and_reloads_nothing(tmp_path: Path) -> None:
    """A refused batch of expiries (what reads and sweeps journal) does not reload the
    sessions from the journal: the sweep answers its count, and a read made since the
    last journaled access (within ``session_ttl / 10``, so not journaled) still counts."""
    # mutant: _journal_batch reloads after any refusal, also of a batch of reads' records alone
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        old = rt.memory.create_session("u")
        clock.advance(5)
        read = rt.memory.create_session("u")
        clock.advance(9)
        rt.memory.get_messages(read)  # 9 s after its creation: not journaled (ttl/10 is 10)
        clock.advance(TTL - 13)  # old is past its TTL; read lives until its read + TTL
        _gate_appends(rt, lambda _: False, refuses=_expiries)

        assert rt.memory.sweep() == 1

        clock.advance(5)  # past read's journaled access + TTL, not its live one
        assert [m.content for m in rt.memory.get_messages(read)] == ["New session started"]
        assert rt.memory.sessions() == [read]
        assert old not in rt.memory.sessions()


def test_after_a_reopen_sessions_used_at_one_time_still_expire_front_first(tmp_path: Path) -> None:
    """Sessions whose last accesses tie in time are in order (a clock that did not move
    is no clock that stepped back): after a reopen, a new session in a full memory takes
    only the room it needs, and leaves the other expired sessions to the sweep."""
    # mutant: _out_of_order counts two equal accesses as out of order (>=, not >)
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(max_sessions=3), clock=clock) as rt:
        for _ in range(3):
            rt.memory.create_session("u")
    with Runtime.open(tmp_path / "j", config=_config(max_sessions=3), clock=clock) as rt:
        clock.advance(TTL + 1)  # all three expired
        newest = rt.memory.create_session("u")
        assert rt.memory.sessions() == [newest]
        assert rt.memory.sweep() == 2


@pytest.mark.parametrize("read", ["build_prompt_messages", "build_context"])
def test_no_retriever_is_asked_without_a_query(tmp_path: Path, read: str) -> None:
    """Retrieval needs a query: the window's last user message (``build_prompt_messages``),
    or the input (``build_context``). Without one, no retriever is asked and no retrieved
    context is added."""
    # mutant: _relevant asks the retrievers for an empty query too
    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock()) as rt:
        retriever = _Recording()
        rt.memory.set_retrievers([retriever])
        session = rt.memory.create_session("u")
        rt.memory.add_message(session, "assistant", "no user message in this window")
        if read == "build_prompt_messages":
            window = rt.memory.build_prompt_messages(session)
            assert [m.role for m in window] == ["system", "assistant"]
        else:
            text = rt.memory.build_context("", session)
            assert text.startswith("Previous conversation history:")
        assert retriever.queries == []


def test_opening_journals_the_expiry_of_a_session_that_expired_while_closed(tmp_path: Path) -> None:
    """README: every open journals the expiry of the sessions that expired while it was
    closed, before any call, at the time of the open."""
    # mutant: the reload does not expire anything (killed before only by the random model test)
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        gone = rt.memory.create_session("u")
        clock.advance(TTL / 2)
        kept = rt.memory.create_session("u")
    clock.advance(TTL / 2 + 1)
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        rt.flush()
        expired = [r.event for r in _journal(rt).read() if isinstance(r.event, SessionExpired)]
        assert [(e.session, e.at) for e in expired] == [(gone, clock.now())]
        assert rt.memory.sessions() == [kept]
