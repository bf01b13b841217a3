"""Session memory (spec §4, §5): one session actor owns every session; ``MemoryManager`` is its face.

Semantics follow README's "Where cogfabric differs", not the original where they
differ: every access, read or write, refreshes a session's last access; an expired
session is never returned or revived; the least recently used session is evicted only
when a new one would exceed ``max_sessions``; a sweep removes every expired session.
Each of these is journaled.

Like the journal writer, the session actor drains every operation waiting for it,
runs them in order, journals their events in one submission, and answers them all
once it is durable (in sync durability), so callers share commits.
"""

from __future__ import annotations

import _thread
import collections
import contextlib
import inspect
import itertools
import logging
import math
import os
import queue
import threading
import time
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

import msgspec
import pykka

from cogfabric.events import (
    ROLE_ASSISTANT,
    ROLE_SYSTEM,
    ROLE_TOOL_CALL,
    ROLE_TOOL_RESULT,
    ROLE_USER,
    Event,
    InvalidEventError,
    Message,
    SessionCreated,
    SessionDeleted,
    SessionEvent,
    SessionEvicted,
    SessionExpired,
    SessionMessageAdded,
    SessionTouched,
)
from cogfabric.events._codec import require_str, validated
from cogfabric.store import JournalError

from . import _interrupt
from ._cleaner import CleanOptions, clean, clean_with_turns, with_ellipsis
from ._clock import MAX_WAIT, bounded_wait
from ._core import start_actor_loop, start_thread, thread_name
from ._errors import (
    STOPPED_FROM_OUTSIDE,
    ActorTimeoutError,
    AgentCheckpointNotSupportedError,
    RuntimeCapacityError,
    RuntimeClosedError,
    SessionNotFoundError,
    UserCodeError,
)
from ._memory_config import DEFAULT_RAG_MIN_SCORE
from ._writer import Ack, error_copy

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from cogfabric.store import Journal

    from ._core import Core

__all__ = [
    "MemoryManager",
    "Retriever",
    "SessionData",
    "SessionState",
    "Snippet",
    "apply_session_event",
]

log = logging.getLogger(__name__)

SEED_MESSAGE: Final = "New session started"
_DRAIN: Final = "drain"
_CONTEXT_LINE: Final = 100
_DEFAULT_CLEAN: Final = CleanOptions()


class Snippet(msgspec.Struct, frozen=True):
    """One piece of retrieved context."""

    source: str
    content: str
    score: float


def _checked_snippet(snippet: object) -> Snippet | None:
    """``snippet`` if it is a ``Snippet`` of the declared types (a retriever's result is not trusted).

    None for one whose score is NaN: it is below every minimum score, as the original's
    ``score >= min`` filter finds it, so it alone is left out.

    Raises:
        TypeError: it is not a Snippet, its source or content is not a str, or its score
            is not a real number (a bool is not one).

    """
    if not isinstance(snippet, Snippet):
        msg = f"a retriever must return Snippets, got {type(snippet).__name__}"
        raise TypeError(msg)
    score = snippet.score
    if not (isinstance(snippet.source, str) and isinstance(snippet.content, str)):
        msg = "a Snippet's source and content must be str"
        raise TypeError(msg)
    if isinstance(score, bool) or not isinstance(score, int | float):
        msg = f"a Snippet's score must be a number, got {type(score).__name__}"
        raise TypeError(msg)
    if score != score:  # noqa: PLR0124 - NaN: it would sort anywhere
        log.debug("a retriever's snippet from %r scored NaN; it is left out", snippet.source)
        return None
    return snippet


MAX_PARALLEL_RETRIEVERS: Final = 4
"""Retrievers that run at once for one prompt, as in the original."""


def _retrieve(retriever: Retriever, query: str) -> Sequence[Snippet]:
    """What ``retriever.retrieve(query)`` returns, refused if it is a coroutine.

    Raises:
        TypeError: ``retrieve`` is async: nothing would await it (closed, so that it
            does not warn it was never awaited).

    """
    snippets = retriever.retrieve(query)
    if inspect.iscoroutine(snippets):
        snippets.close()
        msg = "its retrieve is async: it runs on a thread of its own, which would never await it"
        raise TypeError(msg)
    return snippets


def _retrieved(retriever: Retriever, query: str) -> list[Snippet]:
    """One retriever's checked snippets; [] (logged) when it fails."""
    try:
        return [kept for kept in map(_checked_snippet, _retrieve(retriever, query)) if kept is not None]
    except BaseException:  # CancelledError, sys.exit() too: the caller's call goes on without it
        # A warning, as for one that does not answer in time: the prompt is built all the
        # same. Named by its type, not its repr (which could show a client's credentials).
        log.warning(
            "a retriever (%s) failed; the prompt goes on without it",
            type(retriever).__qualname__,
            exc_info=True,
        )
        return []


class _Overdue:
    """One session memory's retriever runs still going past their callers' deadlines."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        """Guards ``runs`` and every call's own state (``_run_retrievers``)."""
        self.runs: collections.Counter[int] = collections.Counter()
        """By retriever id: how many of its runs are overdue (one alive keeps the id unique)."""


def _run_retrievers(
    retrievers: Sequence[Retriever], query: str, timeout: float, overdue: _Overdue, runtime: str
) -> list[list[Snippet]]:
    """Each retriever's snippets, in the retrievers' order; at most four run at once.

    On daemon threads, so that one that never returns holds up neither this caller
    (past ``timeout``) nor the interpreter's exit; it is logged and left out. Its thread
    goes on until it returns, counted in ``overdue`` (shared by every call of one session
    memory): a retriever with a run overdue is skipped (logged) until every such run has
    returned, so one that hangs holds the threads of the calls that met it, not one more
    for each prompt built after. ``runtime``: the name its threads carry (``Runtime.name``).
    """
    results: list[list[Snippet] | None] = [None] * len(retrievers)
    running: set[int] = set()  # indexes of the retrievers a worker is in
    todo = iter(enumerate(retrievers))
    lock, runs = overdue.lock, overdue.runs
    over = False  # past the deadline: start no other retriever

    def work() -> None:
        while True:
            with lock:
                item = None if over else next(todo, None)
                while item is not None and runs[id(item[1])]:
                    item = next(todo, None)  # a run of it is overdue: left out
                if item is None:
                    return
                running.add(item[0])
            index, retriever = item
            found = _retrieved(retriever, query)
            with lock:
                running.discard(index)
                if not over:
                    results[index] = found
                elif runs[id(retriever)] <= 1:  # counted overdue when the caller left without it
                    del runs[id(retriever)]
                else:
                    runs[id(retriever)] -= 1

    with lock:
        free = sum(1 for r in retrievers if not runs[id(r)])
    workers = [
        threading.Thread(target=work, name=thread_name("cogfabric-retriever", runtime), daemon=True)
        for _ in range(min(MAX_PARALLEL_RETRIEVERS, free))
    ]
    for worker in workers:
        start_thread(worker, "retriever", runtime)
    deadline = time.monotonic() + bounded_wait(timeout, 0.0)
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    with lock:
        over = True
        runs.update(id(retrievers[index]) for index in running)
        answered = list(results)
    late = answered.count(None)
    if late:
        log.warning(
            "%d of %d %s did not answer within %s s, or %s still running for an earlier "
            "prompt; the prompt goes on without %s",
            late,
            len(answered),
            "retriever" if len(answered) == 1 else "retrievers",
            timeout,
            "was" if late == 1 else "were",
            "it" if late == 1 else "them",
        )
    return [result for result in answered if result is not None]


@runtime_checkable
class Retriever(Protocol):
    """An optional source of context for prompts (RAG); none is set by default."""

    def retrieve(self, query: str) -> Sequence[Snippet]:
        """Snippets relevant to ``query``."""
        ...


class SessionState(msgspec.Struct, kw_only=True):
    """One session, as the session actor holds it and replay rebuilds it."""

    id: str
    user_id: str
    agent_id: str | None = None
    messages: list[Message] = []
    created_at: float = 0.0
    accessed_at: float = 0.0
    touched_at: float = 0.0
    """When the last access was journaled (touches are journaled coarsely)."""


def _own_copies(messages: Iterable[Message]) -> list[Message]:
    """``messages`` with lists of their own: changing what a caller got changes nothing stored.

    A message's other fields cannot change; its ``tool_calls`` and ``artifact_refs``
    are lists. Done on the caller's thread, off the session actor's.
    """
    replace = msgspec.structs.replace
    return [replace(m, tool_calls=list(m.tool_calls), artifact_refs=list(m.artifact_refs)) for m in messages]


class SessionData(msgspec.Struct, frozen=True, kw_only=True):
    """A copy of one live session, as ``MemoryManager.get_session`` returns it.

    The original's ``SessionData``, without its ``Context`` map, which nothing fills.
    """

    session_id: str
    user_id: str
    agent_id: str | None
    """The agent the session was created for (``create_session(..., agent_id=)``), or None."""
    messages: list[Message]
    """Every message, oldest first (the seed message too)."""
    created_at: float
    accessed_at: float
    """The last access, this one included (clock seconds)."""


_SESSION_ID_PART_BYTES: Final = 222  # "session/session_" + part + "_" + 16 hex <= 255 stream bytes


def _id_part(user_id: str) -> str:
    """The user's part of a new session id: at most its first 100 characters.

    The original puts the whole user id in; a session's id is part of its stream's name,
    which the journal bounds (255 bytes), so the part is cut to 100 characters, and
    further, by whole characters, where non-ASCII text would still make the name too
    long; NUL (which no stream name may hold) is left out.
    """
    part = user_id[:100].replace("\0", "")
    while len(part.encode()) > _SESSION_ID_PART_BYTES:
        part = part[:-1]
    return part


_ENDINGS: Final[dict[type[Event], str]] = {
    SessionDeleted: "deleted",
    SessionExpired: "expired",
    SessionEvicted: "evicted",
}
"""The records that end a session, by what ``SessionNotFoundError.reason`` calls them."""

_ENDED_KEPT: Final = 4096
"""The sessions that ended latest whose ending the memory keeps (``SessionNotFoundError.reason``)."""


def _last_event(journal: Journal, stream: str) -> tuple[int, Event | None]:
    """The seq and event of ``stream``'s last record ((0, None) for none): one record read."""
    head = journal.stream_head(stream)
    last = next(iter(journal.read(after=head - 1, until=head, stream=stream)), None)
    return head, None if last is None else last.event


def session_end(journal: Journal, stream: str) -> int:
    """The seq of the record that deleted, expired or evicted the session of ``stream``; 0 while it lives.

    One record read: recovery skips such a stream rather than replaying it whole, and a
    tail verification need not start at its first record.
    """
    head, last = _last_event(journal, stream)
    return head if type(last) in _ENDINGS else 0


def _accessed(state: SessionState, at: float) -> None:
    """A journaled access at ``at``: a wall clock that stepped back moves no last access back."""
    state.accessed_at = max(state.accessed_at, at)
    state.touched_at = max(state.touched_at, at)


def apply_session_event(state: SessionState | None, event: Event) -> SessionState | None:
    """Return a session's state after ``event``; None once it is deleted, expired or evicted."""
    match event:
        case SessionCreated():
            seed = [event.seed] if event.seed is not None else []
            return SessionState(
                id=event.session,
                user_id=event.user_id,
                agent_id=event.agent_id,
                messages=seed,
                created_at=event.at,
                accessed_at=event.at,
                touched_at=event.at,
            )
        case _ if state is None:
            return None
        case SessionMessageAdded():
            state.messages.append(event.message)
            _accessed(state, event.at)
        case SessionTouched():
            _accessed(state, event.at)
        case SessionDeleted() | SessionExpired() | SessionEvicted():
            return None
    return state


class _Op:
    """One queued operation; its caller waits on a bare lock the actor releases."""

    __slots__ = ("args", "cause", "done", "error", "name", "result", "unwaited")

    def __init__(
        self, name: str, args: tuple[Any, ...], *, unwaited: bool = False, cause: str | None = None
    ) -> None:
        self.name = name
        self.args = args
        self.unwaited = unwaited
        """Nobody waits for it (``_add_later``): its error is logged."""
        self.cause = cause
        """The message the caller's agent handles (``ctx.memory``): the cause of what it journals."""
        self.done = _thread.allocate_lock()
        self.done.acquire()
        self.result: Any = None
        self.error: BaseException | None = None

    def finish(self) -> None:
        """Wake its caller; for an unwaited one (a timed-out turn's answer), log what became of it."""
        if self.unwaited and isinstance(self.error, ActorTimeoutError):
            log.debug("the answer of a turn that timed out goes into its session once stored")
        elif self.unwaited and self.error is not None:
            log.warning(
                "the answer of a turn that timed out was not added to session %r: %r",
                self.args[0],
                self.error,
            )
        self.done.release()


class SessionActor(pykka.ThreadingActor):
    """Owns every session; runs the operations waiting for it in batches."""

    use_daemon_thread = True  # as AgentActor's

    @staticmethod
    def _create_actor_inbox() -> Any:  # noqa: ANN401 - Pykka's ActorInbox protocol
        # The C SimpleQueue, as the agents': a put is one C call, so a Ctrl-C in the main
        # thread cannot land inside it. Pykka's default queue.Queue wakes its reader in
        # Python (Condition.notify), where an interrupt can lose the wake-up for good
        # (CPython issue 92530): the doorbell would then never ring again.
        return queue.SimpleQueue()

    def __init__(self, manager: MemoryManager) -> None:
        super().__init__()
        self._manager = manager

    def _start_actor_loop(self) -> None:
        """Pykka's hook that starts the actor's thread (``start_actor_loop``: out of threads, typed)."""
        runtime = self._manager._core.name  # noqa: SLF001
        start_actor_loop(
            self,
            super()._start_actor_loop,
            lambda running: RuntimeCapacityError("session actor", running, runtime),
        )

    def on_start(self) -> None:
        """Pykka's hook, on the actor's own thread first: name its runtime (``SessionActor-4 [sim-a]``)."""
        thread = self._manager.actor_thread = threading.current_thread()
        thread.name = thread_name(thread.name, self._manager._core.name)  # noqa: SLF001

    def on_receive(self, message: object) -> None:
        """Handle the doorbell: run every waiting operation."""
        if message is _DRAIN:  # not ==: a host's broadcast may compare as it likes (a NumPy array)
            self._manager._drain()  # noqa: SLF001


_READ_RECORDS: Final = (SessionTouched, SessionExpired)
"""What reads and sweeps journal: a session's access (best effort) and its expiry."""


def _reads_only(events: list[Event]) -> bool:
    """Whether ``events`` hold nothing but what reads and sweeps journal."""
    return all(isinstance(e, _READ_RECORDS) for e in events)


_WRITES: Final = frozenset({"create_session", "add", "add_turn", "delete_session"})
"""The session actor's operations that change what the journal holds (a sweep's expiries
and a read's access only follow the clock)."""

MIN_SWEEP_INTERVAL: Final = 0.1
"""The least time between two sweeps of the session ticker, in seconds."""


def _plain_message(session_id: str, role: str, content: str) -> tuple[str, Message]:
    """``add_message``'s arguments checked: the session id, and the message of its role and text."""
    session_id = require_str(session_id, "session_id")
    return session_id, Message(role=require_str(role, "role"), content=require_str(content, "content"))


class MemoryManager:
    """The MemoryManager API of spec §5.1, as ``runtime.memory``.

    Every session call raises ``RuntimeClosedError`` once the runtime is closed,
    ``ActorTimeoutError`` when the session actor does not answer within
    ``call_timeout`` (the call is not withdrawn: it runs in its turn, so a write
    retried after one may be made twice), and ``TypeError`` for a session, agent or user id, role or
    content that is not a str; a session call on one that is unknown, deleted, expired
    or evicted raises ``SessionNotFoundError``, whose ``reason`` says which
    (``build_context`` and ``delete_session`` excepted). A write (a new session, a
    message, a deletion) raises the journal's error (``JournalError``) when the journal
    refuses it, and changes nothing; once the journal is fail-stop, writes are refused
    before they change anything, and reads and sweeps still answer (their access
    records and expiries are dropped). The calls
    the session actor runs in one batch with the write whose commit made the journal
    fail (those after it, reads too) get that write's error.

    A behavior's ``ctx.memory`` is this manager (``agent_memory``), whose calls made
    while its agent handles a message (from the agent's thread, or worker threads the
    behavior waits for; ``ctx.llm.turn``'s too) journal their records with that
    message's id as their ``cause``: a new session, a message, a deletion, a read's
    access record (also as the reload after a refused batch journals it again), an
    eviction a new session makes. A session's expiry names no cause (the clock ended
    it), nor does a call through ``runtime.memory``.
    """

    def __init__(self, core: Core, journal: Journal | None) -> None:
        """Start the session actor; it recovers the journal's sessions first."""
        self._core = core
        self._config = core.config.memory
        self._journal = journal
        self._sessions: collections.OrderedDict[str, SessionState] = collections.OrderedDict()
        """In access order, least recently used first: eviction is O(1)."""
        self._latest = -math.inf
        self._agents_latest: dict[str, str] = {}
        """Each agent's session used last, of those live: a read of another one is journaled."""
        self._ended: collections.OrderedDict[str, str] = collections.OrderedDict()
        """The latest sessions that ended (at most ``_ENDED_KEPT``), oldest first: how each did."""
        self._clock_went_back = False
        """Whether a clock reading was ever below an earlier one (a wall clock stepped
        back): access order then no longer puts the sessions that expire first in front."""
        self._retrievers: list[Retriever] = []
        self._overdue = _Overdue()
        """The retrievers' runs still going past a caller's deadline: skipped until they return."""
        self._queue: collections.deque[_Op] = collections.deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self._closed = False
        self._events: list[Event] = []
        self._cause: str | None = None
        """While an operation runs: its cause (``_Op.cause``), which its records name."""
        self._reads: list[tuple[str, float, str | None]] = []
        """The batch's reads, (session, time, cause): a reload after a failed batch keeps them
        (_read_again)."""
        self._reads_kept: list[tuple[str, float, str | None]] = []
        """While a batch is journaled: its reads before its first write, which a reload
        applies before it expires anything (they answered, so their sessions were live)."""
        self._stale = False  # a commit it stopped waiting for may have happened
        self._behind: Ack | None = None
        """While ``_stale``: the acknowledgement of the last batch whose commit it stopped waiting for."""
        self._behind_answers = 0
        """How many timed-out turns' answers that batch holds (named if the journal refuses it)."""
        self._saw_failure = False
        """Whether it reloaded after the journal went fail-stop: in batch durability it
        applied writes at once that the failed commit may not hold."""
        # Recover before the actor exists, on the opening thread: Runtime.open returns
        # with every session in place, and nothing can use the journal meanwhile.
        self._recover()
        self._ticker: threading.Thread | None = None
        self._stop_ticker = threading.Event()
        self.actor_thread: threading.Thread | None = None
        """The session actor's thread, once started (``_close`` waits for it to end)."""
        self._ref = SessionActor.start(self)  # last: nothing after it can fail and leave it running

    # ------------------------------------------------------------- calling the actor

    def _cause_of(self) -> str | None:
        """The ``cause`` of what a call made now journals: none (``agent_memory``'s view names one)."""
        return None

    def _call(self, name: str, *args: object) -> Any:  # noqa: ANN401 - each operation's result
        op = self._queue_op(name, args)
        timeout = self._core.call_timeout
        with _interrupt.HELD:  # but in its wait, which a Ctrl-C as it begins ends within a slice
            answered = _interrupt.wait_sliced(lambda seconds: op.done.acquire(True, seconds), timeout)
        if not answered:
            msg = f"the session actor did not answer {name} within {timeout} s"
            raise ActorTimeoutError(msg)
        if op.error is not None:
            raise op.error
        return op.result

    def _add_later(self, session_id: str, message: Message) -> None:
        """Queue ``add_structured_message`` without waiting for it (a failure is logged, not raised).

        For a turn whose output record outlasted ``call_timeout``: its caller hears that
        timeout, not a second one, and the answer goes in behind the record.

        Raises:
            RuntimeClosedError: the runtime is closed.

        """
        self._queue_op("add", (session_id, validated(message)), unwaited=True)

    def _queue_op(self, name: str, args: tuple[object, ...], *, unwaited: bool = False) -> _Op:
        op = _Op(name, args, unwaited=unwaited, cause=self._cause_of())
        with self._lock:
            if self._closed or self._core.closing:  # from the moment close() begins, as every call
                msg = "the runtime is closed"
                raise RuntimeClosedError(msg)
            self._queue.append(op)
            if not self._scheduled:
                # rung before the flag is set (as the journal writer's doorbell): a Ctrl-C
                # between the two costs a spare ring, never a lost one
                try:
                    self._ref.tell(_DRAIN)
                except pykka.ActorDeadError:
                    # close() marks the runtime closed before it stops the actor, under this lock:
                    # the host application stopped it (pykka.ActorRegistry.stop_all())
                    msg = f"the session actor {STOPPED_FROM_OUTSIDE}"
                    raise RuntimeClosedError(msg) from None
                self._scheduled = True
        return op

    def _drain(self) -> None:
        while True:
            with self._lock:
                ops = list(self._queue)
                self._queue.clear()
                if not ops:
                    self._scheduled = False
                    return
            self._run(ops)

    def _run(self, ops: list[_Op]) -> None:
        error: Exception | None = None
        first_write = len(ops)
        try:
            writer = self._core.writer
            if writer is not None and not self._saw_failure and writer.failure is not None:
                self._saw_failure = True
                # the journal's word, reads too, before anything else; a catch-up after it
                # would only repeat it, and forget the accesses made meanwhile
                self._stale, self._behind = False, None
                self._recover()
            elif self._stale and not self._catch_up():
                # close() began while it waited for the journal: a batch decided on the
                # state without the journal's word could contradict it; not run
                error, first_write = RuntimeClosedError("the runtime is closed"), 0
                return
            self._events, self._reads = [], []
            failed = writer is not None and writer.failure is not None
            first_write, reads_before = self._run_ops(ops, failed=failed)
            events, self._events = self._events, []
            self._reads_kept = self._reads[:reads_before]
            try:
                error = self._journal_batch(events)
            finally:
                self._reads_kept = []
            if isinstance(error, ActorTimeoutError):
                self._behind_answers = sum(op.unwaited for op in ops[first_write:])
            if error is not None:
                self._read_again(self._reads[:reads_before])  # what they saw stands; the reload forgot it
        except Exception as exc:
            # Not an outcome the steps above expect: every caller of the batch gets it,
            # and the actor goes on serving the next one (its callers must not wait
            # call_timeout for an actor that stopped answering).
            log.exception(
                "the session actor failed on a batch of %s",
                "1 call" if len(ops) == 1 else f"{len(ops)} calls",
            )
            error, first_write = exc, 0
        finally:
            for index, op in enumerate(ops):
                if error is not None and index >= first_write:
                    # Its own error too: a write the batch's failure undid may have caused it
                    # (a session not found, deleted or evicted by a write refused since).
                    # A copy for each caller: raised from many threads, one object's
                    # traceback would gather all their frames.
                    op.error = error_copy(error)
                op.finish()

    def _run_ops(self, ops: list[_Op], *, failed: bool) -> tuple[int, int]:
        """Run a batch's operations; the first that journals a write, and the reads before it.

        A failure of the batch is that write's and its followers' only: a read before it
        saw only what the journal holds, one after it may have seen the write.
        ``failed``: the journal is fail-stop, and writes are refused before they change
        anything (no reload).
        """
        first_write, reads_before = len(ops), len(self._reads)
        for index, op in enumerate(ops):
            made = len(self._events)
            if first_write == len(ops):
                reads_before = len(self._reads)
            self._cause = op.cause
            try:
                if failed and op.name in _WRITES:
                    writer = self._core.writer
                    assert writer is not None
                    writer.check_usable()
                op.result = getattr(self, "_op_" + op.name)(*op.args)
            except Exception as exc:  # noqa: BLE001 - delivered to the caller
                op.error = exc
            except BaseException as exc:  # noqa: BLE001 - a clock's or a value's: Pykka would stop every actor
                op.error = UserCodeError(f"the session actor: the user's code raised {type(exc).__name__}")
                op.error.__cause__ = exc
            finally:
                self._cause = None
            if first_write == len(ops) and not _reads_only(self._events[made:]):
                first_write = index
        if first_write == len(ops):
            reads_before = len(self._reads)
        return first_write, reads_before

    def _read_again(self, reads: list[tuple[str, float, str | None]], *, record: bool = False) -> None:
        """Refresh the sessions that ``reads`` (session, time, cause) read, after a reload.

        The reads answered, and a reload after a failed batch took their accesses back
        to the journal's (which may never hold them: a fail-stop journal, or one a
        read records only every ttl/10): a session read all along expired early.
        ``record``: in the reload itself, emit the access records the refused batch
        lost, as ``_live`` would have made them against the journal's word (a reopen
        then finds the accesses, and each agent's latest session, as they are live), each
        naming the read's cause, as the lost one did.
        """
        for session_id, at, cause in reads:
            state = self._sessions.get(session_id)
            if state is None:  # the read answered it live: journaled accesses may lag by ttl/10
                continue
            state.accessed_at = max(state.accessed_at, at)
            self._sessions.move_to_end(session_id)
            if record:
                self._cause = cause
                try:
                    self._record_access(state, at)
                finally:
                    self._cause = None
            if state.agent_id is not None:
                self._agents_latest[state.agent_id] = session_id

    def _journal_batch(self, events: list[Event]) -> Exception | None:
        """Hand a batch's events to the writer; the error its callers get, if any.

        In sync durability the writes are durable when this returns; a batch of touches
        alone (recency only) never waits. The events keep the order the operations made
        them in: a touch journaled ahead of an earlier write of its session would give
        replay an older last access (or none, ahead of its creation).
        """
        writer = self._core.writer
        if writer is not None and writer.failure is not None:
            # Fail-stop: nothing is stored until a reopen. The reads' records are dropped:
            # accesses (best effort) and expiries (a reopen expires those sessions again:
            # their journaled last access is no later). Refused, they failed every read of
            # a session not written for ttl/10, and the reload after it forgot the
            # accesses. Writes were refused before they changed anything (_run), but for
            # one made as the journal failed: it goes on, to be refused and undone.
            events = [e for e in events if not isinstance(e, _READ_RECORDS)]
        try:
            if writer is not None and events:
                if not self._core.sync or all(isinstance(e, SessionTouched) for e in events):
                    writer.submit_nowait(events)
                else:
                    ack = writer.submit(events)
                    assert ack is not None
                    self._behind = ack
                    ack.wait(self._core.call_timeout)
        except ActorTimeoutError as exc:
            # Whether the batch is stored is unknown until the writer gets to it; it
            # most likely will be. Keep it, and take the journal's word before the
            # next batch (_catch_up), as replay would.
            self._stale = True
            return exc
        except Exception as exc:  # noqa: BLE001 - delivered to the batch's callers
            if isinstance(exc, JournalError) and _reads_only(events):
                # the journal went fail-stop just now: the reads stand (as above)
                reads = "1 session read" if len(events) == 1 else f"{len(events)} session reads"
                log.warning("the journal refused the records of %s: %s", reads, exc)
                return None
            if isinstance(exc, RuntimeClosedError) and self._core.closing:
                # The writer is stopped by close(): every later call is refused, and
                # close() may have closed the journal (it gave up waiting for this
                # actor), so there is nothing to reload from.
                return exc
            # Refused (a JournalError, a value the journal cannot store): nothing of
            # this batch is stored, so nothing of it may stay visible.
            self._recover()
            if writer is not None and writer.failure is not None:
                self._saw_failure = True  # this was the reload after the failure: not again
            return exc
        return None

    # ------------------------------------------------------------- state, on the actor's thread

    def _catch_up(self) -> bool:
        """Reload every session from the journal once its batch that timed out is committed.

        After a commit the manager stopped waiting for, before the next batch: a write
        decided on the state with the timed-out one, which the journal may then refuse,
        would contradict what it holds (a new session that evicted none, as one deleted
        came back: more than ``max_sessions``). So, as an agent does, it waits for that
        commit however long the writer takes, ``call_timeout`` at a time (the callers
        waiting for the batch time out meanwhile, and their calls take effect after).
        False: ``close()`` began meanwhile, and the next batch must not run (nor a reload
        read a journal close() may have closed).

        Raises:
            RuntimeClosedError: the writer stopped while the runtime is not closing.

        """
        writer = self._core.writer
        assert writer is not None
        behind = self._behind
        assert behind is not None
        while True:
            if self._core.closing:
                return False
            try:
                behind.wait(self._core.call_timeout)
            except ActorTimeoutError:
                if self._core.closing:
                    return False
                with contextlib.suppress(JournalError):  # fail-stop: the writer fails the batch once at it
                    writer.check_usable()
                log.warning("the session actor: a commit it stopped waiting for is still not done; it waits")
                continue
            except RuntimeClosedError:
                if self._core.closing:
                    return False
                raise
            except Exception as exc:  # noqa: BLE001 - refused or failed: not stored; the journal holds what it holds
                if writer.failure is None:  # refused alone (the writer logged a fail-stop): say so
                    answers = self._behind_answers
                    log.warning(
                        "the session actor: the journal refused a batch whose commit it stopped waiting "
                        "for%s; it takes the journal's word: %r",
                        f" (with {answers} timed-out turns' answers, not added)" if answers else "",
                        exc,
                    )
            break
        if self._core.closing:
            return False  # close() may have closed the journal meanwhile: no reload reads it
        self._recover()
        if writer.failure is not None:
            self._saw_failure = True  # this was the reload after the failure: not again
        self._stale, self._behind = False, None
        return True

    def _recover(self) -> None:
        self._sessions = collections.OrderedDict()
        journal = self._journal
        if journal is None:
            return
        recovered: list[tuple[int, SessionState]] = []
        for stream in journal.streams("session/"):
            if session_end(journal, stream):
                continue  # replaying it would end in nothing
            state: SessionState | None = None
            last = 0
            for record in journal.read(stream=stream):
                state = apply_session_event(state, record.event)
                last = record.seq
            if state is not None:
                # A live session's every record is an access: the live runtime used them
                # in the order of their last records (whatever a wall clock said meanwhile).
                recovered.append((last, state))
        recovered.sort(key=lambda entry: entry[0])
        self._agents_latest = {}
        for _, state in recovered:
            self._sessions[state.id] = state
            if state.agent_id is not None:
                self._agents_latest[state.agent_id] = state.id
        # A reload after a refused batch: the reads it answered count before anything expires.
        self._read_again(self._reads_kept, record=True)
        if recovered:  # a clock that stepped back while the runtime was closed shows at its first reading
            self._latest = max(self._latest, *(state.accessed_at for _, state in recovered))
        # Used in an order their times contradict (the wall clock stepped back, as _now
        # notes it live): an expired session may stand behind a live one.
        self._clock_went_back = self._out_of_order()
        # Sessions whose TTL passed while the runtime was closed (or before a reload) expire now.
        if self._core.writer is not None:
            self._expire_all()
            self._journal_reload()
        self._events = []

    def _journal_reload(self) -> None:
        """Hand over what a reload journals: the kept reads' access records, then the expiries."""
        writer = self._core.writer
        assert writer is not None
        if not self._events:
            return
        records = "1 session record" if len(self._events) == 1 else f"{len(self._events)} session records"
        if writer.failure is not None:  # fail-stop: dropped, as a read's (_journal_batch)
            log.debug("%s of a reload after the journal failed dropped", records)
            return
        try:
            writer.submit_nowait(self._events)
        except (JournalError, RuntimeClosedError) as exc:
            log.warning("could not journal %s of a reload: %r", records, exc)

    def _emit(self, event: SessionEvent) -> None:
        """Journal ``event`` with the batch; it names the running operation's cause, if any.

        An expiry names none: the clock ended the session, whichever call noticed it.
        """
        if self._cause is not None and not isinstance(event, SessionExpired):
            event = msgspec.structs.replace(event, cause=self._cause)
        self._events.append(event)

    def _now(self) -> float:
        now = self._core.clock.now()
        if now >= self._latest:
            self._latest = now
        else:
            self._clock_went_back = True
        return now

    def _expired(self, state: SessionState, now: float) -> bool:
        # Not ``now - accessed_at > ttl``: at wall-clock magnitudes that difference is
        # rounded, so a clock moved on by exactly the ttl could find it a hair past it.
        return now > state.accessed_at + self._config.session_ttl

    def _expire_all(self) -> int:
        now = self._now()
        gone = [s for s in self._sessions.values() if self._expired(s, now)]
        for state in gone:
            self._remove(state, "expired")
            self._emit(SessionExpired(at=now, session=state.id))
        if self._clock_went_back and now >= self._latest:
            # The clock is past every access again: once what stood out of order has gone,
            # the front expires first (a session used now goes behind every other).
            self._clock_went_back = self._out_of_order()
        return len(gone)

    def _out_of_order(self) -> bool:
        """Whether a live session was used after one whose last access is later."""
        return any(a.accessed_at > b.accessed_at for a, b in itertools.pairwise(self._sessions.values()))

    def _live(self, session_id: str, *, touch: bool, now: float | None = None) -> SessionState:
        """The live session, refreshed at ``now`` (read from the clock when None).

        An expired one is removed and reported missing. The session becomes the most
        recently used; a wall clock that stepped back moves its last access no earlier.
        """
        state = self._sessions.get(session_id)
        if now is None:
            now = self._now()
        if state is None:
            raise SessionNotFoundError(session_id, self._ending(session_id))
        if self._expired(state, now):
            self._remove(state, "expired")
            self._emit(SessionExpired(at=now, session=session_id))
            raise SessionNotFoundError(session_id, "expired")
        state.accessed_at = max(state.accessed_at, now)
        self._sessions.move_to_end(session_id)
        if touch:
            self._reads.append((session_id, now, self._cause))
        agent = state.agent_id
        # A read is journaled once per ttl/10 (the TTL needs no more), and also when it
        # makes the session its agent's latest: a reopened runtime orders each agent's
        # sessions by their records, so get_latest_session_for_agent answers the same.
        if touch:
            self._record_access(state, now)
        if agent is not None:
            self._agents_latest[agent] = session_id
        return state

    def _record_access(self, state: SessionState, at: float) -> None:
        """Journal a read of ``state`` at ``at`` when it is due (``SessionTouched``).

        Due once ``session_ttl / 10`` has passed since its last recorded access, or when
        the read makes it its agent's latest session (call it before noting that).
        """
        agent = state.agent_id
        if at - state.touched_at >= self._config.session_ttl / 10 or (
            agent is not None and self._agents_latest.get(agent) != state.id
        ):
            state.touched_at = at
            self._emit(SessionTouched(at=at, session=state.id))

    def _remove(self, state: SessionState, ending: str) -> None:
        """Take a session out of the live ones, as ``ending`` says (the caller journals it)."""
        del self._sessions[state.id]
        ended = self._ended
        ended[state.id] = ending
        if len(ended) > _ENDED_KEPT:
            ended.popitem(last=False)
        if state.agent_id is not None and self._agents_latest.get(state.agent_id) == state.id:
            del self._agents_latest[state.agent_id]

    def _ending(self, session_id: str) -> str | None:
        """How a session that is not live ended (``SessionNotFoundError.reason``); None for one never had.

        The latest endings are kept; an older one is read from the session's last record
        (None while that ending waits for its commit: more than ``_ENDED_KEPT`` ended at
        once, in batch durability or a reopen's expiries).
        """
        ending = self._ended.get(session_id)
        journal = self._journal
        if ending is not None or journal is None:
            return ending
        try:
            _, last = _last_event(journal, "session/" + session_id)
        except Exception:
            log.debug("could not read how session %r ended", session_id, exc_info=True)
            return None
        return _ENDINGS.get(type(last)) if last is not None else None

    def _op_create_session(self, user_id: str, agent_id: str | None) -> str:
        user_id = require_str(user_id, "user_id")
        if agent_id is not None:
            agent_id = require_str(agent_id, "agent_id")
        now = self._now()
        sessions = self._sessions
        # Expired sessions go before a live one is evicted; both come off the front, but
        # after the clock stepped back an expired one may be behind a live one.
        if self._clock_went_back and len(sessions) >= self._config.max_sessions:
            self._expire_all()
        while len(sessions) >= self._config.max_sessions:
            oldest_id, oldest = next(iter(sessions.items()))
            gone = SessionExpired if self._expired(oldest, now) else SessionEvicted
            self._remove(oldest, _ENDINGS[gone])
            self._emit(gone(at=now, session=oldest_id))
        session_id = f"session_{_id_part(user_id)}_{os.urandom(8).hex()}"
        event = SessionCreated(
            at=now,
            session=session_id,
            user_id=user_id,
            agent_id=agent_id,
            seed=Message(role=ROLE_SYSTEM, content=SEED_MESSAGE, time=now),
        )
        self._emit(event)
        state = apply_session_event(None, event)
        assert state is not None
        self._sessions[session_id] = state
        if agent_id is not None:
            self._agents_latest[agent_id] = session_id
        return session_id

    def _op_add(self, session_id: str, message: Message) -> None:
        now = self._now()  # one reading, before anything changes: a clock that fails changes nothing
        self._add(self._live(session_id, touch=False, now=now), message, now)

    def _add(self, state: SessionState, message: Message, now: float) -> None:
        if message.time == 0.0:
            message = msgspec.structs.replace(message, time=now)
        event = SessionMessageAdded(at=now, session=state.id, message=message)
        self._emit(event)
        apply_session_event(state, event)

    def _op_add_turn(self, session_id: str, message: Message) -> str:
        """Add a message that starts a turn; tag it with a fresh turn id if the window uses them."""
        now = self._now()  # one reading, as ``add``
        state = self._live(session_id, touch=False, now=now)
        # the messages the window will hold beside this one: a turn id only among them
        # makes an untagged message join the last tagged turn (one that leaves the
        # window as this one enters must not get this one tagged: everything before
        # the first tag joins its turn)
        kept = state.messages[max(0, len(state.messages) - self._config.max_history + 1) :]
        if any(m.turn_id for m in kept):
            message = msgspec.structs.replace(message, turn_id=f"turn-{os.urandom(8).hex()}")
        self._add(state, message, now)
        return message.turn_id

    def _op_get_messages(self, session_id: str) -> list[Message]:
        return list(self._live(session_id, touch=True).messages)

    def _op_get_session(self, session_id: str) -> SessionData:
        state = self._live(session_id, touch=True)
        return SessionData(
            session_id=state.id,
            user_id=state.user_id,
            agent_id=state.agent_id,
            messages=list(state.messages),  # each message copied on the caller's thread
            created_at=state.created_at,
            accessed_at=state.accessed_at,
        )

    def _op_sessions(self) -> list[str]:
        now = self._now()
        return [session_id for session_id, state in self._sessions.items() if not self._expired(state, now)]

    def _op_build_prompt_messages(self, session_id: str) -> tuple[list[Message], str, float]:
        """The cleaned window; the query for retrieval (its last user message, raw) and the time."""
        messages = self._live(session_id, touch=True).messages[-self._config.max_history :]
        query = next((m.content for m in reversed(messages) if m.role == ROLE_USER), "")
        now = self._now() if query else 0.0  # the time of a retrieved-context message
        return clean_with_turns(messages, self._config.clean), query, now

    def _op_build_context(self, session_id: str) -> str | None:
        """The history part of ``build_context`` ("" for none); None for an unknown session."""
        try:
            state = self._live(session_id, touch=True)
        except SessionNotFoundError:
            return None
        # the default options, not the configured ones: the original's BuildContext
        # calls Clean without any (only its prompt window takes them)
        history = clean(state.messages[-self._config.max_history :], _DEFAULT_CLEAN)
        if not history:
            return ""
        prefixes = {
            ROLE_USER: "User: ",
            ROLE_ASSISTANT: "Assistant: ",
            ROLE_TOOL_CALL: "Tool call: ",
            ROLE_TOOL_RESULT: "Tool result: ",
            ROLE_SYSTEM: "System: ",
        }
        lines = "".join(
            f"{prefixes.get(m.role, 'Unknown: ')}{with_ellipsis(m.content, _CONTEXT_LINE)}\n" for m in history
        )
        return f"Previous conversation history:\n\n{lines}\nCurrent request:\n"

    def _op_delete_session(self, session_id: str) -> None:
        state = self._sessions.get(session_id)
        if state is not None:
            at = self._now()  # first: a clock that fails leaves the session as it was
            self._remove(state, "deleted")
            self._emit(SessionDeleted(at=at, session=session_id))

    def _op_latest_for_agent(self, agent_id: str) -> str | None:
        now = self._now()
        # The sessions are in the order of use (a wall clock may have stepped back meanwhile).
        newest_first = reversed(self._sessions.values())
        return next(
            (s.id for s in newest_first if s.agent_id == agent_id and not self._expired(s, now)), None
        )

    def _op_sweep(self) -> int:
        return self._expire_all()

    def _op_size(self) -> int:
        now = self._now()
        return sum(1 for s in self._sessions.values() if not self._expired(s, now))

    def _relevant(self, query: str) -> str | None:
        """``Relevant context:`` and one ``[source] content`` line per snippet kept, or None.

        On the caller's thread, not the session actor's: a slow retriever holds up only
        its own caller. The retrievers run side by side, at most four at a time, as in
        the original; one that fails, or is not done within ``call_timeout``, is logged
        and left out. Snippets are deduplicated by source and content (the best score
        kept), filtered by ``rag_min_score`` (0 means the default, 0.4, as in the
        original), sorted by score and cut to ``rag_top_k``.
        """
        retrievers = self._retrievers
        if not retrievers or not query:
            return None
        best: dict[tuple[str, str], Snippet] = {}
        for found in _run_retrievers(
            retrievers, query, self._core.call_timeout, self._overdue, self._core.name
        ):
            for snippet in found:
                key = (snippet.source, snippet.content)
                if key not in best or best[key].score < snippet.score:
                    best[key] = snippet
        floor = self._config.rag_min_score if self._config.rag_min_score > 0 else DEFAULT_RAG_MIN_SCORE
        ranked = sorted((s for s in best.values() if s.score >= floor), key=lambda s: -s.score)
        kept = ranked[: self._config.rag_top_k]
        if not kept:
            return None
        return "Relevant context:\n" + "".join(f"[{s.source}] {s.content}\n" for s in kept)

    # ------------------------------------------------------------- the API

    def create_session(self, user_id: str, *, agent_id: str | None = None) -> str:
        """Create a session seeded with "New session started"; return its id.

        May evict the least recently used session when ``max_sessions`` would be exceeded.
        """
        result: str = self._call("create_session", user_id, agent_id)
        return result

    def add_message(self, session_id: str, role: str, content: str) -> None:
        """Add a message with the clock's time.

        Raises:
            SessionNotFoundError: the session is unknown, deleted, expired or evicted
                (``reason`` says which).

        """
        self._call("add", *_plain_message(session_id, role, content))

    def add_structured_message(self, session_id: str, message: Message) -> None:
        """Add a structured message; its ``time`` is filled from the clock when unset (0.0).

        Raises:
            TypeError: ``message`` is not a ``Message``.
            InvalidTextError: a text field or ``session_id`` holds no ``str`` (also a
                ``TypeError``).
            InvalidEventError: a field holds a value of the wrong type (a tool call that
                is no ``ToolCall``, say), or ``time`` is not finite (also a ``TypeError``
                and a ``ValueError``).
            SessionNotFoundError: the session is unknown, deleted, expired or evicted
                (``reason`` says which).

        """
        if not isinstance(message, Message):
            msg = f"expected a Message, got {type(message).__name__}"
            raise TypeError(msg)
        session_id = require_str(session_id, "session_id")
        checked = validated(message)
        if not math.isfinite(checked.time):  # NaN or inf: no session could be ordered or expired by it
            msg = f"a message's time must be finite seconds, got {checked.time!r}"
            raise InvalidEventError(msg)
        self._call("add", session_id, checked)

    def add_turn_message(self, session_id: str, role: str, content: str) -> str:
        """Add a message meant to start a new turn (a user's); return its turn id ("" for none).

        Where the messages the window keeps beside it carry turn ids, an untagged
        message would join the last tagged turn (spec §5.4), so it gets a fresh turn id
        (``turn-`` and 16 hex digits), which the messages of the same turn should carry
        too: ``turn()`` gives it to the model's answer. Elsewhere it is added untagged,
        and the cleaner's own rule splits turns: at a user message, once the window's
        open turn holds one (so after a tool loop longer than ``max_history``, whose
        user message left the window, it joins that turn). Any role is taken, as by
        ``add_message``; only a user message starts a turn without turn ids.

        Raises:
            SessionNotFoundError: the session is unknown, deleted, expired or evicted
                (``reason`` says which).

        """
        result: str = self._call("add_turn", *_plain_message(session_id, role, content))
        return result

    def get_messages(self, session_id: str) -> list[Message]:
        """Every message of the session, oldest first (copies: changing one changes nothing stored)."""
        session_id = require_str(session_id, "session_id")
        result: list[Message] = self._call("get_messages", session_id)
        return _own_copies(result)

    def get_session(self, session_id: str) -> SessionData:
        """A copy of the session: its user, agent, messages, creation and last access.

        An access like ``get_messages``: it refreshes the last access (the original's
        ``SessionMemory.Get``).

        Raises:
            SessionNotFoundError: the session is unknown, deleted, expired or evicted
                (``reason`` says which).

        """
        session_id = require_str(session_id, "session_id")
        result: SessionData = self._call("get_session", session_id)
        return msgspec.structs.replace(result, messages=_own_copies(result.messages))

    def sessions(self) -> list[str]:
        """The ids of the live sessions, least recently used first; no access is refreshed."""
        result: list[str] = self._call("sessions")
        return result

    def build_prompt_messages(self, session_id: str) -> list[Message]:
        """The last ``max_history`` messages, cleaned turn by turn (spec §5.3).

        With retrievers set, the context they find for the window's last user message
        comes first, as one system message (see ``set_retrievers``).

        Raises:
            RuntimeCapacityError: the process cannot start a retriever's thread.

        """
        session_id = require_str(session_id, "session_id")
        cleaned: list[Message]
        cleaned, query, now = self._call("build_prompt_messages", session_id)
        window = _own_copies(cleaned)
        relevant = self._relevant(query)
        if relevant is None:
            return window
        return [Message(role=ROLE_SYSTEM, content=relevant, time=now), *window]

    def build_context(self, input: str, session_id: str) -> str:  # noqa: A002 - the original's name
        """The legacy flat-text context; an unknown session gives ``input`` unchanged.

        Retrieved context for ``input`` (with retrievers set) and a blank line, then the
        last ``max_history`` messages cleaned, one line each, then ``input`` (spec §5.3).
        As in the original, the cleaning uses ``CleanOptions()``'s defaults, not the
        configured ``memory.clean`` (which the prompt window, ``build_prompt_messages``,
        uses), and each message's content is cut to 100 code points (after its role's prefix).

        Raises:
            RuntimeCapacityError: the process cannot start a retriever's thread.

        """
        input = require_str(input, "input")  # noqa: A001 - the original's name
        session_id = require_str(session_id, "session_id")
        history: str | None = self._call("build_context", session_id)
        if history is None:
            return input
        relevant = self._relevant(input)
        return ("" if relevant is None else relevant + "\n") + history + input

    def delete_session(self, session_id: str) -> None:
        """Delete a session; idempotent."""
        session_id = require_str(session_id, "session_id")
        self._call("delete_session", session_id)

    def get_latest_session_for_agent(self, agent_id: str) -> str | None:
        """The id of the agent's most recently used live session, or None.

        Raises:
            RuntimeClosedError: the runtime is closed (also without a journal, as every
                call of a closed runtime).
            AgentCheckpointNotSupportedError: the runtime has no journal.

        """
        agent_id = require_str(agent_id, "agent_id")  # first, as every session call checks it
        if self._journal is None:
            with self._lock:
                closed = self._closed or self._core.closing
            if closed:  # closed before no journal, as with a journal: the same error whichever the runtime
                msg = "the runtime is closed"
                raise RuntimeClosedError(msg)
            raise AgentCheckpointNotSupportedError
        result: str | None = self._call("latest_for_agent", agent_id)
        return result

    def sweep(self) -> int:
        """Remove every expired session; return how many."""
        result: int = self._call("sweep")
        return result

    def size(self) -> int:
        """How many live sessions there are."""
        result: int = self._call("size")
        return result

    def set_retrievers(self, retrievers: Sequence[Retriever]) -> None:
        """Use ``retrievers`` for RAG in ``build_prompt_messages`` and ``build_context`` (none by default).

        They run on the calling thread's behalf, side by side (at most four at a time),
        all within one ``call_timeout`` from when the first starts (after the session's
        messages are read): the call waits no longer for them, however many there are.
        A retriever that raises, returns something that is not snippets, or is not done
        by then (one still waiting for a free place among the four is not started) is
        logged and left out.

        Raises:
            TypeError: ``retrievers`` is not iterable, is a str, or holds something
                without ``retrieve``.

        """
        if isinstance(retrievers, str | bytes):
            msg = f"retrievers is a sequence of retrievers, got {type(retrievers).__name__}"
            raise TypeError(msg)
        chosen = list(retrievers)
        for retriever in chosen:
            if not callable(getattr(retriever, "retrieve", None)):
                msg = f"a retriever has a retrieve(query) method, got {type(retriever).__name__}"
                raise TypeError(msg)
        self._retrievers = chosen

    # ------------------------------------------------------------- lifecycle

    def start_ticker(self, sleep: Callable[[float], bool] | None = None) -> None:
        """Sweep every ``session_ttl / 2`` seconds of real time, on a daemon thread.

        One ticker per runtime: ``Runtime.open`` starts it unless the clock is a
        ``FakeClock``; a second call raises ``RuntimeError``.

        At most every ``MAX_WAIT`` seconds (~31 years): a thread cannot wait much
        longer, and a TTL that long (or ``inf``: sessions never expire) needs no sooner sweep.
        At least ``MIN_SWEEP_INTERVAL`` (0.1 s) apart: a TTL of microseconds would keep
        a core sweeping. An expired session is never returned however late the sweep
        (each access checks the TTL); the sweep frees its memory and journals its expiry.
        ``sleep(seconds)`` waits between sweeps, True to stop (default: until ``close()``).

        Raises:
            RuntimeError: the ticker runs already.
            RuntimeCapacityError: the process cannot start the ticker's thread.
            TypeError: ``sleep`` is not callable.

        """
        if sleep is not None and not callable(sleep):  # else the ticker's thread would die on it
            msg = f"sleep is a callable that waits and returns True to stop, got {type(sleep).__name__}"
            raise TypeError(msg)
        interval = min(max(self._config.session_ttl / 2, MIN_SWEEP_INTERVAL), MAX_WAIT)
        wait = sleep or self._stop_ticker.wait

        def tick() -> None:
            while not wait(interval):
                try:
                    self.sweep()
                except RuntimeClosedError:
                    return
                except ActorTimeoutError as exc:  # the session actor is busy, or behind the journal
                    log.warning("a session sweep did not run: %s", exc)
                except Exception:
                    log.exception("a session sweep failed")

        ticker = threading.Thread(
            target=tick, name=thread_name("cogfabric-session-ticker", self._core.name), daemon=True
        )
        with self._lock:
            if self._ticker is not None:
                msg = "the session ticker runs already (Runtime.open starts one on a real clock)"
                raise RuntimeError(msg)
            self._ticker = ticker
        try:
            ticker.start()
        except BaseException as exc:  # no thread left: the process's limit, or a Ctrl-C
            with self._lock:
                self._ticker = None
            if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
                thread = "session ticker"
                raise RuntimeCapacityError(thread, threading.active_count(), self._core.name) from exc
            raise

    def _close_soon(self) -> None:
        """Ask the ticker and the session actor to stop, without waiting (a ``close()`` a Ctrl-C cut short).

        The actor stops once the call in hand, and those queued, are done; ``_close``
        after it does nothing. Asked again, it asks again: a ``_close`` the Ctrl-C cut
        short may not have asked yet (it waits for the ticker first).
        """
        with self._lock:
            self._closed = True
        self._stop_ticker.set()
        with contextlib.suppress(pykka.ActorDeadError):
            self._ref.stop(block=False)

    def _close(self) -> None:
        """Stop the ticker and the session actor; idempotent (``Runtime.close`` calls it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop_ticker.set()
        if self._ticker is not None:
            _interrupt.join(self._ticker, self._core.call_timeout)
        stopped = False
        try:
            _interrupt.get(self._ref.stop(block=False), self._core.call_timeout)
        except (pykka.ActorDeadError, pykka.Timeout):
            log.warning("runtime %r: close(): the session actor did not stop in time", self._core.name)
        else:
            thread = self.actor_thread  # a stop is acknowledged before its thread ends
            if thread is not None and thread is not threading.current_thread():
                _interrupt.join(thread, self._core.call_timeout)
            stopped = thread is None or not thread.is_alive()
        with self._lock:  # calls queued behind a busy actor: none will run now
            left = list(self._queue)
            self._queue.clear()
            if stopped:  # no call reads them now: a closed runtime kept reachable keeps no session
                self._sessions = collections.OrderedDict()
                self._agents_latest = {}
                self._ended = collections.OrderedDict()
        for op in left:
            op.error = RuntimeClosedError("the runtime was closed before the session call ran")
            op.finish()


class _AgentMemory(MemoryManager):
    """``ctx.memory``: the runtime's ``MemoryManager``, whose calls name its agent's message.

    Not a copy: it shares the manager's attributes (its ``__dict__``), so every session,
    lock, queue and setting is the manager's, and the session actor runs its calls as
    any other's. Only the cause each call's operation carries is its own: the IPC
    message its agent handles as the call is made, if any.
    """

    __slots__ = ("_cause_now",)

    def __init__(self, manager: MemoryManager, cause_now: Callable[[], str | None]) -> None:
        # Not MemoryManager.__init__: that would recover the sessions and start a second actor.
        self.__dict__ = manager.__dict__
        self._cause_now = cause_now

    def _cause_of(self) -> str | None:
        return self._cause_now()


def agent_memory(manager: MemoryManager, cause_now: Callable[[], str | None]) -> MemoryManager:
    """``manager`` as an agent's ``ctx.memory``: what its calls journal names ``cause_now()``."""
    return _AgentMemory(manager, cause_now)
