"""Thousands of short runs in one process: what the actors leave behind (a helper's leak hunt).

A run that fails to open because the process cannot start one more thread (the journal
writer's, the session actor's) left a never-started actor in ``pykka.ActorRegistry``,
one more each time, and ``ActorRegistry.stop_all()`` then waited for it forever; and a
closed runtime kept every session's messages, for as long as anything held it (an agent
handle kept in a sweep's results, an llm client, the bus).
"""

from __future__ import annotations

import gc
import threading
import tracemalloc
from typing import TYPE_CHECKING

import pykka
import pytest

import cogfabric as cf

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("journaled", [True, False])
def test_an_actor_thread_that_cannot_start_leaves_no_registered_actor(
    tmp_path: Path, journaled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first thread an open starts is the journal writer's (journaled) or the session
    # actor's (memory only), the second the session actor's (journaled). Each start that
    # fails is pthread_create's "can't start new thread", as in a process at its limit.
    real_start = threading.Thread.start
    for budget in (0, 1) if journaled else (0,):
        left = [budget]

        def start(thread: threading.Thread, left: list[int] = left) -> None:
            if left[0] <= 0:
                msg = "can't start new thread"
                raise RuntimeError(msg)
            left[0] -= 1
            real_start(thread)

        monkeypatch.setattr(threading.Thread, "start", start)
        with pytest.raises(cf.RuntimeCapacityError, match="cannot start the thread of the ") as caught:
            cf.Runtime.open(tmp_path / f"j{budget}" if journaled else None, clock=cf.FakeClock())
        assert isinstance(caught.value, RuntimeError)  # what threading raises, too
        assert caught.value.thread == ("journal writer" if journaled and budget == 0 else "session actor")
        assert caught.value.running >= 1
        monkeypatch.setattr(threading.Thread, "start", real_start)
        assert pykka.ActorRegistry.get_all() == []
    pykka.ActorRegistry.stop_all(block=True, timeout=5)  # returns: no actor without a thread to answer


def test_a_closed_runtime_kept_by_a_handle_keeps_no_session() -> None:
    def run() -> cf.Agent:
        rt = cf.Runtime.open(None, clock=cf.FakeClock())
        handle = rt.spawn("a")
        for _ in range(20):
            session = rt.memory.create_session("u", agent_id="a")
            rt.memory.add_message(session, "user", "x" * 50_000)
        rt.close()
        return handle

    run()
    gc.collect()
    tracemalloc.start()
    try:
        kept = [run() for _ in range(3)]
        gc.collect()
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kept) == 3
    assert size < 3 * 200 * 1024, f"{size / 3:.0f} bytes kept by each closed runtime a handle holds"
