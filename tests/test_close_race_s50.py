"""A ``close()`` that lands in the middle of a read, as another thread's can.

The journal checks that it is open before it takes its lock; a ``close()`` by another
thread in between closed the LMDB environment under the read, whose refusal ("Attempt
to operate on closed/deleted/dropped object") came out as ``JournalUnavailableError``,
a storage failure, rather than the documented ``JournalClosedError``. And
``Runtime.last_checkpoint`` (and ``ctx.last_checkpoint``), racing ``close()``, raised the
journal's errors rather than the documented ``RuntimeClosedError``. A concurrency
stress of ``last_checkpoint`` against ``close()`` found both (about 1 in 100 closes).
Here the close is made to land at those points, deterministically.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

import cogfabric as cf
from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalClosedError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


class _CloseFirst:
    """A journal's lock whose first taking by ``caller`` finds ``close`` done a moment before."""

    def __init__(self, real: Any, close: Callable[[], object], caller: threading.Thread) -> None:
        self.real, self.close, self.caller, self.armed = real, close, caller, True

    def __enter__(self) -> object:
        if self.armed and threading.current_thread() is self.caller:
            self.armed = False
            self.close()  # another thread's close(), just before this thread takes the lock
        return self.real.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.real.__exit__(*exc)


READS: dict[str, Callable[[Journal], object]] = {
    "read": lambda j: list(j.read()),
    "read_back": lambda j: list(j.read_back("agent/a")),
    "read_stored": lambda j: list(j.read_stored()),  # type: ignore[attr-defined]
    "stream_start": lambda j: j.stream_start("agent/a"),
    "streams": lambda j: j.streams(),
    "load_snapshot": lambda j: j.load_snapshot("agent/a"),
    "seq_of": lambda j: j.seq_of("some-id"),  # type: ignore[attr-defined]
    "record_intact": lambda j: j.record_intact(1),
    "verify": lambda j: j.verify(),
    "info": lambda j: j.info(),  # type: ignore[attr-defined]
    "map_size": lambda j: j.map_size,  # type: ignore[attr-defined]
}


@pytest.mark.parametrize("name", list(READS))
def test_a_read_that_a_close_overtakes_raises_journal_closed_error(tmp_path: Path, name: str) -> None:
    journal = Journal.open(tmp_path / "j", sync=False)
    try:
        journal.append([PrivateSet(at=0.0, agent="a", key="k", value=1)])
        journal._lock = _CloseFirst(journal._lock, journal.close, threading.current_thread())  # type: ignore[attr-defined]
        with pytest.raises(JournalClosedError, match="is closed"):
            READS[name](journal)
    finally:
        journal.close()


class _Keeper:
    """A behavior that keeps its ``ctx``."""

    kept: ClassVar[Any] = None

    def on_message(self, ctx: Any, message: Any) -> str:  # noqa: ARG002
        _Keeper.kept = ctx
        return "kept"


@pytest.mark.parametrize("durability", ["sync", "batch"])
@pytest.mark.parametrize("caller", ["runtime", "ctx"])
@pytest.mark.parametrize("where", ["before the read", "in the read"])
def test_last_checkpoint_that_a_close_overtakes_raises_runtime_closed_error(
    tmp_path: Path, durability: str, caller: str, where: str
) -> None:
    config = {"journal": {"durability": durability}}
    rt = cf.Runtime.open(tmp_path / "j", config=config, behaviors={"keeper": _Keeper})
    try:
        rt.spawn("a", behavior="keeper").checkpoint_cognitive()
        rt.bus.request("a", "a", "keep", timeout=10.0)
        ctx = _Keeper.kept
        assert ctx is not None
        writer = rt._core.writer
        journal = rt._journal
        assert writer is not None
        assert journal is not None
        if where == "before the read":  # past the runtime's own check, before the journal's
            hand_over_and_flush = writer.hand_over_and_flush

            def flush_then_close(*args: Any) -> None:
                hand_over_and_flush(*args)
                rt.close()

            writer.hand_over_and_flush = flush_then_close  # type: ignore[method-assign, assignment]
        else:  # past the journal's check, before its read transaction
            journal._lock = _CloseFirst(journal._lock, rt.close, threading.current_thread())  # type: ignore[attr-defined]
        read = (lambda: rt.last_checkpoint("a")) if caller == "runtime" else ctx.last_checkpoint
        with pytest.raises(cf.RuntimeClosedError):
            read()
        assert rt.closed
    finally:
        rt.close()
        _Keeper.kept = None
