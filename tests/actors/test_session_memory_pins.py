"""Session memory behaviours that a second mutation test of ``actors/_memory.py`` found no test held.

Each test says in its docstring what user-visible behaviour it holds, and its comment
names the mutant that every other session test let through.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import pytest

from cogfabric.actors import Config, FakeClock, Runtime, RuntimeConfig, SessionNotFoundError
from cogfabric.events import Message, SessionExpired, SessionTouched
from cogfabric.store import JournalError

from .test_memory_pins import _journal
from .test_session_bus_pins import TTL, WAIT, _config
from .test_session_reload_reads import _queued_behind_a_held_write, _refused_add

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def runtime_clock(tmp_path: Path) -> Iterator[tuple[Runtime, FakeClock]]:
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        yield rt, clock


def test_a_runtime_reopened_with_fewer_max_sessions_evicts_down_to_the_limit_at_its_next_new_session(
    tmp_path: Path,
) -> None:
    """README: reopened with a smaller ``max_sessions``, every live session is kept until
    the next new one, which evicts the least recently used down to the limit at once."""
    # mutant: create_session evicts one session (``if``, not ``while``) when memory is full
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(max_sessions=3), clock=clock) as rt:
        a, b, c = (rt.memory.create_session("u") for _ in range(3))
    with Runtime.open(tmp_path / "j", config=_config(max_sessions=1), clock=clock) as rt:
        assert rt.memory.sessions() == [a, b, c]
        d = rt.memory.create_session("u")
        assert rt.memory.sessions() == [d]
        assert rt.memory.size() == 1


@pytest.mark.parametrize("user_id", ["a" + "€" * 74, "ab" + "😀" * 60, "é" * 100 + "x"])
def test_a_session_is_created_for_a_user_id_of_any_text_however_many_bytes(
    tmp_path: Path, user_id: str
) -> None:
    """A session's id holds the user id cut to fit the journal's 255-byte stream names.

    README: the user id is cut to 100 characters "as the session's stream name is
    bounded"; non-ASCII text is cut further, by whole characters, so that the stream
    name ``session/<id>`` is at most 255 UTF-8 bytes (the first id above would be 256).
    """
    # mutant: the user's part of a session id may take 223 bytes (not 222)
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        session = rt.memory.create_session(user_id)
        part = session.removeprefix("session_")[: -len("_0123456789abcdef")]
        assert user_id.startswith(part)
        assert len(f"session/{session}".encode()) <= 255
        # cut no further than it must: to 100 characters, or the next would not have fitted
        assert len(part) == 100 or len(f"session/{session}{user_id[len(part)]}".encode()) > 255
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        assert rt.memory.sessions() == [session]


def test_add_turn_message_tags_a_new_turn_when_a_window_not_yet_full_holds_a_turn_id(
    tmp_path: Path,
) -> None:
    """``add_turn_message`` looks at every message the window will keep beside the new one,
    also when the session holds fewer than ``max_history`` messages, and returns a turn id
    of ``turn-`` and 16 hex digits (its docstring)."""
    # mutants: the window's start taken without max(0, ...) (a negative index keeps only
    # the last messages); a turn id of 8 hex digits
    with Runtime.open(tmp_path / "j", config=_config(max_history=8), clock=FakeClock()) as rt:
        session = rt.memory.create_session("u")
        rt.memory.add_structured_message(session, Message(role="user", content="a", turn_id="t0"))
        rt.memory.add_message(session, "assistant", "b")
        rt.memory.add_message(session, "user", "c")
        rt.memory.add_message(session, "assistant", "d")  # 5 messages in a window of 8: t0 is in it

        turn = rt.memory.add_turn_message(session, "user", "e")

        assert re.fullmatch(r"turn-[0-9a-f]{16}", turn), turn
        assert [m.turn_id for m in rt.memory.get_messages(session)][-1] == turn


def test_a_read_refused_with_the_write_before_it_in_its_batch_does_not_count_for_recency(
    tmp_path: Path,
) -> None:
    """A read that got the refused write's error (README: the calls after it in its batch
    get it) leaves its session where it was in the least-recently-used order."""
    # mutant: the reload after the refusal refreshes the sessions of every read of the
    # batch, those after the write too
    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock()) as rt:
        a, b, holder_session = (rt.memory.create_session("u") for _ in range(3))
        write, read = _queued_behind_a_held_write(rt, holder_session, _refused_add(b), ("get_messages", (a,)))

        assert isinstance(write.error, JournalError)
        assert isinstance(read.error, JournalError)
        assert rt.memory.sessions() == [a, b, holder_session]


def test_a_read_that_finds_its_session_expired_leaves_nothing_for_the_sweep(
    runtime_clock: tuple[Runtime, FakeClock],
) -> None:
    """An expired session that a read reported missing is gone: a sweep counts only the
    sessions it removes, and the journal holds one expiry for it."""
    # mutant: the read journals the expiry but keeps the session, which the sweep expires again
    rt, clock = runtime_clock
    session = rt.memory.create_session("u")
    clock.advance(TTL + 1)
    with pytest.raises(SessionNotFoundError):
        rt.memory.get_messages(session)

    assert rt.memory.sweep() == 0
    rt.flush()
    assert [r.event.session for r in _journal(rt).read() if isinstance(r.event, SessionExpired)] == [session]


def test_a_write_is_one_record_and_counts_as_its_sessions_journaled_access(tmp_path: Path) -> None:
    """A message added is journaled as that message alone, and a read soon after it (within
    ``session_ttl / 10``) journals no access record: the write's record holds the access,
    and made the session its agent's latest, live and after a reopen."""
    # mutants: a write journals an access record too (``_live(touch=True)``); a journaled
    # write leaves the last journaled access where it was (``_accessed``); a write does
    # not make its session the agent's latest live
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        first = rt.memory.create_session("u", agent_id="x")
        rt.memory.create_session("u", agent_id="x")
        clock.advance(TTL / 5)
        rt.memory.add_message(first, "user", "first is x's latest now")
        clock.advance(1)
        rt.memory.get_messages(first)
        rt.flush()
        kinds = [type(r.event).__name__ for r in _journal(rt).read(stream=f"session/{first}")]
        assert kinds == ["SessionCreated", "SessionMessageAdded"]
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        clock.advance(1)
        rt.memory.get_messages(first)
        rt.flush()
        kinds = [type(r.event).__name__ for r in _journal(rt).read(stream=f"session/{first}")]
        assert kinds == ["SessionCreated", "SessionMessageAdded"]
        assert rt.memory.get_latest_session_for_agent("x") == first


def test_session_not_found_names_the_session(runtime_clock: tuple[Runtime, FakeClock]) -> None:
    """``SessionNotFoundError`` carries the id asked for (``session_id``) and names it."""
    # mutant: an unknown session's error is raised with an empty id
    rt, clock = runtime_clock
    expired = rt.memory.create_session("u")
    clock.advance(TTL + 1)
    for session in ("session_nobody_0", expired):
        with pytest.raises(SessionNotFoundError) as caught:
            rt.memory.get_messages(session)
        assert caught.value.session_id == session
        assert str(caught.value) == f"session not found: {session!r}"


def test_the_seed_message_carries_the_sessions_creation_time(
    runtime_clock: tuple[Runtime, FakeClock],
) -> None:
    """Spec §5.3: ``CreateSession`` seeds ``{system, "New session started", Time: now}``."""
    # mutant: the seed message is stored with time 0.0
    rt, clock = runtime_clock
    clock.advance(7)
    created = clock.now()
    session = rt.memory.create_session("u")
    clock.advance(3)

    (seed,) = rt.memory.get_messages(session)

    assert (seed.role, seed.content, seed.time) == ("system", "New session started", created)
    assert seed.time == rt.memory.get_session(session).created_at


def test_a_sweeps_expiries_carry_the_time_of_the_sweep(runtime_clock: tuple[Runtime, FakeClock]) -> None:
    """A sweep journals each expiry at the clock's reading when it ran, as a read that finds
    a session expired does (``SessionExpired.at``: when the session was taken out)."""
    # mutant: the sweep's expiry is journaled at the session's last access
    rt, clock = runtime_clock
    session = rt.memory.create_session("u")
    clock.advance(TTL + 5)

    assert rt.memory.sweep() == 1

    rt.flush()
    expired = [r.event for r in _journal(rt).read() if isinstance(r.event, SessionExpired)]
    assert [(e.at, e.session) for e in expired] == [(clock.now(), session)]


@pytest.mark.parametrize("time", [-1.0, 1e-9])
def test_a_structured_messages_own_time_is_kept_and_only_an_unset_one_filled(
    runtime_clock: tuple[Runtime, FakeClock], time: float
) -> None:
    """``add_structured_message`` fills ``time`` from the clock only when it is unset (0.0)."""
    # mutant: any time not above zero is replaced by the clock's
    rt, clock = runtime_clock
    session = rt.memory.create_session("u")
    rt.memory.add_structured_message(session, Message(role="user", content="dated", time=time))
    rt.memory.add_structured_message(session, Message(role="user", content="undated"))

    assert [m.time for m in rt.memory.get_messages(session)[1:]] == [time, clock.now()]


def test_closing_a_runtime_on_a_real_clock_stops_its_sweep_ticker_at_once() -> None:
    """``close()`` wakes the session ticker (which sleeps ``session_ttl / 2`` between sweeps)
    and waits for it to end: it takes nowhere near ``call_timeout``, and leaves no ticker."""
    # mutant: close() waits for the ticker (up to call_timeout) before it wakes it
    rt = Runtime.open(config=Config(runtime=RuntimeConfig(call_timeout=WAIT)))
    ticker = rt.memory._ticker
    assert ticker is not None
    assert ticker.is_alive()
    started = time.monotonic()

    rt.close()

    assert time.monotonic() - started < WAIT
    assert not ticker.is_alive()


def test_a_read_kept_by_the_reload_after_a_refused_write_is_journaled_once(tmp_path: Path) -> None:
    """A read that made its session its agent's latest, answered beside a write the journal
    refused, is journaled by the reload (README: a reopen then answers the same latest
    session); reading that session again soon after journals nothing more."""
    # mutant: the reload journals the kept read but does not note the session as its
    # agent's latest, so the next read journals it again
    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock()) as rt:
        first = rt.memory.create_session("u", agent_id="x")
        second = rt.memory.create_session("u", agent_id="x")
        read, write = _queued_behind_a_held_write(
            rt, second, ("get_messages", (first,)), _refused_add(second)
        )
        assert read.error is None
        assert isinstance(write.error, JournalError)

        rt.memory.get_messages(first)

        assert rt.memory.get_latest_session_for_agent("x") == first
        rt.flush()
        touched = [r.event.session for r in _journal(rt).read() if isinstance(r.event, SessionTouched)]
        assert touched == [first]
