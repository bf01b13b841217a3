"""Session 57's review (helper h5): a Ctrl-C in the paths the session made interruptible.

A Ctrl-C is simulated deterministically, as in ``tests/test_notebook_s57_h3.py``: the
wait it would interrupt raises ``KeyboardInterrupt`` itself.

- A ``send`` interrupted while it waited for room in the journal writer's queue (before
  the writer had the message) kept its mailbox slot: the message counted as in flight
  for ever, and ``settle()`` timed out.
- A ``close()`` interrupted while it waited for the session ticker (a sweep under way)
  had not asked the session actor to stop yet, and its clean-up did not ask either: the
  actor lived on, and the next ``close()`` waited ``call_timeout`` for it in vain.
- A second Ctrl-C in an interrupted ``close()``'s clean-up left the journal open: the
  next ``close()`` returned, and the path could not be opened again.
- ``inspect_journal(skip_newer=True)`` counted a record of an older version that no
  upcaster reads as a newer one.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric._audit import inspect_journal
from cogfabric.actors import _memory, _runtime
from cogfabric.actors._writer import JournalWriter
from cogfabric.events import EVENT_TYPES, EventCodec, PrivateSet
from cogfabric.store import Journal, JournalRecordVersionError, LmdbJournal
from tests.actors.test_runtime import _PrivateSetV2

if TYPE_CHECKING:
    from pathlib import Path

WAIT = 10.0
SHORT = {"runtime": {"call_timeout": 1.0}}  # what the old code waited out in vain


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_send_interrupted_while_it_waits_for_the_writers_room_gives_its_slot_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str
) -> None:
    config = {**SHORT, "journal": {"durability": durability}}
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config=config) as rt:
        rt.spawn("a")
        writer = rt._core.writer
        assert writer is not None
        me, real = threading.get_ident(), JournalWriter._wait_for_room

        def wait_for_room(self: JournalWriter, **kwargs: bool) -> None:
            if threading.get_ident() == me:
                raise KeyboardInterrupt  # as a Ctrl-C while the sender waits for room
            real(self, **kwargs)

        monkeypatch.setattr(JournalWriter, "_wait_for_room", wait_for_room)
        monkeypatch.setattr(writer, "_backlog_max", 0)  # its queue is full
        with pytest.raises(KeyboardInterrupt):
            rt.bus.send("app", "a", "note", 1)
        monkeypatch.undo()
        assert (rt.stats().in_flight, rt.stats().queued) == (0, 0)
        rt.settle(WAIT)  # nothing waits: the message never reached the writer
        rt.bus.send("app", "a", "note", 2)
        rt.settle(WAIT)


def test_a_close_interrupted_while_it_waits_for_the_session_ticker_stops_the_session_actor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = cf.Runtime.open(tmp_path / "j", config=SHORT)  # the system clock: its session ticker runs
    rt.spawn("a").set_private("k", 1)
    session_actor, ticker = rt.memory.actor_thread, rt.memory._ticker
    assert session_actor is not None
    assert ticker is not None

    def join(timeout: float | None = None) -> None:  # noqa: ARG001
        raise KeyboardInterrupt  # as a Ctrl-C while close() waits for a sweep under way

    monkeypatch.setattr(ticker, "join", join)
    with pytest.raises(KeyboardInterrupt):
        rt.close()
    monkeypatch.undo()
    rt.close()  # the cell run again
    assert not session_actor.is_alive()  # asked to stop, and waited for
    ticker.join(WAIT)
    assert not ticker.is_alive()
    with cf.Runtime.open(tmp_path / "j") as reopened:
        assert reopened.agent("a").private("k") == 1


def test_a_close_interrupted_twice_leaves_the_next_close_to_close_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config=SHORT)
    rt.spawn("a").set_private("k", 1)

    def interrupted(*args: Any) -> None:  # noqa: ARG001
        raise KeyboardInterrupt

    # the first Ctrl-C while close() waits for the agents' threads (the writer has
    # stopped), the second in its clean-up
    monkeypatch.setattr(_runtime.Runtime, "_join_stopped_threads", interrupted)
    monkeypatch.setattr(_memory.MemoryManager, "_close_soon", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rt.close()
    monkeypatch.undo()
    rt.close()
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as reopened:
        assert reopened.agent("a").private("k") == 1


def test_inspect_skip_newer_refuses_an_older_record_that_no_upcaster_reads(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path, max_map_size=1 << 22) as opened:
        opened.append([PrivateSet(at=1.0, agent="a", key="k", value=1)])
    no_upcaster = EventCodec([_PrivateSetV2 if t is PrivateSet else t for t in EVENT_TYPES])
    with (
        LmdbJournal.open(path, codec=no_upcaster, readonly=True) as opened,
        pytest.raises(JournalRecordVersionError, match="not upgradable"),
    ):
        inspect_journal(opened, path, skip_newer=True)
