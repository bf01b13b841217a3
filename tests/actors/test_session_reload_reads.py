"""The reads of a batch whose write the journal refuses, across the reload that follows.

The reads answered, so the live runtime keeps their sessions' accesses; the reload
applies them before it expires anything, and journals the access records the refused
batch lost (``SessionTouched``), so that a reopen finds what the live runtime holds.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from cogfabric.actors import FakeClock, Runtime
from cogfabric.events import Message
from cogfabric.store import JournalError

from .test_session_bus_pins import TTL, WAIT, _config, _gate_appends, _says

if TYPE_CHECKING:
    from pathlib import Path


def _queued_behind_a_held_write(
    rt: Runtime, holder_session: str, *ops: tuple[str, tuple[Any, ...]]
) -> list[Any]:
    """Run ``ops`` as one batch of the session actor, queued while a write of ``holder_session``
    holds the writer; a message saying "refused" is refused by the journal. Returns them done."""
    gate, entered = _gate_appends(rt, _says("hold"), refuses=_says("refused"))
    holder = threading.Thread(target=rt.memory.add_message, args=(holder_session, "user", "hold"))
    holder.start()
    try:
        assert entered.wait(WAIT)
        queued = [rt.memory._queue_op(name, args) for name, args in ops]
    finally:
        gate.set()
    holder.join(WAIT)
    for op in queued:
        assert op.done.acquire(timeout=WAIT)
    return queued


def _refused_add(session: str) -> tuple[str, tuple[Any, ...]]:
    return ("add", (session, Message(role="user", content="refused")))


def test_a_session_read_beside_a_refused_write_is_not_expired_by_the_reload(tmp_path: Path) -> None:
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        a = rt.memory.create_session("u")
        clock.advance(TTL / 10 - 1)
        rt.memory.get_messages(a)  # within ttl/10 of its creation: not journaled (by design)
        b, c = rt.memory.create_session("u"), rt.memory.create_session("u")
        clock.advance(TTL - 4)  # a lives until creation + ttl/10 - 1 + ttl; the journal says creation + ttl
        read, write = _queued_behind_a_held_write(rt, c, ("get_messages", (a,)), _refused_add(b))
        assert read.error is None  # the read answered: a was live, read at creation + 105
        assert isinstance(write.error, JournalError)
        rt.memory.get_messages(a)  # was SessionNotFoundError: the reload expired a before the read counted


def _read_beside_a_refused_write(rt: Runtime, read: str, written: str, holder_session: str) -> None:
    read_op, write_op = _queued_behind_a_held_write(
        rt, holder_session, ("get_messages", (read,)), _refused_add(written)
    )
    assert read_op.error is None
    assert isinstance(write_op.error, JournalError)


def test_a_kept_read_keeps_its_session_alive_after_a_reopen_as_live(tmp_path: Path) -> None:
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        a, b, c = (rt.memory.create_session("u") for _ in range(3))
        clock.advance(TTL / 2)  # a read now is journaled (>= ttl/10 since the last record)
        _read_beside_a_refused_write(rt, a, b, c)
        clock.advance(TTL * 0.6)  # live: a was read TTL*0.6 ago, b never since its creation
        assert a in rt.memory.sessions()
        assert b not in rt.memory.sessions()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        # was: a expired on reopen (its journaled access is its creation, 1.1 ttl ago)
        assert a in rt.memory.sessions()


def test_a_kept_read_that_made_its_session_the_agents_latest_answers_so_after_a_reopen(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        first = rt.memory.create_session("u", agent_id="g")
        second = rt.memory.create_session("u", agent_id="g")
        other, holder = rt.memory.create_session("u"), rt.memory.create_session("u")
        assert rt.memory.get_latest_session_for_agent("g") == second
        _read_beside_a_refused_write(rt, first, other, holder)
        live = rt.memory.get_latest_session_for_agent("g")
        assert live == first
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        # was: second (the read that made first g's latest was never journaled)
        assert rt.memory.get_latest_session_for_agent("g") == live


def test_a_session_the_reload_keeps_for_a_read_is_there_after_a_reopen_too(tmp_path: Path) -> None:
    """The commit's own case (the journal's times show it expired; the read answered it): a
    reopen at once finds it as the live runtime keeps it (before the fix that kept it, the
    reload expired it live and in the journal alike)."""
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        a = rt.memory.create_session("u")
        clock.advance(TTL / 10 - 1)
        rt.memory.get_messages(a)  # not journaled (within ttl/10)
        b, c = rt.memory.create_session("u"), rt.memory.create_session("u")
        clock.advance(TTL - 4)
        _read_beside_a_refused_write(rt, a, b, c)
        live = a in rt.memory.sessions()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        assert (a in rt.memory.sessions()) == live


def test_a_read_queued_behind_a_refused_write_in_one_batch_gets_that_writes_error(tmp_path: Path) -> None:
    """The batch's calls after the write the journal refused get its error, reads too (documented)."""
    with Runtime.open(tmp_path / "j", config=_config(), clock=FakeClock()) as rt:
        a, b, holder_session = (rt.memory.create_session("u") for _ in range(3))
        before, write, after = _queued_behind_a_held_write(
            rt, holder_session, ("get_messages", (a,)), _refused_add(b), ("get_messages", (a,))
        )
        assert before.error is None
        assert isinstance(write.error, JournalError)
        assert isinstance(after.error, JournalError)
        assert [m.content for m in rt.memory.get_messages(b)] == ["New session started"]
