"""Session memory behaviours that a fourth mutation test of ``actors/_memory.py`` found no test held.

Aimed at what the session actor journals for a read or a new session after the wall
clock stepped back, at each agent's latest session as sessions end, and at the time an
eviction carries. Each test says in its docstring what behaviour it holds, and its
comment names the mutant that every other session test let through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cogfabric.actors import FakeClock, Runtime
from cogfabric.events import SessionEvicted, SessionExpired

from .test_memory import SteppingClock
from .test_memory_pins import _journal, _touches
from .test_session_bus_pins import TTL, _config
from .test_session_reload_reads import _read_beside_a_refused_write

if TYPE_CHECKING:
    from pathlib import Path


def test_a_new_session_with_room_left_expires_nothing_even_after_the_clock_stepped_back(
    tmp_path: Path,
) -> None:
    """A new session evicts or expires others only when memory is full, also once the wall
    clock stepped back (which makes a full memory expire every expired session first):
    with room left, its creation is all it journals, and the expired ones are the sweep's."""
    # mutant: _op_create_session expires every expired session whenever the clock stepped
    # back, full or not (``if self._clock_went_back:``)
    clock = SteppingClock()
    start = clock.wall
    with Runtime.open(tmp_path / "j", config=_config(max_sessions=3), clock=clock) as rt:
        old = rt.memory.create_session("u")
        clock.wall = start - 10  # stepped back
        assert rt.memory.size() == 1  # the session actor reads the clock: it went back
        clock.wall = start + TTL + 1  # old expired

        new = rt.memory.create_session("u")

        rt.flush()
        assert not any(isinstance(r.event, SessionExpired) for r in _journal(rt).read())
        assert rt.memory.sweep() == 1
        assert rt.memory.sessions() == [new]
        assert old not in rt.memory.sessions()


def test_ending_another_session_of_an_agent_leaves_its_latest_session_unjournaled_on_read(
    tmp_path: Path,
) -> None:
    """A read of the agent's latest session is journaled only when due (``session_ttl / 10``
    since its last record) or when it makes the session the agent's latest; deleting
    another, older session of that agent changes neither, so the read journals nothing."""
    # mutant: _remove forgets the agent's latest session whichever of its sessions ends
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        older = rt.memory.create_session("u", agent_id="g")
        latest = rt.memory.create_session("u", agent_id="g")
        rt.memory.delete_session(older)
        clock.advance(TTL / 10 - 1)

        rt.memory.get_messages(latest)

        assert _touches(rt) == []
        assert rt.memory.get_latest_session_for_agent("g") == latest


def test_a_write_while_the_clock_stands_back_does_not_make_the_next_read_due_for_a_record(
    tmp_path: Path,
) -> None:
    """A write made while the wall clock stands back moves no session's last journaled
    access back: a read within ``session_ttl / 10`` of the latest journaled access (here
    the creation, ahead of the clock) journals nothing."""
    # mutant: apply_session_event's access sets ``touched_at = at`` (not the later of the two)
    clock = SteppingClock()
    start = clock.wall
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        clock.wall = start + 50
        session = rt.memory.create_session("u")  # journaled at +50
        clock.wall = start + 20  # stepped back
        rt.memory.add_message(session, "user", "written at +20")
        clock.wall = start + 31  # 11 s after the write's time, 19 s before the creation's

        rt.memory.get_messages(session)

        assert _touches(rt) == []
        assert rt.memory.get_session(session).accessed_at == start + 50


def test_the_reload_after_a_refused_write_moves_no_read_sessions_last_access_back(tmp_path: Path) -> None:
    """A read beside a write the journal refuses counts after the reload that follows, but
    a read made while the wall clock stands back moves no last access back: the session's
    journaled later access stands."""
    # mutant: _read_again sets ``state.accessed_at = at`` (not the later of the two)
    clock = SteppingClock()
    start = clock.wall
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        read, written, holder = (rt.memory.create_session("u") for _ in range(3))
        clock.wall = start + 50
        rt.memory.add_message(read, "user", "journaled at +50")
        clock.wall = start + 20  # stepped back

        _read_beside_a_refused_write(rt, read, written, holder)

        assert rt.memory.get_session(read).accessed_at == start + 50
        clock.wall = start + 50 + TTL  # exactly the TTL after its last access: still live
        assert read in rt.memory.sessions()


def test_an_eviction_made_by_a_new_session_carries_the_time_of_that_session(tmp_path: Path) -> None:
    """The ``SessionEvicted`` record a new session makes in a full memory carries the time
    of the eviction (the new session's creation), as a sweep's expiries carry the sweep's."""
    # mutant: the eviction's record carries the evicted session's last access
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(max_sessions=1), clock=clock) as rt:
        evicted = rt.memory.create_session("u")
        clock.advance(7)

        rt.memory.create_session("u")

        rt.flush()
        records = [r.event for r in _journal(rt).read() if isinstance(r.event, SessionEvicted)]
        assert [(e.session, e.at) for e in records] == [(evicted, clock.now())]
