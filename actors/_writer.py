"""The journal writer: the one actor that owns the journal and group-commits.

Producers (agents, the bus, the runtime) put submissions on a side queue and ring a
doorbell, one Pykka message per burst rather than per event (a Pykka ``tell`` costs
~6 µs, a deque append ~0.2 µs; PITFALLS.md §9). The writer actor drains everything
waiting, appends it in one write transaction (at most ``group_commit_max`` events),
and then resolves the acknowledgements. Every write transaction begins and ends inside
one of its handlers, on its own thread, as LMDB requires.

The queue is bounded: once it holds ``backlog_max`` events (by default four group
commits' worth), producers wait until the writer takes them, so a burst of agents in
batch durability cannot outrun the journal without limit (an instrumented run of
bench/fabric.py's batch ring once saw 78,000 events queued at once, all of them held
in memory and scanned by every full pass of the garbage collector). The bound is soft: a submission is let
in while fewer than ``backlog_max`` events wait, whatever its own size; the writer's own
thread never waits (it is the one that makes room); and a producer that waited
``call_timeout`` queues anyway, with a warning.

Submissions get a ticket at submit time; the writer commits in ticket order, so ticket
order is seq order. Agents compare tickets to apply cross-stream facts (a task context
published to many agents) in the order replay will.
"""

from __future__ import annotations

import _thread
import collections
import contextlib
import functools
import itertools
import logging
import queue
import threading
import time
from _thread import get_ident
from typing import TYPE_CHECKING, Any, Final

import msgspec
import pykka

from cogfabric._errors import CogfabricError
from cogfabric.events import TaskContextPublished
from cogfabric.store import (
    JournalError,
    JournalFailedError,
    JournalFullError,
    JournalStillFullError,
    Snapshot,
)

from . import _interrupt
from ._clock import bounded_wait
from ._core import _AGENTS_NAMED, start_actor_loop, thread_name
from ._errors import STOPPED_FROM_OUTSIDE, ActorTimeoutError, RuntimeCapacityError, RuntimeClosedError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from cogfabric.events import Event
    from cogfabric.store import Journal

__all__ = ["Ack", "JournalWriter", "JournalWriterActor"]

log = logging.getLogger(__name__)

_FLUSH: Final = "flush"
_PATIENCE: Final = 10
"""A commit under way counts as progress for this many stall timeouts (``JournalWriter.stop``)."""
_LOOK_BACK: Final = 16
"""Events a snapshot looks back for its stream's last one before indexing the commit (``_StreamIndex``)."""


INTERRUPTS: Final = (KeyboardInterrupt, SystemExit)
"""What a signal's handler raises on the main thread: a Ctrl-C's interrupt (the command
line's SIGTERM too), or a program's SIGTERM handler's ``sys.exit`` (README)."""
STOPPED_WAITING: Final = (ActorTimeoutError, *INTERRUPTS)
"""What ``Ack.wait`` raises when its caller stopped waiting, the outcome unknown: its timeout
passed, or a Ctrl-C (a notebook's interrupt) or a SIGTERM's exit came meanwhile. Either way
the writer still commits or refuses the submission, and the live runtime must follow what
it does, as replay will; a journal's refusal is an ``Exception`` of its own."""


def unacknowledged(timeout: float) -> str:
    """What ``Ack.wait`` says when no acknowledgement came within ``timeout`` seconds."""
    return f"the journal did not acknowledge within {timeout} s; the outcome is unknown"


class Ack:
    """The acknowledgement of one submission: its seqs once committed, or the error.

    Waits on a bare lock, released by the writer: cheaper than ``threading.Event``,
    which the sync ring's profile showed at a quarter of its CPU (bench/fabric.py).
    """

    __slots__ = ("_lock", "_over", "error", "seqs", "ticket")

    def __init__(self, ticket: int) -> None:
        self.ticket = ticket
        self.seqs: list[int] = []
        self.error: BaseException | None = None
        self._over = False
        """Set before the lock is released: a waiter holds the lock for a moment as it wakes."""
        self._lock = _thread.allocate_lock()
        self._lock.acquire()

    def wait(self, timeout: float) -> list[int]:
        """Block until committed and return the seqs.

        ``timeout`` is in seconds: 0 or less does not wait, and past ``MAX_WAIT`` (1e9
        s; ``inf`` too) it waits that long, as long as a thread can.

        Raises:
            ActorTimeoutError: not committed within ``timeout`` seconds (outcome unknown).
            JournalError: the append failed (the journal is fail-stop).

        """
        if not self._over:
            wait = bounded_wait(timeout, 0.0)
            if get_ident() == _interrupt.main_ident:  # unheld: a Ctrl-C held by a section is delivered here
                acquired = _interrupt.wait_sliced(functools.partial(self._lock.acquire, True), wait)
            else:
                acquired = self._lock.acquire(timeout=wait)
            if not acquired:
                raise ActorTimeoutError(unacknowledged(timeout))
            self._lock.release()  # let a second wait() return at once too
        if self.error is not None:
            # One error object answers every submission of a failed group: raised as it
            # is from many threads, each raise would add its frames to the same traceback.
            raise error_copy(self.error)
        return self.seqs

    @property
    def done(self) -> bool:
        """Whether the submission was committed or failed."""
        return self._over

    def _resolve(self, seqs: list[int], error: BaseException | None) -> None:
        self.seqs = seqs
        self.error = error
        self._over = True
        self._lock.release()


def error_copy(error: BaseException) -> BaseException:
    """A copy of a cogfabric ``error`` for one waiter: same type, message, attributes, notes and cause.

    Made without calling the class's ``__init__`` (whose arguments may differ from
    ``args``). Any other error (a built-in one may keep its data in C fields the copy
    would lose) is the error itself, with its traceback cleared.
    """
    if not isinstance(error, CogfabricError):
        return error.with_traceback(None)
    try:
        twin = type(error).__new__(type(error))
        twin.args = error.args
        twin.__dict__.update(error.__dict__)
    except (TypeError, AttributeError):
        return error.with_traceback(None)
    if hasattr(error, "__notes__"):
        twin.__notes__ = list(error.__notes__)
    twin.__cause__ = error.__cause__
    twin.__context__ = error.__context__
    twin.__suppress_context__ = error.__suppress_context__
    return twin


class _Submission(msgspec.Struct, gc=False):
    """One atomic change waiting for the writer: its events, and what to do once committed.

    Not tracked by Python's cyclic garbage collector (``gc=False``), and its events are a
    tuple (which the collector stops tracking at its first pass, as it holds only
    untracked events): in batch durability thousands of them wait for each commit, and
    as tracked objects they were promoted to the oldest generation and made the
    collector run full passes over every object of the process. The collector cannot
    free a cycle through an untracked object, so once settled a submission lets go of
    its ack and its post-commit action (``JournalWriter._settle``): an ack may hold
    an error whose traceback leads back to the submission.
    """

    events: tuple[Event, ...]
    ack: Ack | None
    snapshot: tuple[str, bytes, str, int] | None
    after: Callable[[bool], None] | None = None
    applied: tuple[str, int] | None = None  # (agent id, seq): the agent applied the publication at seq


class _StreamIndex:
    """Where each stream's last event is in a commit's events, read only as a snapshot asks.

    ``event.stream`` is a Python property: the writer reads it only for a snapshot, and
    then first for the few events just before it (an agent's snapshot comes right after
    its events); only when they do not hold the stream does it index the rest (forward,
    each event once per commit).
    """

    __slots__ = ("_events", "_last", "_read")

    def __init__(self, events: list[Event]) -> None:
        self._events = events
        self._last: dict[str, int] = {}
        self._read = 0
        """How many of the events ``_last`` covers (the first ones)."""

    def last_of(self, stream: str) -> int | None:
        """The index of ``stream``'s last event so far in the commit, None if it has none."""
        events = self._events
        end = len(events)
        stop = max(self._read, end - _LOOK_BACK)
        for i in range(end - 1, stop - 1, -1):
            if events[i].stream == stream:
                return i
        if stop > self._read:  # not among the last few: index the events not indexed yet
            last = self._last
            for i in range(self._read, end):
                last[events[i].stream] = i
            self._read = end
        return self._last.get(stream)


def _has_publication(events: list[Event]) -> bool:
    """Whether ``events`` hold a ``TaskContextPublished``: one pass over their types, in C."""
    return any(issubclass(kind, TaskContextPublished) for kind in set(map(type, events)))


class JournalWriterActor(pykka.ThreadingActor):
    """Owns the journal; drains the writer's queue into group commits."""

    use_daemon_thread = True  # as AgentActor's; an open runtime is closed at exit (Runtime.close)

    @staticmethod
    def _create_actor_inbox() -> Any:  # noqa: ANN401 - Pykka's ActorInbox protocol
        # The C SimpleQueue, as the agents': a put is one C call, so a Ctrl-C in the main
        # thread cannot land inside it. Pykka's default queue.Queue wakes its reader in
        # Python (Condition.notify), where an interrupt can lose the wake-up for good
        # (CPython issue 92530): the doorbell would then never ring again.
        return queue.SimpleQueue()

    def __init__(self, writer: JournalWriter) -> None:
        super().__init__()
        self._writer = writer

    def _start_actor_loop(self) -> None:
        """Pykka's hook that starts the actor's thread (``start_actor_loop``: out of threads, typed)."""
        runtime = self._writer._name  # noqa: SLF001
        start_actor_loop(
            self,
            super()._start_actor_loop,
            lambda running: RuntimeCapacityError("journal writer", running, runtime),
        )

    def on_start(self) -> None:
        """Note the writer's thread: it never waits for room in its own queue; name its runtime."""
        self._writer._writer_ident = threading.get_ident()  # noqa: SLF001
        self._writer.thread = threading.current_thread()
        name = self._writer._name  # noqa: SLF001
        if name is not None:
            thread = threading.current_thread()
            thread.name = thread_name(thread.name, name)

    def on_receive(self, message: object) -> None:
        """Handle the doorbell: commit everything waiting."""
        if message is _FLUSH:  # not ==: a host's broadcast may compare as it likes (a NumPy array)
            self._writer._drain()  # noqa: SLF001 - the actor is the writer's own thread

    def on_stop(self) -> None:
        """Commit whatever is still waiting before the actor stops (then close the journal, if asked).

        Whoever stopped it (``JournalWriter.stop``, or ``pykka.ActorRegistry.stop_all``
        in the host application), it refuses further submissions from other threads
        first: nothing would commit them once it is gone. Its own post-commit actions
        may still submit: this drain takes until nothing is left. A drain that raises
        (a bug's) fails what it leaves with its error (``_stopped``).
        """
        self._writer._refuse_more()  # noqa: SLF001
        try:
            self._writer._drain()  # noqa: SLF001
        except BaseException as exc:  # a bug's (Pykka logs it): what it left is failed with it
            self._writer._stopped(exc)  # noqa: SLF001
            raise
        self._writer._stopped()  # noqa: SLF001

    def on_failure(self, exception_type: object, exception_value: object, traceback: object) -> None:  # noqa: ARG002
        """Log with context, and refuse further submissions: nothing would commit them."""
        log.error("journal writer failed: %s", exception_value)
        self._writer._died(exception_value)  # noqa: SLF001
        self._writer._stopped()  # noqa: SLF001 - Pykka runs no on_stop after this


class JournalWriter:
    """The producers' side of the writer actor: submit, snapshot, flush, stop."""

    def __init__(
        self,
        journal: Journal,
        *,
        group_commit_max: int,
        call_timeout: float,
        backlog_max: int | None = None,
        name: str | None = None,
    ) -> None:
        """Start the writer actor for ``journal``.

        ``backlog_max`` bounds the events waiting for the writer (default: four times
        ``group_commit_max``); a producer that finds it full waits for room. ``name``:
        the runtime's (``Runtime.name``, printable), which the actor's thread carries.
        """
        self._journal = journal
        self._name = name
        self._group_max = group_commit_max
        self._timeout = call_timeout
        self._queue: collections.deque[_Submission] = collections.deque()
        self._queued = 0
        self._queued_snapshots: dict[str, _Submission] = {}
        """Each stream's latest snapshot still in the queue: a newer one of the stream drops it."""
        self._backlog_max = max(1, backlog_max if backlog_max is not None else 4 * group_commit_max)
        self._writer_ident = 0
        self.thread: threading.Thread | None = None
        """The writer actor's thread, once started (``stop`` waits for it to end)."""
        self._lock = threading.Lock()
        self._room: threading.Condition = _interrupt.Condition(self._lock)
        self._overfull_logged = False
        self._scheduled = False
        self._tickets = itertools.count(1)
        self._carried: list[tuple[str, int, bytes]] = []
        self._publishes: dict[int, set[str]] = {}
        """seq -> the agents a task context was published to that have not applied it yet.

        An entry goes once its last agent applied it (``publication_applied``), so
        memory follows the publications in flight, not all since start. An agent that is
        gone says so too (the runtime, or the killed agent's actor, for what reaches it
        after its kill). Only the writer thread changes it (without ``_lock``); other
        threads only test membership."""
        self._closed = False
        self._outside = False
        """Its actor was stopped by neither ``stop`` nor ``stop_soon`` (``_refuse_more``):
        by the host application's ``pykka.ActorRegistry.stop_all()``, say."""
        self._failure: BaseException | None = None
        self._waiting: collections.deque[list[_Submission]] = collections.deque()
        """The groups of the drain under way not committed yet (only the writer's thread uses it)."""
        self._cut_short: list[list[_Submission]] = []
        """The group whose commit raised out of the drain (a bug's; only the writer's thread uses it):
        ``_died`` or ``_stopped`` fails it, before ``_waiting``'s, rather than leave it unsettled.
        One at most: the innermost commit's (a refused group's half), not the group's around it."""
        self._failure_reported = False
        """Whether the program was told of the failure by ``Runtime.flush`` or ``close``:
        in batch durability ``close`` raises it otherwise (changes applied already may be
        lost, and a refusal on an agent's own path, say, reaches no caller)."""
        self.on_failstop: Callable[[], None] | None = None
        """Called on the writer's thread once a commit failed in storage (fail-stop): the
        runtime has every agent take the journal's word for its state (batch durability)."""
        self._commits = 0
        """Commits begun and ended so far: how ``stop`` tells a busy writer from a stalled one."""
        self._finished = 0
        """Write transactions over (stored, or refused by the journal), counted before their
        callers hear of it (``commits``); a flush's markers alone (an idle ``flush`` or
        ``Runtime.settle``) write nothing and are none, nor is a group refused by a fail-stop writer."""
        self._commit_began = 0.0
        """When the commit under way began (monotonic), 0 between commits."""
        self._done = False
        self._ended = _interrupt.Event()
        """Set as the writer's thread finishes stopping (``_stopped``): all it held committed or failed."""
        self._close_journal = False
        self._ref = JournalWriterActor.start(self)

    @property
    def journal(self) -> Journal:
        """The journal this writer owns (read it; never append to it directly)."""
        return self._journal

    @property
    def group_max(self) -> int:
        """At most this many events a commit (``group_commit_max``), but for a larger submission."""
        return self._group_max

    @property
    def failure(self) -> BaseException | None:
        """The error that made the journal fail-stop, if any."""
        return self._failure

    @property
    def backlog(self) -> int:
        """Events queued for the writer, not yet taken into a commit (read without the lock: a snapshot)."""
        return self._queued

    @property
    def backlog_max(self) -> int:
        """The backlog at which producers wait for room (``backlog_max``)."""
        return self._backlog_max

    @property
    def commits(self) -> int:
        """Write transactions finished since the writer started, refused ones too (``Runtime.stats``).

        Counted before the commit's callers are woken: a change whose call returned is in
        it. A commit of flush markers alone (``flush`` or ``Runtime.settle`` with nothing queued)
        writes nothing: it is not counted.
        """
        return self._finished

    @property
    def commit_seconds(self) -> float:
        """Seconds the commit under way has been running (monotonic), 0.0 between commits."""
        began = self._commit_began
        return max(0.0, time.monotonic() - began) if began else 0.0

    def submit(
        self,
        events: Sequence[Event],
        *,
        want_ack: bool = True,
        after: Callable[[bool], None] | None = None,
        wait_for_room: bool = True,
    ) -> Ack | None:
        """Hand ``events`` to the writer; they are committed together, in order.

        Returns an ``Ack`` to wait on (or None with ``want_ack=False``). ``after`` runs on
        the writer's thread once the commit is over, with whether it succeeded. While
        ``backlog_max`` events wait for the writer, this waits for room first (at most
        ``call_timeout``; see the module docstring), unless ``wait_for_room`` is False
        (the caller waited already, with ``wait_for_room()``).

        Raises:
            RuntimeClosedError: the writer was stopped.
            JournalError: the journal is fail-stop after an earlier failure.

        """
        return self._enqueue(events, None, want_ack=want_ack, after=after, room=wait_for_room)[1]

    def wait_for_room(self) -> None:
        """Wait (``call_timeout`` at most) while the backlog is full, without queuing anything.

        For a caller that then submits with ``wait_for_room=False`` while it holds a lock
        of its own that others wait for.

        Raises:
            RuntimeClosedError: the writer was stopped.
            JournalError: the journal is fail-stop.

        """
        with self._lock:
            self.check_usable()
            self._wait_for_room()

    def submit_nowait(
        self,
        events: Sequence[Event],
        *,
        after: Callable[[bool], None] | None = None,
        wait_for_room: bool = True,
    ) -> int:
        """Hand ``events`` to the writer without an acknowledgement; return their ticket.

        Does not wait for the commit; it does wait for room while ``backlog_max`` events
        are waiting already (at most ``call_timeout``), as ``submit`` does, unless
        ``wait_for_room`` is False.

        Raises:
            RuntimeClosedError: the writer was stopped (also while waiting for room).
            JournalError: the journal is fail-stop (also while waiting for room).

        """
        return self._enqueue(events, None, want_ack=False, after=after, room=wait_for_room)[0]

    def check_usable(self) -> None:
        """Raise what a submission would raise now: the writer is stopped, or fail-stop.

        On the writer's own thread a stopped writer takes submissions until it has
        finished stopping (see ``_own_last_drain``).

        Raises:
            RuntimeClosedError: the writer was stopped.
            JournalError: the journal is fail-stop (a fresh ``JournalStillFullError`` or
                ``JournalFailedError`` each time).

        """
        self.check_open()
        if self._failure is not None:
            raise self._refusal()

    def check_open(self) -> None:
        """Raise ``RuntimeClosedError`` once the writer was stopped (``check_usable``'s first check).

        For a change that would apply before its hand-over (batch durability): refused
        before it applies, not applied and then refused.
        """
        if self._closed and not self._own_last_drain():
            msg = "the journal writer is stopped"
            if self._outside:
                msg = f"the journal writer {STOPPED_FROM_OUTSIDE}"
            raise RuntimeClosedError(msg)

    def _own_last_drain(self) -> bool:
        """Whether this is the writer's own thread before it stopped: it still commits what comes.

        A post-commit action may journal more (the ``timeout`` dead letter of a request
        whose requester gave up at its commit): on the writer's thread it is queued and
        committed by the drain under way, also the last one, which takes until nothing is
        left. Once the writer has stopped (``_stopped``), nothing would commit it.
        """
        return threading.get_ident() == self._writer_ident and not self._done

    def _refusal(self) -> JournalError:
        """A fresh error for a change refused because the journal failed earlier.

        Fresh each time, with the failure as its cause: re-raising one object from many
        threads would grow its traceback without bound (and every log of it). After a
        full map it says so first: the commit that filled it may have been one no caller
        waited for (a snapshot's, or changes handed over in batch durability), so the
        first refusal a caller hears may be of a failure it never saw.
        """
        failure = self._failure
        error: JournalError
        if isinstance(failure, JournalFullError):
            msg = f"the journal is full, and this change is not stored (reopen it to append again): {failure}"
            error = JournalStillFullError(msg)
        else:
            msg = f"the journal writer refuses changes since an earlier failure: {failure}"
            error = JournalFailedError(msg)
        error.__cause__ = failure
        return error

    def _wait_for_room(self) -> None:
        """With the lock held: wait while ``backlog_max`` events are waiting already.

        The writer's own thread never waits (it is the one that makes room). After
        ``call_timeout`` the events are queued anyway, with a warning, rather than
        refused: in batch durability the change is applied already. If the writer stops
        or fails meanwhile, this raises as ``check_usable`` does.
        """
        if self._queued < self._backlog_max or threading.get_ident() == self._writer_ident:
            return
        room = self._room.wait_for(self._has_room, self._timeout)  # unheld but for its bookkeeping
        if not room and not self._overfull_logged:
            self._overfull_logged = True
            log.warning(
                "the journal writer took nothing for %s s; queuing past its backlog of %s",
                self._timeout,
                "1 event" if self._backlog_max == 1 else f"{self._backlog_max} events",
            )
        self.check_usable()

    def _has_room(self) -> bool:
        return self._queued < self._backlog_max or self._closed or self._failure is not None

    def _announce_failstop(self) -> None:
        hook = self.on_failstop
        if hook is not None:
            try:
                hook()
            except Exception:  # the failure stands; the agents reload at their next message
                log.exception("the runtime could not be told the journal is fail-stop")

    def _died(self, cause: object) -> None:
        """The writer actor failed on a bug: fail what waits, refuse what comes, wake producers.

        Also on the writer's thread as a commit raises SystemExit (``_commit``): Pykka
        runs ``on_stop``'s drain then, not ``on_failure``.

        As it makes the failure, one warning names the changes applied already that it
        drops (``_note_dropped``): those behind the group whose commit raised, and the
        queue's; that group's too if it raised no ``Exception`` (a SystemExit out of the
        append: nothing stored). Out of a commit, an ``Exception`` comes only after the
        append (``_commit_group`` catches the others): that group is stored.
        """
        with self._lock:
            failure = self._failure
            first = failure is None
            if failure is None:
                failure = JournalFailedError(f"the journal writer stopped after an error: {cause!r}")
                self._failure = failure
            queued = list(self._queue)
            self._queue.clear()
            self._queued_snapshots.clear()
            self._queued = 0
            self._room.notify_all()
        cut_short, behind = self._drained_unsettled()
        behind.extend(queued)
        if first:  # else the failure's first record named them (a half's _died, or _failed_here)
            self._note_dropped(behind if isinstance(cause, Exception) else [*cut_short, *behind], failure)
        self._fail([*cut_short, *behind], failure)

    def _drained_unsettled(self) -> tuple[list[_Submission], list[_Submission]]:
        """On the writer's thread: the drain's submissions a raise left unsettled, in order (then none).

        The group whose commit raised (``_cut_short``), then the drain's groups behind
        it (``_waiting``), apart: a drain raises out of the actor only on a bug (a
        backend's that returned fewer seqs than events, say), and their callers hear of it
        now, not at their timeout. One settled already (a group's part) is settled no more.
        """
        cut_short = [submission for group in self._cut_short for submission in group]
        behind = [submission for group in self._waiting for submission in group]
        self._cut_short.clear()
        self._waiting.clear()
        return cut_short, behind

    def submit_snapshot(self, stream: str, data: bytes, *, agent_id: str = "", publish_seq: int = 0) -> None:
        """Save ``data`` as ``stream``'s snapshot, covering its events submitted so far.

        An agent's snapshot also names the last published task context it handled
        (``publish_seq``): if a later publication to it was committed before the
        snapshot's own events, the snapshot is saved as covering only the seqs before
        that publication, so replay applies it (and re-applies the agent's own later
        events, which are idempotent) in journal order. A snapshot of ``stream`` still
        waiting in the queue is dropped for this one (``_supersede``).
        """
        self._put((), (stream, data, agent_id, publish_seq), want_ack=False)

    def publication_applied(self, agent_id: str, seq: int) -> None:
        """Note that ``agent_id`` applied (or will never apply) the publication at ``seq``.

        Queued like a submission, so it takes effect after every snapshot the agent
        submitted before: a snapshot that predates the publication is still clamped to
        it (``submit_snapshot``). A no-op once the writer is stopped or failed.
        """
        if seq not in self._publishes:
            return  # every target is done with it already
        with contextlib.suppress(RuntimeClosedError, JournalError):  # stopped or failed: nothing to clamp
            self._enqueue((), None, want_ack=False, after=None, applied=(agent_id, seq))

    def _clamp(self, covered: int, agent_id: str, publish_seq: int) -> int:
        if agent_id:
            for seq, agents in self._publishes.items():
                if publish_seq < seq <= covered and agent_id in agents:
                    return seq - 1
        return covered

    def _forget_applied(self, taken: list[_Submission]) -> None:
        """Drop the agents that applied a publication from its entry, and empty entries."""
        publishes = self._publishes
        for submission in taken:
            if submission.applied is not None:
                agent_id, seq = submission.applied
                agents = publishes.get(seq)
                if agents is not None:
                    agents.discard(agent_id)
                    if not agents:
                        del publishes[seq]

    def _put(
        self,
        events: Sequence[Event],
        snapshot: tuple[str, bytes, str, int] | None,
        *,
        want_ack: bool,
        after: Callable[[bool], None] | None = None,
    ) -> Ack | None:
        return self._enqueue(events, snapshot, want_ack=want_ack, after=after)[1]

    def _enqueue(
        self,
        events: Sequence[Event],
        snapshot: tuple[str, bytes, str, int] | None,
        *,
        want_ack: bool,
        after: Callable[[bool], None] | None,
        applied: tuple[str, int] | None = None,
        room: bool = True,
    ) -> tuple[int, Ack | None]:
        """Queue one submission (waiting for room if it has events); ring the doorbell once."""
        with self._lock:
            if self._closed or self._failure is not None:
                self.check_usable()
            if events:
                if room and self._queued >= self._backlog_max:
                    self._wait_for_room()
                self._queued += len(events)
            ticket = next(self._tickets)
            ack = Ack(ticket) if want_ack else None
            submission = _Submission(tuple(events), ack, snapshot, after, applied)
            if snapshot is not None:
                self._supersede(submission, snapshot[0])
            self._queue.append(submission)
            if not self._scheduled:
                # Rung before the flag is set, under the lock: a Ctrl-C between the two
                # costs a spare ring (a drain that finds nothing), never a lost one, which
                # would leave every later submission unrung. The actor may have stopped
                # since this submission was queued: it was queued before on_stop refused
                # more (under the lock), or by the writer's own thread before it stopped
                # (``_own_last_drain``), so that drain commits it, or on_failure's fails
                # it. Either way its ack is resolved, not left waiting.
                with contextlib.suppress(pykka.ActorDeadError):
                    self._ref.tell(_FLUSH)
                self._scheduled = True
        return ticket, ack

    def _supersede(self, submission: _Submission, stream: str) -> None:
        """Under the lock: drop ``stream``'s snapshot still waiting in the queue for ``submission``'s.

        The newer one covers every event the older did (it was taken after them, of the
        same state and later): saving both would write the older for nothing, and in
        batch durability an agent that changes faster than the writer commits would
        queue a copy of its whole state every ``snapshot_interval`` changes (a state of
        megabytes: hundreds of megabytes waiting, then written in one transaction).
        """
        older = self._queued_snapshots.get(stream)
        if older is not None:
            older.snapshot = None  # a submission of no events and no snapshot: nothing to write
        self._queued_snapshots[stream] = submission

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything submitted so far is committed.

        Every event, that is. A snapshot that covers an event of the same commit is saved
        with the writer's next commit, which it starts at once when nothing else waits,
        and may still be on its way: a crash then loses only that snapshot, so recovery
        replays from the one before it.

        Raises:
            ActorTimeoutError: not within ``timeout`` (default ``call_timeout``).
            JournalError: the journal failed (fail-stop).
            RuntimeClosedError: the writer was stopped.

        """
        ack = self._put((), None, want_ack=True)
        assert ack is not None
        ack.wait(self._timeout if timeout is None else timeout)

    def hand_over_and_flush(self, hand_over: Iterable[Callable[[], object]] = ()) -> None:
        """Hand changes over (``hand_over``: agents' outbox flushes), then wait for their commit.

        Unless the journal is fail-stop, before or meanwhile: then it returns, and what
        the journal holds is what a reader finds (``Runtime.last_checkpoint``,
        ``ctx.last_checkpoint``).

        Raises:
            ActorTimeoutError: not committed within ``call_timeout``.
            JournalError: one that did not come of a fail-stop journal.

        """
        try:
            for step in hand_over:
                step()
            if self._failure is None:
                self.flush()
        except JournalError:
            if self._failure is None:
                raise

    @property
    def failure_unreported(self) -> BaseException | None:
        """The failure (fail-stop) that neither ``Runtime.flush`` nor ``close`` has raised yet."""
        return None if self._failure_reported else self._failure

    def failure_reported(self) -> None:
        """Note that ``Runtime.flush`` or ``close`` raised the failure to the program."""
        self._failure_reported = self._failure is not None

    def _note_dropped(self, taken: list[_Submission], error: BaseException) -> None:
        """Log the changes nobody waits for that a failed journal drops (applied already: batch).

        One record for all of them: the failed commit's, and those the failure left
        waiting behind it (``_left_behind``), with the stream of each one's first change
        (``_AGENTS_NAMED`` of them at most, then how many more). Also for what the writer
        drops as it dies (``_died``) or stops (``_stopped``) after a drain that raised,
        once: the first of them fails the changes, the other finds none left.
        """
        unwaited = [s for s in taken if s.ack is None and s.events]
        if unwaited:
            streams = list(dict.fromkeys(s.events[0].stream for s in unwaited))
            where = streams[0]
            if len(streams) > 1:
                where += ", then " + ", ".join(streams[1:_AGENTS_NAMED])
            if len(streams) > _AGENTS_NAMED:
                where += f" and {len(streams) - _AGENTS_NAMED} more"
            count = sum(len(s.events) for s in unwaited)
            log.warning(
                "the journal failed; %s applied already (%s %s) %s not stored: %s",
                "1 change" if count == 1 else f"{count} changes",
                "to" if count == 1 else "first to",
                where,
                "is" if count == 1 else "are",
                error,
            )

    def settled(self) -> bool:
        """Wait (``call_timeout`` at most) until everything submitted so far is over.

        True once it is committed, or the journal failed (then it holds what it holds);
        False if the writer is still busy. For a producer that stopped waiting for a
        commit and must now take the journal's word for what is stored.
        """
        try:
            self.flush()
        except ActorTimeoutError:
            return False
        except JournalError:
            pass
        return True

    def stop(self, timeout: float | None = None) -> None:
        """Commit what is waiting, then stop the actor; idempotent.

        Waits for as many commits as the queue takes, but not for a writer that makes
        no commit for ``timeout`` seconds (default ``call_timeout``).

        Raises:
            ActorTimeoutError: the writer stalled; what it still holds is not committed yet
                (it goes on: ``close_journal_when_stopped`` leaves the journal to it).

        """
        with self._lock:
            asked = self._closed
            self._closed = True
            self._room.notify_all()
        stall = self._timeout if timeout is None else timeout
        if not asked:
            with contextlib.suppress(pykka.ActorDeadError):  # it failed, and has ended
                self._ref.stop(block=False)
        # Whoever asked it to stop (this call, stop_soon, or a host application's
        # pykka.ActorRegistry.stop_all, whose on_stop may be committing right now), wait
        # for the writer's thread to end: only then may the journal be closed. It commits
        # everything queued before it stops: in batch durability that can be many group
        # commits, so wait while it makes progress (a commit begun or ended within
        # ``stall`` seconds, or one under way for less than ten times that: a large
        # commit on a slow disk), and give up only when it stalls.
        while True:
            commits = self._commits
            if self._ended.wait(bounded_wait(stall, 0.0)):
                thread = self.thread  # ended is set on it, before it runs out
                if thread is not None and thread is not threading.current_thread():
                    _interrupt.join(thread, bounded_wait(stall, 0.0))
                return
            began = self._commit_began
            under_way = time.monotonic() - began if began else 0.0
            if self._commits != commits or (began and under_way < _PATIENCE * stall):
                continue
            if began:
                msg = f"the journal writer did not stop: its commit has been under way for {under_way:.1f} s"
            else:
                msg = f"the journal writer did not stop: no commit began or ended for {stall} s"
            raise ActorTimeoutError(msg)

    def stop_soon(self) -> None:
        """Ask the writer to stop once it has committed what is queued, without waiting."""
        with self._lock:
            self._closed = True
            self._room.notify_all()
        with contextlib.suppress(pykka.ActorDeadError):
            self._ref.stop(block=False)

    def close_journal_when_stopped(self) -> bool:
        """Have the writer close the journal once it stops; True if it had stopped, and it is closed.

        For a ``stop`` that timed out: the journal must not be closed under a commit.
        """
        with self._lock:
            if not self._done:
                self._close_journal = True
                return False
        self._journal._close(_interrupt.wait)  # noqa: SLF001 - a backup waited for unheld: a Ctrl-C stops it
        return True

    def _refuse_more(self) -> None:
        """On the writer's thread, as it begins to stop: refuse submissions from other threads.

        Not asked by ``stop`` or ``stop_soon``, the stop came from outside the runtime
        (logged): nothing can be journaled from now on, and calls say so.
        """
        with self._lock:
            self._outside = not self._closed
            self._closed = True
            self._room.notify_all()
        if self._outside:
            log.warning("the journal writer %s", STOPPED_FROM_OUTSIDE)

    def _stopped(self, cause: BaseException | None = None) -> None:
        """On the writer's thread, as it stops: fail what it left, close the journal if asked.

        Only a drain that raised (``cause``) leaves submissions behind (``_drained_unsettled``,
        then the queue's); their callers hear it now rather than at their timeout. Unless
        the raise made a failure (a SystemExit: ``_died`` failed them with it), it was a
        bug's: the callers of a group whose commit raised (stored: see ``_died``) hear that
        error, the others that the writer stopped before committing theirs, and one warning
        names those of their changes applied already (``_note_dropped``).
        """
        try:
            cut_short, left = self._drained_unsettled()
            with self._lock:
                self._done = True
                close = self._close_journal
                left.extend(self._queue)
                self._queue.clear()
                self._queued_snapshots.clear()
                self._queued = 0
                self._room.notify_all()
            if self._failure is not None:  # a SystemExit's (_died failed the drain's already)
                self._fail([*cut_short, *left], self._failure)
            elif cut_short or left:  # a bug's: a commit that raised had appended (see _died)
                stored = RuntimeClosedError(f"the journal writer stopped after an error: {cause!r}")
                self._fail(cut_short, stored)
                after = "" if cause is None else f", after an error: {cause!r}"
                error = RuntimeClosedError(f"the journal writer stopped before committing it{after}")
                self._note_dropped(left, error)
                self._fail(left, error)
            if close:
                self._journal.close()
        finally:
            self._ended.set()

    # ----------------------------------------------------------- writer thread

    def _take(self) -> list[_Submission]:
        with self._lock:
            taken = list(self._queue)
            self._queue.clear()
            self._queued_snapshots.clear()
            if self._queued >= self._backlog_max:
                self._room.notify_all()
                self._overfull_logged = False  # warn again the next time it stays full
            self._queued = 0
            if not taken:
                self._scheduled = False
            return taken

    def _drain(self) -> None:
        while True:
            taken = self._take()
            if not taken:
                if self._carried:
                    self._commit([])
                return
            # At most group_commit_max events a commit; a submission is never split (it
            # is one atomic change), so one larger than the limit is a commit of its own.
            waiting = self._waiting
            group: list[_Submission] = []
            count = 0
            for submission in taken:
                size = len(submission.events)
                if group and count + size > self._group_max:
                    waiting.append(group)
                    group, count = [], 0
                group.append(submission)
                count += size
            waiting.append(group)
            while waiting:  # a failure takes the groups left (_left_behind)
                self._commit(waiting.popleft())

    def _left_behind(self) -> list[_Submission]:
        """Once the journal failed: the drain's groups not committed yet, and all that is queued.

        Nothing is queued after the failure (``_enqueue`` refuses): these are all the
        changes it drops, failed at once, with one record of what was applied already.
        """
        left = [submission for group in self._waiting for submission in group]
        self._waiting.clear()
        left.extend(self._take())
        return left

    def _gather(
        self, taken: list[_Submission]
    ) -> tuple[list[Event], list[Snapshot], list[tuple[str, bytes, int, str, int]]]:
        """The events of a commit and its snapshots.

        A snapshot that covers an event of this very commit cannot know its seq yet:
        it is returned apart, to be resolved after the append and saved with the next.
        """
        events: list[Event] = []
        in_group: list[tuple[str, bytes, int, str, int]] = []
        snapshots = [Snapshot(stream, seq, data) for stream, seq, data in self._carried]
        self._carried = []
        index: _StreamIndex | None = None
        for submission in taken:
            if submission.snapshot is None:
                events.extend(submission.events)
                continue
            stream, data, agent_id, publish_seq = submission.snapshot
            if index is None:
                index = _StreamIndex(events)
            at = index.last_of(stream)
            if at is not None:
                in_group.append((stream, data, at, agent_id, publish_seq))
            else:  # the stream's last event is committed already: the journal knows its seq
                covered = self._clamp(self._journal.stream_head(stream), agent_id, publish_seq)
                if covered > 0:
                    snapshots.append(Snapshot(stream, covered, data))
        return events, snapshots, in_group

    def _commit(self, taken: list[_Submission]) -> None:
        self._commits += 1
        self._commit_began = time.monotonic()
        try:
            self._commit_group(taken)
        except BaseException as exc:
            if not self._cut_short:  # a bug's: failed by _died or _stopped, never committed again
                # The innermost commit's: a half's (_refused_group) raises out of its group's
                # commit too, whose rest was not appended and waits behind it (_waiting).
                self._cut_short.append(taken)
            if not isinstance(exc, Exception):
                # SystemExit (a backend's sys.exit): Pykka runs no on_failure, but on_stop,
                # whose drain would commit the groups behind this one and what was queued
                # meanwhile. Fail-stop now, failing them in order, as _died does for a bug.
                log.exception("the journal writer stopped on %s; it refuses changes", type(exc).__name__)
                self._died(exc)
            raise
        finally:
            self._commit_began = 0.0
            self._commits += 1

    def _commit_group(self, taken: list[_Submission]) -> None:
        if self._failure is not None:
            refusal = self._refusal()
            self._note_dropped(taken, refusal)
            self._fail(taken, refusal)
            return
        carried = self._carried
        try:
            events, snapshots, in_group = self._gather(taken)
            try:
                # the runtime checked every value at its boundary: no decode per event here
                seqs = self._journal.append(events, snapshots=snapshots, validate=False)
            finally:
                if events or snapshots:  # else no transaction: flush markers alone (an idle flush)
                    self._finished += 1  # over, before any of its callers wakes (Runtime.stats)
        except (JournalError, TypeError, ValueError) as exc:
            if isinstance(exc, JournalError) and self._journal_failed():
                # Once, as it happens: in sync durability only the callers hear it otherwise
                # (each refused change after it raises again, without a record here).
                log.error(  # noqa: TRY400 - its text names the journal and the cause; a traceback adds none
                    "the journal is fail-stop; every change is refused until it is reopened: %s", exc
                )
                self._failure = exc
                self._failed_here(taken, exc)
                return
            self._refused_group(taken, exc, carried)
            return
        except Exception as exc:
            # Not an error the journal documents: whether anything was stored is unknown,
            # so the writer goes fail-stop, like the journal after a storage error.
            log.exception("the journal writer met an unexpected error; it refuses further changes")
            failure = JournalFailedError(f"the journal writer stopped after an error: {exc!r}")
            failure.__cause__ = exc
            self._failure = failure
            self._failed_here(taken, failure)
            return
        if len(seqs) != len(events) or _has_publication(events):  # else the loop would find nothing
            for event, seq in zip(events, seqs, strict=True):
                if isinstance(event, TaskContextPublished) and event.agents:
                    self._publishes[seq] = set(event.agents)
        carried = [(s, self._clamp(seqs[i], a, p), d) for s, d, i, a, p in in_group]
        self._carried = [(s, seq, d) for s, seq, d in carried if seq > 0]
        if self._publishes:
            self._forget_applied(taken)  # after this commit's clamps: they came first
        at = 0
        for submission in taken:
            n = len(submission.events)
            if submission.ack is not None or submission.after is not None:  # else nothing to settle
                self._settle(submission, seqs[at : at + n], None)
            at += n

    def _failed_here(self, taken: list[_Submission], failure: BaseException) -> None:
        """The commit of ``taken`` made the journal fail-stop: fail it, and all that waits behind it.

        One warning for the changes applied already that none of it stores; the callers
        of ``taken`` get ``failure`` itself, those behind it a refusal (``_refusal``).
        """
        left = self._left_behind()
        self._note_dropped([*taken, *left], failure)
        self._fail(taken, failure)
        self._announce_failstop()
        if left:
            self._fail(left, self._refusal())

    def _refused_group(
        self, taken: list[_Submission], error: Exception, carried: list[tuple[str, int, bytes]]
    ) -> None:
        """The journal refused the group and stored nothing (a bad stream name, a value it cannot encode).

        One bad submission must not take the others with it: the halves are committed
        apart until the bad one stands alone. Nor the snapshots carried from the last
        commit (``_gather``): they are saved on their own first (dropped if refused too),
        then the group is tried again without them.
        """
        # What is committed after the first part waits at the head of the drain's groups:
        # a failure of the first part fails it with the rest, in order (_left_behind).
        if carried and taken:
            self._carried = carried
            self._waiting.appendleft(taken)
            self._commit([])
            return
        if len(taken) > 1:
            half = len(taken) // 2
            self._waiting.appendleft(taken[half:])
            self._commit(taken[:half])
            return
        if taken:
            self._refused(taken[0], error)
        self._fail(taken, error)

    @staticmethod
    def _refused(submission: _Submission, error: BaseException) -> None:
        """Say so when the journal refuses events that nobody waits for (batch durability).

        Their changes are applied already, so until the agent is reloaded its live
        state holds what the journal does not. The public API checks the arguments it
        journals so that this should not happen; if it does, it must not pass unseen.
        """
        if submission.ack is None and submission.events:
            first = submission.events[0]
            one = len(submission.events) == 1
            log.error(
                "the journal refused %s of %s (%s%s) that %s applied already: %s",
                "1 event" if one else f"{len(submission.events)} events",
                first.stream,
                "" if one else "first ",
                type(first).__name__,
                "was" if one else "were",
                error,
            )

    @staticmethod
    def _settle(submission: _Submission, seqs: list[int], error: BaseException | None) -> None:
        """Resolve a submission's ack, run its post-commit action; then let both go.

        Every path that settles a submission ends here, one submission after another in
        the order they were handed over: a submission's action runs before the next
        one's waiter wakes. A sync ``ctx.send`` is delivered by its action, a request or
        a broadcast by its sender once its ack resolves: woken first, a sender's request
        could reach the recipient ahead of the sends it made before it.

        A submission is not tracked by the cyclic garbage collector, so no cycle may
        pass through it, and a settled one would close one: its ack holds the error,
        whose traceback holds the frame that holds the submission.
        """
        ack, after = submission.ack, submission.after
        submission.ack = submission.after = None
        if ack is not None:
            ack._resolve(seqs, error)  # noqa: SLF001
        if after is not None:
            try:
                after(error is None)
            except Exception:
                log.exception("a post-commit action failed")

    def _journal_failed(self) -> bool:
        return bool(getattr(self._journal, "is_failed", False))

    @classmethod
    def _fail(cls, taken: list[_Submission], error: BaseException) -> None:
        for submission in taken:
            cls._settle(submission, [], error)
