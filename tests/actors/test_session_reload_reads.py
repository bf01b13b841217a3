"""A session read beside a refused write is expired by the reload though the read just answered it."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from cogfabric.actors import FakeClock, Runtime
from cogfabric.events import Message
from cogfabric.store import JournalError

from .test_session_bus_pins import TTL, WAIT, _config, _gate_appends, _says

if TYPE_CHECKING:
    from pathlib import Path


def test_a_session_read_beside_a_refused_write_is_not_expired_by_the_reload(tmp_path: Path) -> None:
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        a = rt.memory.create_session("u")
        clock.advance(TTL / 10 - 1)
        rt.memory.get_messages(a)  # within ttl/10 of its creation: not journaled (by design)
        b, c = rt.memory.create_session("u"), rt.memory.create_session("u")
        clock.advance(TTL - 4)  # a lives until creation + ttl/10 - 1 + ttl; the journal says creation + ttl
        gate, entered = _gate_appends(rt, _says("hold"), refuses=_says("refused"))
        holder = threading.Thread(target=rt.memory.add_message, args=(c, "user", "hold"))
        holder.start()
        try:
            assert entered.wait(WAIT)
            read = rt.memory._queue_op("get_messages", (a,))
            write = rt.memory._queue_op("add", (b, Message(role="user", content="refused")))
        finally:
            gate.set()
        holder.join(WAIT)
        assert read.done.acquire(timeout=WAIT)
        assert write.done.acquire(timeout=WAIT)
        assert read.error is None  # the read answered: a was live, read at creation + 105
        assert isinstance(write.error, JournalError)
        rt.memory.get_messages(a)  # was SessionNotFoundError: the reload expired a before the read counted
