"""Session memory and IPC bus behaviours that a third mutation test found no test held.

Found by hand-made mutants of ``actors/_memory.py`` and ``actors/_bus.py`` (a boundary
moved, a guard dropped, a copy or an increment removed), each run against the memory
and bus tests: each test here says in its docstring what user-visible behaviour it
holds, and its comment names the mutant that every other test let through.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from cogfabric.actors import (
    Config,
    FakeClock,
    JournalConfig,
    MailboxFullError,
    MemoryConfig,
    Runtime,
    RuntimeConfig,
    Snippet,
)
from cogfabric.events import IpcMessage, IpcSubscribed, Message, SessionMessageAdded, SessionTouched
from cogfabric.store import JournalError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cogfabric.events import Event
    from cogfabric.store import Journal

TTL = 100.0
WAIT = 10.0


def _config(**memory: object) -> Config:
    settings: dict[str, object] = {"session_ttl": TTL, **memory}
    return Config(memory=msgspec.convert(settings, MemoryConfig))


class _Gated:
    """A journal whose appends of the events ``holds`` picks wait for ``gate``, and of those
    ``refuses`` picks raise ``JournalError`` (the rest is the real journal's)."""

    def __init__(
        self, journal: Journal, holds: Any, gate: threading.Event, entered: threading.Event, refuses: Any
    ) -> None:
        self._journal, self._holds, self._gate, self._entered = journal, holds, gate, entered
        self._refuses = refuses

    def append(self, events: Sequence[Event], *args: Any, **kwargs: Any) -> list[int]:
        if self._holds(events):
            self._entered.set()
            assert self._gate.wait(WAIT), "the test never opened the gate"
        if self._refuses(events):
            msg = "refused at commit"
            raise JournalError(msg)
        return self._journal.append(events, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


def _gate_appends(
    rt: Runtime, holds: Any, refuses: Any = lambda _: False
) -> tuple[threading.Event, threading.Event]:
    """Hold the writer's appends of the events ``holds`` picks: (gate to open, set once one waits).

    ``refuses``: the appends of the events it picks are refused (a ``JournalError``).
    """
    writer = rt._core.writer
    assert writer is not None
    gate, entered = threading.Event(), threading.Event()
    writer._journal = _Gated(writer._journal, holds, gate, entered, refuses)  # type: ignore[assignment]
    return gate, entered


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# ------------------------------------------------------------------ session memory


def test_a_read_exactly_a_tenth_of_the_ttl_after_the_last_journaled_access_is_journaled(
    tmp_path: Path,
) -> None:
    """A read made ttl/10 after the last journaled access is journaled, so it counts after a reopen.

    Reads are journaled at most once per ttl/10; at exactly ttl/10 the read is recorded,
    and the reopened runtime keeps the session alive until that read plus the TTL.
    """
    # mutant: _live journals a read only when ``now - touched_at > ttl / 10`` (not >=)
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        session = rt.memory.create_session("u")
        clock.advance(TTL / 10)
        rt.memory.get_messages(session)
    clock.advance(TTL)  # exactly the TTL after that read: still alive (the boundary is exclusive)
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        assert rt.memory.sessions() == [session]
        assert [m.content for m in rt.memory.get_messages(session)] == ["New session started"]


def test_a_new_session_in_a_full_memory_takes_only_the_room_it_needs(tmp_path: Path) -> None:
    """Creating a session when ``max_sessions`` are held removes just one (the least recently used).

    The other expired sessions are left for the sweep, which removes and counts them.
    """
    # mutant: _op_create_session expires every expired session whenever memory is full
    # (not only after the wall clock stepped back)
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(max_sessions=3), clock=clock) as rt:
        for _ in range(3):
            rt.memory.create_session("u")
        clock.advance(TTL + 1)  # all three expired
        newest = rt.memory.create_session("u")
        assert rt.memory.sessions() == [newest]
        assert rt.memory.sweep() == 2


def _says(content: str) -> Any:
    """For ``_gate_appends``: a batch that adds a message saying ``content``."""
    return lambda events: any(
        isinstance(e, SessionMessageAdded) and e.message.content == content for e in events
    )


def test_a_read_answered_beside_a_refused_write_still_counts_for_recency(tmp_path: Path) -> None:
    """A session read in the same batch as a write the journal refused stays the most recently used.

    The refusal reloads the sessions from the journal, which never held that read; the
    read answered, so ``sessions()`` (and eviction) still put its session last.
    """
    # mutant: _read_again refreshes the read sessions' last access but not their LRU place
    clock = FakeClock()
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        a, b, c = (rt.memory.create_session("u") for _ in range(3))
        gate, entered = _gate_appends(rt, _says("hold"), refuses=_says("refused"))
        holder = threading.Thread(target=rt.memory.add_message, args=(c, "user", "hold"))
        holder.start()
        try:
            assert entered.wait(WAIT)  # the session actor waits for that commit: the next two queue
            read = rt.memory._queue_op("get_messages", (a,))
            write = rt.memory._queue_op("add", (b, Message(role="user", content="refused")))
        finally:
            gate.set()
        holder.join(WAIT)
        assert read.done.acquire(timeout=WAIT)
        assert write.done.acquire(timeout=WAIT)
        assert read.error is None
        assert isinstance(write.error, JournalError)
        assert rt.memory.sessions() == [b, c, a]


def test_in_sync_durability_a_read_does_not_wait_for_its_access_record(tmp_path: Path) -> None:
    """A read whose access is journaled answers at once: it does not wait for that record's commit.

    Only writes wait for durability; a batch of access records (recency only) is handed over.
    """
    # mutant: _journal_batch waits for a batch of SessionTouched records in sync durability
    clock = FakeClock()
    config = Config(memory=MemoryConfig(session_ttl=TTL), runtime=RuntimeConfig(call_timeout=2.0))
    with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:
        session = rt.memory.create_session("u")
        clock.advance(TTL / 10)  # the read's access is journaled
        gate, entered = _gate_appends(rt, lambda events: any(isinstance(e, SessionTouched) for e in events))
        try:
            rt.memory.get_messages(session)  # under the mutant: ActorTimeoutError after call_timeout
            assert entered.wait(WAIT)
        finally:
            gate.set()
        rt.flush()


class _Finds:
    """A retriever that finds one well-scored snippet for any query."""

    def retrieve(self, query: str) -> Sequence[Snippet]:
        return [Snippet("kb", f"about {query}", 0.9)]


def test_the_retrieved_context_message_carries_the_clocks_time(clock: FakeClock) -> None:
    """``build_prompt_messages``'s retrieved-context system message is stamped with the clock's time."""
    # mutant: the retrieved-context message's time is left 0.0
    with Runtime.open(config=_config(), clock=clock) as rt:
        session = rt.memory.create_session("u")
        clock.advance(5.0)
        rt.memory.add_message(session, "user", "what is up")
        clock.advance(7.0)
        rt.memory.set_retrievers([_Finds()])
        context, *_ = rt.memory.build_prompt_messages(session)
    assert context.role == "system"
    assert context.content == "Relevant context:\n[kb] about what is up\n"
    assert context.time == clock.now()


@pytest.mark.parametrize("retrievers", ["", b"", "kb"])
def test_set_retrievers_refuses_a_string_even_an_empty_one(retrievers: Any) -> None:
    """``set_retrievers`` raises ``TypeError`` for a str or bytes, as documented, even an empty one."""
    # mutant: only bytes is refused up front (an empty str then sets no retrievers silently)
    with (
        Runtime.open(clock=FakeClock()) as rt,
        pytest.raises(TypeError, match="retrievers is a sequence of retrievers"),
    ):
        rt.memory.set_retrievers(retrievers)


# ------------------------------------------------------------------ IPC bus


def test_an_empty_trace_starts_a_new_trace(tmp_path: Path) -> None:
    """``send`` and ``broadcast`` given ``trace=""`` start a new trace, as for None."""
    # mutant: _trace_of keeps an empty trace empty
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        rt.spawn("a")
        assert rt.bus.send("user", "a", "t", "x", trace="").trace_id
        rt.bus.broadcast("user", "news", "x", trace="")
        rt.flush()
        assert rt._journal is not None
        traces = [r.event.trace_id for r in rt._journal.read() if isinstance(r.event, IpcMessage)]
    assert len(traces) == 2
    assert all(traces)


def test_in_batch_durability_a_sent_message_returned_to_its_caller_is_its_own(tmp_path: Path) -> None:
    """A change to the payload of the message ``send`` returned does not change the journaled record.

    In batch durability the writer may still be encoding the message when ``send`` returns.
    """
    # mutant: _handed_back returns the journaled message itself in batch durability
    config = Config(journal=JournalConfig(durability="batch"))
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as rt:
        rt.spawn("a")
        gate, entered = _gate_appends(rt, lambda events: any(isinstance(e, IpcMessage) for e in events))
        try:
            sent = rt.bus.send("user", "a", "t", {"plan": [1, 2]})
            assert entered.wait(WAIT)
            sent.payload["plan"].append(3)
        finally:
            gate.set()
        rt.flush()
        assert rt._journal is not None
        (journaled,) = [r.event for r in rt._journal.read() if isinstance(r.event, IpcMessage)]
        assert journaled.payload == {"plan": [1, 2]}


class _ChangesItsRequest:
    """Appends to the payload of each request it handles, then answers "ok"."""

    def on_message(self, ctx: Any, message: IpcMessage) -> Any:  # noqa: ARG002
        message.payload["plan"].append(3)
        return "ok"


def test_in_batch_durability_a_behavior_that_changes_its_request_changes_no_journaled_record(
    tmp_path: Path,
) -> None:
    """A behavior gets its own copy of a request: changing its payload leaves the journal's record as sent.

    In batch durability the writer may still be encoding the request when it is delivered.
    """
    # mutant: _delivery hands the recipient the journaled message itself in batch
    # durability (own_copy = shared, not shared or not sync)
    config = Config(journal=JournalConfig(durability="batch"))
    behaviors = {"changes": _ChangesItsRequest}
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("a", behavior="changes")
        gate, entered = _gate_appends(rt, lambda events: any(isinstance(e, IpcMessage) for e in events))
        try:
            reply = rt.bus.request("user", "a", "q", {"plan": [1, 2]}, timeout=WAIT)
            assert reply.payload == "ok"
            assert entered.wait(WAIT)
        finally:
            gate.set()
        rt.flush()
        assert rt._journal is not None
        events = [r.event for r in rt._journal.read()]
        (journaled,) = [e for e in events if isinstance(e, IpcMessage) and e.kind == "request"]
        assert journaled.payload == {"plan": [1, 2]}


def test_subscriptions_made_at_once_keep_their_order_across_a_reopen(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Two agents subscribing while the journal is busy are listed in the same order after a reopen.

    Each subscription takes its own order when made; the reopened runtime lists
    ``subscribers`` as the live one did, not in the agents' spawn order.
    """
    # mutant: IpcBus._take_order does not advance the next order (only a journaled
    # subscription's index update does), so both subscriptions share one order
    path = tmp_path / "j"
    with Runtime.open(path, clock=FakeClock()) as rt:
        rt.spawn("b")  # spawned first: a reopen breaks a tie of orders in b's favour
        rt.spawn("a")
        taken = threading.Semaphore(0)
        real_take = rt.bus._take_order

        def take_order() -> int:
            try:
                return real_take()
            finally:
                taken.release()

        monkeypatch.setattr(rt.bus, "_take_order", take_order)
        gate, entered = _gate_appends(rt, lambda events: any(isinstance(e, IpcSubscribed) for e in events))
        threads = [threading.Thread(target=rt.bus.subscribe, args=(agent, "t")) for agent in ("a", "b")]
        try:
            threads[0].start()
            assert entered.wait(WAIT)  # a's subscription is journaling
            threads[1].start()
            assert taken.acquire(timeout=WAIT)
            assert taken.acquire(timeout=WAIT)  # b took its order too, before a's is indexed
        finally:
            gate.set()
        for thread in threads:
            thread.join(WAIT)
        live = rt.bus.subscribers("t")
    assert live == ["a", "b"]
    with Runtime.open(path, clock=FakeClock()) as reopened:
        assert reopened.bus.subscribers("t") == live


class _HeldOpen:
    """Holds its first message until ``gate`` opens (``entered`` says it got there)."""

    def __init__(self, entered: threading.Event, gate: threading.Event) -> None:
        self.entered, self.gate = entered, gate

    def on_message(self, ctx: Any, message: IpcMessage) -> Any:  # noqa: ARG002
        self.entered.set()
        assert self.gate.wait(6 * WAIT)  # past the request's own timeout: its mailbox stays full


def test_a_request_to_a_full_mailbox_waits_for_room_no_longer_than_call_timeout() -> None:
    """A request's wait for room in a full mailbox is bounded by ``call_timeout`` when that is shorter.

    ``request``: "MailboxFullError: to's mailbox stayed full for timeout (or call_timeout, if shorter)".
    """
    # mutant: _request admits the request with its own timeout alone
    entered, gate = threading.Event(), threading.Event()
    config = Config(runtime=RuntimeConfig(call_timeout=0.5, mailbox_size=1))
    behaviors = {"held": lambda: _HeldOpen(entered, gate)}
    with Runtime.open(config=config, clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("s", behavior="held")
        try:
            rt.bus.send("u", "s", "first")
            assert entered.wait(WAIT)
            rt.bus.send("u", "s", "second")  # the mailbox is full now
            began = time.monotonic()
            with pytest.raises(MailboxFullError):
                rt.bus.request("u", "s", "q", timeout=3 * WAIT)
            assert time.monotonic() - began < WAIT  # call_timeout (0.5 s), not the request's 30 s
        finally:
            gate.set()
