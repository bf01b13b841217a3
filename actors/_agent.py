"""The agent actor: one Pykka actor per agent, the only owner of its state."""

from __future__ import annotations

import collections
import contextlib
import logging
import queue
import threading
import time
from types import AsyncGeneratorType, CoroutineType
from typing import TYPE_CHECKING, Any, ClassVar, Final, NoReturn, Protocol, cast, runtime_checkable

import msgspec
import pykka

from cogfabric.events import (
    AgentFailed,
    AgentKilled,
    AgentRecovered,
    CheckpointTaken,
    CognitiveState,
    CognitiveStateSet,
    IpcDelivered,
    IpcMessage,
    IpcSubscribed,
    IpcUnsubscribed,
    LifecycleChanged,
    PrivateSet,
    TaskContextPublished,
    TaskContextSet,
    UnencodableValueError,
    admit_mapping,
    admit_value,
    copy_mapping,
    copy_value,
    upgrade_cognitive_state,
)
from cogfabric.events._codec import journal_repr, journal_text, require_str
from cogfabric.store import JournalError, JournalFailedError

from . import _interrupt
from ._clock import bounded_wait
from ._core import (
    ASYNC_ON_MESSAGE,
    last_checkpoint_in,
    printable,
    replay_agent,
    start_actor_loop,
    thread_name,
)
from ._errors import (
    ActorTimeoutError,
    AgentCapacityError,
    AgentCheckpointNotSupportedError,
    AgentNotFoundError,
    AgentNotRegisteredError,
    AgentNotSuspendedError,
    AgentRetiredError,
    AgentRunningError,
    ClockError,
    IpcInvalidMessageError,
    IpcNoHandlerError,
    RuntimeClosedError,
    UserCodeError,
)
from ._handle import ContextView
from ._llm import JournaledLLM, NoLLMProviderError
from ._memory import agent_memory
from ._state import AgentSnapshot, AgentState, apply_event, encode_snapshot

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from cogfabric.events import Event
    from cogfabric.events._events import Lifecycle

    from ._bus import IpcBus
    from ._core import Core
    from ._memory import MemoryManager
    from ._writer import Ack, JournalWriter

__all__ = ["AgentActor", "AgentContext", "Behavior", "FanOut", "InFlight", "Shared", "on_agent_thread"]

log = logging.getLogger(__name__)


class _Kind(int):
    """The first item of every mailbox message the runtime sends its agents (an ``int`` of its own).

    The host application's Pykka actors share Pykka's registry with the agents:
    ``pykka.ActorRegistry.broadcast(message)`` tells every agent ``message`` too. A message
    whose first item is no ``_Kind`` is none of the runtime's (``AgentActor.on_receive``
    ignores it: ``_not_ours``), however it is shaped: a tuple ``(1, "x")`` is not ``(IPC, message)``.
    """

    __slots__ = ()


CALL: Final = _Kind(0)
IPC: Final = _Kind(1)
PUBLISH: Final = _Kind(2)
PACED: Final = _Kind(3)  # (PACED, message, window): handled, the fan-out window gets its slot back
_KIND_NAMES: Final = {CALL: "a call", IPC: "a message", PUBLISH: "a publish", PACED: "a message"}
"""What a log line calls each kind of mailbox entry."""
LIFECYCLE_CALLS: Final = frozenset({"suspend", "resume", "retire", "recover", "kill"})
"""The operations whose ``(CALL, name, args)`` message takes a lifecycle slot (``acquire_control``)."""
READS: Final = frozenset({"task_context", "private", "context_view", "cognitive_state"})
"""The operations that change nothing: an idle agent's answer is read without a message (``read_now``)."""
# Read once: every access to an enum member through its class is an attribute lookup
# through the enum's descriptor, a cost on each message that reads them.
_RUNNING: Final = AgentState.RUNNING
_NOT_HANDLING: Final = (AgentState.SUSPENDED, AgentState.RETIRED)  # lifecycles a message is not handled in


@runtime_checkable
class Behavior(Protocol):
    """What an agent does with the IPC messages it receives.

    ``on_message`` runs inside the agent's actor, one message at a time: a plain
    function (a spawn refuses an ``async def`` one, which nothing would await, and a
    coroutine or async generator it returns fails its message with ``TypeError``). Its return
    value answers a request (None means "I will reply later with ``bus.reply``").
    If it raises, the failure is journaled, a dead letter records the message, the
    requester (if any) gets ``IpcHandlerError``, and the agent is restarted from the
    journal with a fresh behavior from its registered factory (an instance whose class
    is not registered has none: the agent keeps it). A subclass defines its own
    ``on_message``: this one is a stub, and a spawn refuses a behavior that has only it.
    """

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ANN401 - any reply
        """Handle one message."""
        ...


def _refuse_coroutine(behavior: Behavior, result: object) -> NoReturn:
    """Fail a message whose behavior returned a coroutine or an async generator: nothing would run it.

    A spawn refuses an ``async def on_message``; this catches a plain one that returns a
    coroutine (of a helper that is ``async``) or an async generator, which would
    otherwise do nothing, silently.

    Raises:
        TypeError: always (a coroutine closed, so that none warns it was never awaited).

    """
    kind = "an async generator" if isinstance(result, AsyncGeneratorType) else "a coroutine"
    if isinstance(result, CoroutineType):
        result.close()
    msg = f"{type(behavior).__name__}.on_message returned {kind}: {ASYNC_ON_MESSAGE}"
    raise TypeError(msg)


class InFlight:
    """How many messages a runtime's agents hold: in their mailboxes, or in hand (``Runtime.settle``).

    Counted up when a message takes its mailbox slot (``MailboxSlots``, under the
    slot's own lock), down when the agent has handled it (``MailboxSlots.handled``, at
    the end of ``AgentActor.on_receive``, after the messages it sent took their own
    slots), or gives the slot back unhandled (``MailboxSlots.release``: a message that
    never reached the mailbox), or its actor ended with mail left (``MailboxSlots.retire``).
    So it reaches zero only when no agent has a message waiting or in hand, and a chain of
    messages keeps it above zero from its first to its last.

    The count is the length of a deque of Nones: its appends and pops are thread-safe
    (documented) and take no lock, a fraction of a locked counter's cost on the path
    every message takes (PITFALLS.md §9). ``lock`` and ``zero`` are for the waiters
    only: ``zero`` is signalled when the count reaches zero while one waits.
    """

    __slots__ = ("held", "lock", "waiters", "zero")

    def __init__(self) -> None:
        """Nothing in flight."""
        self.held: collections.deque[None] = collections.deque()
        """One None a message in flight: ``MailboxSlots`` appends one as a message takes its
        slot; ``done`` and ``MailboxSlots.handled`` pop."""
        self.lock = threading.Lock()
        self.zero = _interrupt.Condition(self.lock)
        self.waiters = 0

    @property
    def count(self) -> int:
        """How many messages are in flight now."""
        return len(self.held)

    def done(self, handled: int = 1) -> None:
        """``handled`` messages are over: wake the waiters if none is left."""
        held = self.held
        for _ in range(handled):
            try:
                held.pop()
            except IndexError:  # pragma: no cover - more done than added: a bug, never a hang
                break
        if not held and self.waiters:
            self.wake()

    def wake(self) -> None:
        """Wake every waiter to look again (the count reached zero, or the runtime is closing)."""
        with self.lock:
            self.zero.notify_all()

    def wait_for_zero(self, deadline: float, stop: Callable[[], bool]) -> bool:
        """Wait until nothing is in flight, or ``stop()``; False once ``deadline`` (monotonic) passed.

        A wait that times out ends it, also when ``time.monotonic`` stands still (under
        freezegun without ``tick``): the condition's wait is real time. The count is
        read under ``lock`` after ``waiters`` counts this one, and ``done`` reads
        ``waiters`` after its pop, so one of the two sees the other: a zero reached
        meanwhile is never missed.
        """
        with self.lock:
            self.waiters += 1
            try:
                return self.zero.wait_for(lambda: not self.held or stop(), deadline - time.monotonic())
            finally:
                self.waiters -= 1


class MailboxSlots:
    """A count of an agent's free mailbox slots, as ``threading.BoundedSemaphore``.

    Bounded above (releasing more than was taken is a bug); ``take`` may push it below
    zero for a message that must arrive whatever the bound.

    Every message sent takes a slot and the agent gives it back when it handles the
    message, so the uncontended path runs twice per message: here it is one plain lock,
    where each of the semaphore's calls goes through ``Condition``'s Python methods. Only
    a sender facing a full mailbox waits on the condition.

    With ``in_flight``, every slot taken counts a message in flight there, until the
    agent has handled it (``handled``), or the slot is given back unused (``release``),
    or the actor ended (``retire``); ``take_up`` and ``release_control``, the agent's
    own, free the slot and leave the message counted while the agent handles it.
    """

    CONTROL_EXTRA: ClassVar[int] = 16
    """How many lifecycle calls a mailbox holds at most, past its size (``acquire_control``)."""

    __slots__ = (
        "_closed",
        "_control",
        "_control_waiters",
        "_flight",
        "_free",
        "_lock",
        "_room",
        "_size",
        "_waiters",
    )

    def __init__(self, size: int, in_flight: InFlight | None = None) -> None:
        """``size`` free slots; ``in_flight``: the runtime's count of messages in flight, if any."""
        self._size = size
        self._free = size
        self._waiters = 0
        self._control = 0
        """Lifecycle calls in the mailbox (taken by ``acquire_control``, not yet handled)."""
        self._control_waiters = 0
        self._closed = False
        self._lock = threading.Lock()
        self._room: threading.Condition = _interrupt.Condition(self._lock)
        self._flight = in_flight
        """None once ``retire`` handed what was left back (or never counted)."""

    @property
    def control_pending(self) -> bool:
        """Whether a lifecycle call waits in the mailbox (taken, not yet handled)."""
        return self._control > 0

    def acquire(self, timeout: float | None = None) -> bool:
        """Take a slot, waiting up to ``timeout`` seconds for one; False if none came or on ``close``."""
        with self._lock:
            if self._free <= 0:
                self._waiters += 1
                try:  # unheld: a Ctrl-C held by the caller's section is delivered here
                    if not self._room.wait_for(self._has_free, timeout) or self._closed:
                        return False
                finally:
                    self._waiters -= 1
            self._free -= 1
            if (flight := self._flight) is not None:
                flight.held.append(None)
            return True

    def acquire_control(self, timeout: float | None = None) -> bool:
        """Take a slot for a lifecycle call, whether the mailbox is full or not.

        A kill must reach an agent whose own busy behavior keeps its mailbox full, so a
        lifecycle call does not wait for a free slot; but a caller that timed out may call
        again, so the mailbox holds ``CONTROL_EXTRA`` lifecycle calls at most. Past that,
        it waits up to ``timeout`` seconds for one to be handled (``release_control``);
        False if none was, or on ``close``.
        """
        with self._lock:
            if self._control >= self.CONTROL_EXTRA:
                self._control_waiters += 1
                try:  # unheld: a Ctrl-C held by the caller's section is delivered here
                    room = self._room.wait_for(self._has_control_room, timeout)
                    if not room or self._closed:
                        return False
                finally:
                    self._control_waiters -= 1
            self._control += 1
            self._free -= 1
            if (flight := self._flight) is not None:
                flight.held.append(None)
            return True

    def release_control(self) -> None:
        """Give back a slot ``acquire_control`` took: its call is being handled (in flight still)."""
        with self._lock:
            if self._control <= 0:
                msg = "a lifecycle call's mailbox slot was released more often than it was taken"
                raise ValueError(msg)
            self._control -= 1
            self._free += 1
            if self._control_waiters:  # a sender's room and a lifecycle call's differ: wake both kinds
                self._room.notify_all()
            elif self._waiters:
                self._room.notify()

    def close(self) -> None:
        """Wake every sender waiting for room: the runtime is closing, none will come."""
        with self._lock:
            self._closed = True
            self._room.notify_all()

    def take(self) -> None:
        """Take a slot even when none is free: the mailbox holds one message over its size.

        For a message that must arrive whatever the bound (a task context publication,
        durable already); ``free`` goes below zero until the agent catches up.
        """
        with self._lock:
            self._free -= 1
            if (flight := self._flight) is not None:
                flight.held.append(None)

    def release(self) -> None:
        """Give back a slot whose message never reached the agent: it is no longer in flight.

        Raises:
            ValueError: more slots given back than were taken (a bug).

        """
        with self._lock:
            if self._free >= self._size:
                msg = "a mailbox slot was released more often than it was taken"
                raise ValueError(msg)
            self._free += 1
            if self._waiters:
                self._room.notify()
            if (flight := self._flight) is not None:
                flight.done()

    def take_up(self) -> None:
        """Give a slot back as the agent takes its message up: in flight until ``handled``.

        ``release`` without its ``InFlight.done``, written out rather than shared: a
        helper would add a call to every message's path.

        Raises:
            ValueError: more slots given back than were taken (a bug).

        """
        with self._lock:
            if self._free >= self._size:
                msg = "a mailbox slot was released more often than it was taken"
                raise ValueError(msg)
            self._free += 1
            if self._waiters:
                self._room.notify()

    def handled(self) -> None:
        """The agent is done with a message it took up (on its actor's thread): no longer in flight."""
        flight = self._flight
        if flight is not None:
            held = flight.held
            try:
                held.pop()
            except IndexError:  # pragma: no cover - more done than added: a bug, never the actor's end
                return
            if not held and flight.waiters:
                flight.wake()

    def retire(self) -> None:
        """The agent's actor ended (on its thread): what its mailbox still counted is over.

        Messages Pykka dropped behind the actor's stop, and slots taken for messages it
        will never get, no longer count as in flight; nor does anything taken from now on.
        """
        with self._lock:
            flight, self._flight = self._flight, None
            left = self._size - self._free
            if flight is not None and left > 0:
                flight.done(left)

    @property
    def free(self) -> int:
        """How many slots are free now (below zero after ``take`` on a full mailbox)."""
        return self._free

    @property
    def waiting(self) -> int:
        """How many slots are taken now: messages admitted and not yet taken up by the agent."""
        return self._size - self._free

    @property
    def empty(self) -> bool:
        """Whether no message waits in the mailbox: a new one may wake an idle agent."""
        return self._free >= self._size

    def _has_free(self) -> bool:
        return self._free > 0 or self._closed

    def _has_control_room(self) -> bool:
        return self._control < self.CONTROL_EXTRA or self._closed


class FanOut:
    """Paces one message to many agents, so that few idle agents wake at once.

    Every agent is a thread. A message to an idle agent wakes its thread, which then
    waits for the GIL; CPython wakes every thread waiting for the GIL once per switch
    interval, so thousands woken at once cost far more than thousands woken a few at a
    time (bench/fabric.py's fan-out group; docs/performance.md, "Many agents at once").

    Before it tells the next idle agent, a fan-out waits until fewer than ``WINDOW`` of
    the idle agents it told are still handling its message. An agent with mail waiting
    or a message in hand is not idle (telling it wakes nothing) and is told at once. If
    none of the window finishes within ``PATIENCE`` seconds (each in a long LLM call,
    say), the window is written off and a new one begins. The waiting has a budget:
    ``BUDGET`` seconds, or ``BUDGET_PER_TARGET`` per target when that is more (what
    waking each costs, with room to spare); past it the rest is told at once. So a
    fan-out delays its caller by that budget at most, whatever the agents do.
    """

    WINDOW: ClassVar[int] = 32
    PATIENCE: ClassVar[float] = 0.005
    BUDGET: ClassVar[float] = 0.05
    BUDGET_PER_TARGET: ClassVar[float] = 0.0002

    __slots__ = ("_deadline", "_window")

    def __init__(self, targets: int) -> None:
        """An empty window, and the budget for ``targets`` agents."""
        self._window = threading.Semaphore(self.WINDOW)
        self._deadline = time.monotonic() + max(self.BUDGET, self.BUDGET_PER_TARGET * targets)

    def wrap(self, shared: Shared, message: tuple[Any, ...]) -> tuple[Any, ...]:
        """``message`` as it is to be told to the agent ``shared`` describes.

        Call it before the message takes its mailbox slot. For an idle agent, within the
        budget, it waits for room in the window and returns the message paced: the
        agent gives its place in the window back once it has handled it. A paced message
        that is not told after all gives it back through ``untold``.
        """
        if shared.busy or not shared.slots.empty:
            return message
        left = self._deadline - time.monotonic()
        if left <= 0:
            return message
        window = self._window
        if not window.acquire(timeout=min(self.PATIENCE, left)):
            window = self._window = threading.Semaphore(self.WINDOW - 1)  # this message holds one
        return (PACED, message, window)

    @staticmethod
    def untold(message: tuple[Any, ...]) -> None:
        """Give back the window place of ``message``, if paced: it never reached its agent."""
        if message[0] == PACED:
            message[2].release()


_thread_role = threading.local()


def on_agent_thread() -> bool:
    """Whether this thread runs an agent's actor (any runtime's)."""
    return getattr(_thread_role, "agent", False)


def agent_of_thread(core: object) -> str | None:
    """The id of the agent of runtime ``core`` whose actor runs on this thread, if any."""
    mine: tuple[object, str] | None = getattr(_thread_role, "mine", None)
    return mine[1] if mine is not None and mine[0] is core else None


def _events_named(events: Sequence[Event], *, then: str = "") -> str:
    """``events`` (one at least) as log records count them: ``1 PrivateSet``, ``3 events, the first X``.

    Every record that counts events says it so. ``then``: what closes the count of many
    mid-sentence (``","``: ``3 events, the first PrivateSet, noted by...``). No article: a
    class name is not a word (``a IpcDelivered``).
    """
    first = type(events[0]).__name__
    return f"1 {first}" if len(events) == 1 else f"{len(events)} events, the first {first}{then}"


def _nothing() -> None:
    """``Shared.flush_outbox`` before the actor runs: nothing is batched yet."""


ASK: Final = object()
"""What ``Shared.read_now`` answers when the agent cannot be read off its thread: ask its actor."""


def _ask_instead(_name: str, *_args: object) -> object:
    """``Shared.read_now`` before the actor runs and after it stopped: only a message can tell."""
    return ASK


class Shared:
    """What other threads may read of an agent without asking its actor."""

    __slots__ = ("busy", "flush_outbox", "has_behavior", "lifecycle", "read_now", "slots", "stale", "thread")

    def __init__(
        self, lifecycle: str, mailbox_size: int, *, has_behavior: bool, in_flight: InFlight | None = None
    ) -> None:
        self.lifecycle = lifecycle
        self.has_behavior = has_behavior
        self.slots = MailboxSlots(mailbox_size, in_flight)
        self.busy = False
        """True from before the actor takes a message's mailbox slot back until it has
        handed over what the message changed: with an empty mailbox, False means the
        agent holds nothing that ``Runtime.flush`` must ask for."""
        self.thread: threading.Thread | None = None
        """The actor's thread, once it runs (``Runtime.close`` called from it must not wait for it)."""
        self.flush_outbox: Callable[[], object] = _nothing
        """Hands over the agent's batched changes (its behavior's flush); under the agent's lock,
        so another thread may call it too, as ``ctx.flush`` does (``Runtime.last_checkpoint``)."""
        self.read_now: Callable[..., object] = _ask_instead
        """Runs a read operation on the calling thread while the agent is idle, or answers
        ``ASK`` (``AgentActor.read_now``; ``Runtime.context_views``, a handle's reads)."""
        self.stale = False
        """True from a commit the agent stopped waiting for until it has taken the journal's
        word for its state (``AgentActor._catch_up``): ``Runtime.flush`` waits for that."""


class AgentActor(pykka.ThreadingActor):
    """Holds one agent's state; every change is journaled, then (or, in batch mode, and) applied."""

    use_daemon_thread = True  # an unclosed runtime must not keep the process alive (Runtime.close)

    @staticmethod
    def _create_actor_inbox() -> Any:  # noqa: ANN401 - Pykka's ActorInbox protocol
        # Pykka's hook for actor implementors: the C SimpleQueue (get/put/empty, all
        # Pykka uses) costs a fraction of queue.Queue per message (PITFALLS.md §9).
        # The mailbox bound is kept by the runtime's admission, not by the queue.
        return queue.SimpleQueue()

    def __init__(self, core: Core, state: AgentSnapshot, behavior: Behavior | None, shared: Shared) -> None:
        super().__init__()
        self._core = core
        self._state = state
        self._behavior = behavior
        self._shared = shared
        self._stream = "agent/" + state.id
        self._outbox: list[Event] = []
        self._foreign: collections.deque[Event] = collections.deque()
        """Facts other threads noted while this agent was busy (``note_from_any_thread``)."""
        self._foreign_lock = threading.RLock()
        """Serializes what other threads do on this agent with its own operations: a ``ctx``
        state operation from any thread, a handle's operation, the start and end of a
        message, the kill, and a kept ``ctx.llm``'s hand-over. Reentrant: a kill holds it
        from its dispatch to marking the agent dead. Another thread holds it while it
        checks ``busy`` and queues a fact, and the actor while it hands the last of them
        over and stops being busy."""
        self._task_ticket = 0
        self._killed = False
        self._kill_unsure = False
        """Its kill's commit timed out: until the writer is past it, the agent handles
        nothing (its next message waits for the catch-up, which decides: stored, it
        leaves; refused or failed, it lives on), and a kept ctx's call raises
        ``ActorTimeoutError``."""
        self._stale = False  # a commit it stopped waiting for may have happened
        self._snapshot_due = False
        """A mid-message hand-over took no snapshot: the next flush takes it if due, also
        one that finds the outbox empty (a loop that ended on a group's last change)."""
        self._behind: Ack | None = None
        """While ``_stale``: the acknowledgement of the last submission it must see stored."""
        self._saw_failure = False  # reloaded once the journal writer failed
        self._failure_traced = False  # its behavior's first failure was logged with its traceback
        self.cause: str | None = None
        """The id of the IPC message the behavior is handling: the cause of what it does."""
        self.trace: str | None = None
        """The trace id of the message its behavior handles: what it sends continues it."""
        self.ctx = AgentContext(self)

    def _start_actor_loop(self) -> None:
        """Pykka's hook that starts the actor's thread; a process out of threads is a typed error.

        Pykka registered the actor before; a start that failed leaves it there, as a
        live actor no thread serves, so it is taken out again.
        """
        agent_id = self._state.id
        start_actor_loop(
            self, super()._start_actor_loop, lambda running: AgentCapacityError(agent_id, running)
        )

    # ------------------------------------------------------------- dispatch

    def on_receive(self, message: Any) -> Any:  # noqa: ANN401 - replies are any value
        """Dispatch one mailbox message; one that is not the runtime's is ignored (``_not_ours``)."""
        if type(message) is not tuple or not message or type(message[0]) is not _Kind:
            return self._not_ours(message)  # before its mailbox's count: it took no slot
        shared = self._shared
        lock = self._foreign_lock
        lock.acquire()  # not ``with``: a message's cost, kept low
        shared.busy = True  # before the mailbox looks empty (Runtime._hand_over_all)
        lock.release()  # a thread that holds it and saw the agent idle finishes first
        kind = message[0]
        if kind == CALL and message[1] in LIFECYCLE_CALLS:
            shared.slots.release_control()
        else:
            shared.slots.take_up()
        window: threading.Semaphore | None = None
        if kind == PACED:  # part of a fan-out (FanOut)
            window, message = message[2], message[1]
            kind = message[0]
        try:
            if self._core.stopped:
                return self._after_close(kind)
            try:
                return self._dispatch(kind, message)
            except Exception as exc:  # noqa: BLE001 - _failed re-raises to a caller, or recovers
                return self._failed(kind, exc)
            except BaseException as exc:  # noqa: BLE001 - Pykka would stop every actor on it
                return self._failed(kind, _user_code_error(exc, f"agent {self._state.id!r}"))
        finally:
            # What it changed is handed over (_dispatch flushed the outbox); what other
            # threads noted since goes too, before it stops counting as busy: an agent
            # that is not busy holds nothing Runtime.flush must ask for.
            lock = self._foreign_lock
            lock.acquire()
            try:
                # a kept ctx's change made since the message's own hand-over waits in the
                # outbox: an idle agent is not asked for it (Runtime.flush, close)
                if self._foreign or self._outbox:
                    self._hand_over_foreign()
            finally:
                shared.busy = False
                lock.release()
                # last: what it sent took its slots already, so a chain never counts zero
                shared.slots.handled()
            if window is not None:
                window.release()

    def _not_ours(self, message: object) -> None:
        """Ignore a message the runtime did not send (a host application's ``ActorRegistry.broadcast``).

        As Pykka's own ``Actor.on_receive`` does, but logged once per runtime, not once
        per agent and message: a broadcast reaches every agent. An ask gets None.
        """
        if self._core.first_not_ours():
            log.warning(
                "agent %s: ignored a message the runtime did not send (a %s; later ones are ignored "
                "unlogged): pykka.ActorRegistry.broadcast() reaches the runtime's actors too; pass its "
                "target_class to reach only your own",
                self._state.id,
                type(message).__name__,
            )

    def _dispatch(self, kind: object, message: Any) -> Any:  # noqa: ANN401 - replies are any value
        if self._stale and (self._kill_unsure or not self._killed):
            self._catch_up()  # a kill whose commit timed out is decided here, before the message
        writer = self._core.writer
        # every message passes here: the attribute, not the property
        if writer is not None and writer._failure is not None and not self._saw_failure:  # noqa: SLF001
            # The journal went fail-stop: in batch durability this agent may hold changes
            # it never took. Take the journal's word before anything else, reads too.
            self._saw_failure = True
            if not self._killed:
                self._reload_from_journal()  # under the agent's lock
        if self._killed:
            self._after_death(message)
            return None
        if kind == CALL:
            with self._foreign_lock:  # a handle's operation, in turn with a kept ctx's
                try:
                    return getattr(self, "op_" + message[1])(*message[2])
                finally:
                    self._flush_outbox()
        if kind == IPC:
            self._on_ipc(message[1])
        elif kind == PUBLISH:
            self._on_publish(message[1], message[2], message[3])
        self._flush_outbox()
        return None

    def _failed(self, kind: object, exc: Exception) -> None:
        """Handling a message failed outside a behavior: re-raise to a caller, or recover."""
        if self._core.stopped or isinstance(exc, RuntimeClosedError):
            if kind == CALL:
                raise exc
            return self._after_close(kind)  # the runtime closed its journal meanwhile
        if isinstance(exc, JournalError):
            # The journal is fail-stop: forget what it did not take, so this agent
            # never runs ahead of it; the caller of a state change gets the error.
            self._reload_from_journal()
            if kind == CALL:
                raise exc
            if isinstance(exc, JournalFailedError):  # refused since an earlier failure, logged then
                log.debug("agent %s: the journal is fail-stop; state reloaded from it", self._state.id)
            else:
                log.error(
                    "agent %s: the journal failed; state reloaded from it", self._state.id, exc_info=exc
                )
            return None
        if kind == CALL:
            raise exc  # the caller gets it; the actor goes on
        # A message nobody waits for failed outside the behavior (a timeout while
        # restarting, say). Pykka would stop the actor while the runtime still lists
        # it: restart it from the journal instead, as after a behavior's failure.
        what = _KIND_NAMES.get(kind, "a message") if isinstance(kind, _Kind) else "a message"
        log.error("agent %s: handling %s failed; restarting it", self._state.id, what, exc_info=exc)
        try:
            self._restart()
        except Exception:
            log.exception("agent %s: the restart failed too", self._state.id)
        return None

    def _after_close(self, kind: object) -> None:
        """The runtime closed while this agent still had mail: drop it, quietly.

        ``close()`` gave every agent ``call_timeout`` to finish its mailbox; what is
        left is not handled (nothing could be journaled now). A caller still waiting
        for an answer gets ``RuntimeClosedError``.
        """
        what = _KIND_NAMES.get(kind, "message") if isinstance(kind, _Kind) else "message"
        log.debug("agent %s: the runtime is closed; %s is dropped", self._state.id, what)
        if kind == CALL:
            msg = "the runtime is closed"
            raise RuntimeClosedError(msg)

    def _catch_up(self) -> None:
        """Reload this agent from the journal once what it handed over is committed.

        After a sync commit timed out, whether its events are stored is unknown until
        the writer gets to them; replay will apply them if they are, so the live agent
        must too, before it handles anything more: a change checked against the state
        without them would be journaled after them and contradict them (a ``recover``
        after a ``retire`` whose commit was slow brought the retired agent back). So it
        waits for its own submissions, however long the writer takes, ``call_timeout``
        at a time (the callers waiting for it time out meanwhile, and their calls take
        effect after); between the tries, the agent's lock is free for a kept ctx.

        Raises:
            RuntimeClosedError: the runtime is closing, or the writer was stopped: the
                message is not handled (``_failed`` refuses a call and drops anything else).
            JournalError: the journal went fail-stop meanwhile (``_failed`` reloads).

        """
        writer = self._core.writer
        assert writer is not None
        while not self.try_catch_up():
            if self._core.stopped:
                msg = "the runtime is closing"
                raise RuntimeClosedError(msg)
            writer.check_usable()
            log.warning(
                "agent %s: a commit it stopped waiting for is still not done; it waits for the journal",
                self._state.id,
            )

    def try_catch_up(self) -> bool:
        """One try of ``_catch_up`` (``call_timeout`` at most), from any thread; whether it caught up.

        Hands over what waits in the outbox first: the reload reads the journal, so
        what the agent holds must be stored by then.
        """
        writer = self._core.writer
        assert writer is not None
        with self._foreign_lock:  # a kept ctx's change is not overwritten by the reload
            if not self._stale:
                return True
            if self._foreign and not self._kill_unsure:  # noted during an undecided kill: after it
                self._take_foreign()
            if self._outbox:
                events, self._outbox = self._outbox, []
                try:
                    self._behind = writer.submit(events)
                except JournalError:
                    self._behind = None  # fail-stop: the journal holds what it holds
            if not self._stored(writer, self._behind):
                return False
            self._reload_from_journal()
            self._stale = self._shared.stale = False
            self._behind = None
            return True

    def _stored(self, writer: JournalWriter, ack: Ack | None) -> bool:
        """Whether the writer is past ``ack`` (waits ``call_timeout`` at most); None: past everything."""
        if ack is None:
            return writer.settled()
        try:
            ack.wait(self._core.call_timeout)
        except ActorTimeoutError:
            return False
        except RuntimeClosedError:
            raise  # the writer stopped first: nothing to reload from
        except Exception as exc:  # noqa: BLE001 - refused or failed: not stored; the journal holds what it holds
            if writer.failure is None:  # refused alone (a fail-stop the writer logged): say why it is undone
                log.warning(
                    "agent %s: the journal refused a change whose commit the agent stopped waiting for; "
                    "it takes the journal's word: %r",
                    self._state.id,
                    exc,
                )
        return True

    def _after_death(self, message: Any) -> None:  # noqa: ANN401 - a mailbox message
        """Handle what reached the mailbox behind the kill: nothing more is journaled for it."""
        kind = message[0]
        if kind == CALL:
            raise AgentNotFoundError(self._state.id)
        if kind == IPC:
            # as the bus names a request to an agent that is gone (also an AgentNotFoundError)
            self._core.bus.refuse(message[1], "agent killed", AgentNotRegisteredError(self._state.id))
        elif kind == PUBLISH and message[3] and self._core.writer is not None:
            self._core.writer.publication_applied(self._state.id, message[3])  # it never will

    def _reload_from_journal(self) -> None:
        """Adopt the agent's state as the journal holds it, dropping the outbox.

        After a journal failure, and at the end of a catch-up once the commit that
        outlasted its wait is decided: stored, or refused (the journal holds what it holds).
        """
        with self._foreign_lock:  # a kept ctx's change is not overwritten by the reload
            self._outbox = []
            if self._core.writer is None:
                return
            self._adopt(replay_agent(self._core.writer.journal, self._state.id))

    def _adopt(self, state: AgentSnapshot | None) -> None:
        """Take the journal's state for this agent; None means the journal has it killed.

        An agent whose kill's commit timed out (``_kill_unsure``) leaves if the journal
        has it killed, and otherwise lives on: the kill was refused or the journal failed.
        """
        if self._killed and not self._kill_unsure:
            return  # it left the runtime already; a later agent may hold its id now
        if state is None:
            self._killed = True  # its kill was stored after all (the call had timed out)
            self._kill_unsure = False
            self._leave()
            return
        if self._kill_unsure:  # its kill is not in the journal: the agent lives on, as replay has it
            self._killed = self._kill_unsure = False
        self._state = state
        self._shared.lifecycle = state.lifecycle
        self._core.bus._reindex(state.id, state.topics, state.topic_orders)  # noqa: SLF001

    def check_alive(self) -> None:
        """Raise unless the agent lives: for a kept ``ctx``, whose calls journal nothing after its kill.

        Raises:
            AgentNotFoundError: the agent was killed.
            ActorTimeoutError: its kill's commit timed out and is not decided yet: the
                agent may live on (the journal refused it), so the call is not made.

        """
        if self._kill_unsure:
            msg = (
                f"agent {self._state.id!r} is behind the journal (its kill's commit is not "
                "stored yet): the call was not made"
            )
            raise ActorTimeoutError(msg)
        if self._killed:
            raise AgentNotFoundError(self._state.id)

    def _leave(self) -> None:
        """Leave the runtime (the actor stops): the journal has this agent dead."""
        if self._core.on_killed is not None:
            self._core.on_killed(self._state.id, self.actor_ref)

    def on_start(self) -> None:
        """Pykka's hook, on the actor's own thread before its first message (and anything it logs)."""
        thread = self._shared.thread = threading.current_thread()
        # once per thread, not per message: ``AgentActor-3 [sim-a] researcher-001``
        thread.name = f"{thread_name(thread.name, self._core.name)} {printable(self._state.id)}"
        self._shared.flush_outbox = self.flush_outbox
        self._shared.read_now = self.read_now
        _thread_role.agent = True
        _thread_role.mine = (self._core, self._state.id)

    def on_stop(self) -> None:
        """Pykka's hook, as the actor stops: a handle kept after a kill must not keep it alive.

        What other threads noted and no message handed over (while its kill was
        undecided, say) is not journaled: the runtime closed first (logged).
        """
        self._shared.flush_outbox = _nothing
        self._shared.read_now = _ask_instead
        with self._foreign_lock:
            if self._foreign:
                log.warning(
                    "agent %s: %s noted by other threads not journaled: the runtime closed first",
                    self._state.id,
                    _events_named(self._foreign, then=","),
                )
                self._foreign.clear()

    def _actor_loop_teardown(self) -> None:
        """Pykka's last step on the actor's thread: it drops what is left in the inbox.

        Then nothing of this agent's mailbox is in flight any more (``Runtime.settle``):
        messages queued behind its stop, which no ``on_receive`` sees, included.
        """
        try:
            super()._actor_loop_teardown()
        finally:
            self._shared.slots.retire()

    def on_failure(self, exception_type: object, exception_value: object, traceback: object) -> None:  # noqa: ARG002
        """Log; tells are wrapped so that an actor only fails on a bug."""
        log.error("agent %s failed: %s", self._state.id, exception_value)

    # ------------------------------------------------------------- journaling

    def journal(self, event: Event, *, durable: bool = False) -> int:
        """Persist ``event`` and apply it (persist-then-apply in sync durability, or ``durable``).

        Returns the writer ticket of the submission that carries it (0 while it waits
        in the outbox, in batch durability). Under the agent's lock, as every hand-over
        of its outbox: a kept ctx's change, made on another thread, comes before or after
        it, never in between (its events journaled in another order than applied).
        """
        with self._foreign_lock:
            return self._journal_locked(event, durable=durable)

    def _journal_locked(self, event: Event, *, durable: bool) -> int:
        writer = self._core.writer
        if writer is None:
            self._apply(event)
            return 0
        if self._foreign:
            self._take_foreign()
        if self._core.sync or durable:
            events = [*self._outbox, event]
            self._outbox = []
            ack = writer.submit(events)
            assert ack is not None
            try:
                ack.wait(self._core.call_timeout)
            except ActorTimeoutError:
                # They may still commit: before its next message this agent takes the
                # journal's word for its state (_catch_up), rather than guess; and the
                # writer sends it that message once it is past them.
                self._stale = self._shared.stale = True
                self._behind = ack
                self._catch_up_when_written(writer)
                raise
            # in batch durability the outbox's events were applied when they went in
            for item in events if self._core.sync else (event,):
                self._apply(item)
            self._maybe_snapshot()
            return ack.ticket
        self._apply(event)
        self._outbox.append(event)
        if len(self._outbox) >= writer.group_max:
            # A behavior that changes its state in a long loop within one message hands
            # its changes over a group commit at a time, waiting for room in the writer's
            # queue as a send does, rather than hold them all until the message ends. No
            # snapshot meanwhile: each would encode the whole state, which such a loop may
            # be growing (one is taken at the message's end, as before).
            self._snapshot_due = True
            return self._flush_outbox_locked(snapshot=False)
        return 0

    def _catch_up_when_written(self, writer: JournalWriter) -> None:
        """Once the writer is past what this agent stopped waiting for, have it catch up.

        An empty submission queued behind them; its post-commit action asks the agent a
        no-op (past the mailbox bound, as a publication), before which it takes the
        journal's word (``_dispatch``). Until then reads that do not ask the agent (its
        lifecycle, the bus's topic index) would show what it had before the change that
        timed out, although the journal, and a reopen, hold it. Asked, not told: what the
        reload raises goes to the discarded answer, not to Pykka, which would stop the actor.
        """
        ref, slots = self.actor_ref, self._shared.slots

        def wake(_committed: bool) -> None:
            slots.take()
            ref.ask((CALL, "noop", ()), block=False)  # a stopped actor's error goes to the future

        # stopped or fail-stop: the runtime is closing, or every agent reloads (Runtime._reload_all)
        with contextlib.suppress(RuntimeClosedError, JournalError):
            writer.submit((), want_ack=False, after=wake)

    def note(self, event: Event) -> None:
        """Journal a fact that changes no state, with the next commit, without waiting.

        While a behavior handles a message, that message is the fact's cause (an LLM
        output or refusal, through ``ctx.llm``, whenever the client was made).
        """
        if self.cause is not None and event.cause is None:
            event = msgspec.structs.replace(event, cause=self.cause)
        with self._foreign_lock:  # a kept ctx's hand-over takes the outbox from any thread
            if self._foreign:
                self._take_foreign()
            self._outbox.append(event)

    def note_from_any_thread(self, event: Event) -> None:
        """``note``, for a client that may be called off this actor's thread (``ctx.llm``).

        While the agent handles a message (its behavior may call the client from worker
        threads it waits for), the fact is that message's, as on the actor's thread: it
        joins the agent's waiting changes in the order they were made, and is handed
        over with them, or at the latest as the agent finishes the message. Otherwise
        (a client kept and called later from a thread of its own) it goes to the journal
        writer at once, as no message's effect: ``Runtime.flush`` does not ask an idle
        agent for its outbox. A writer that is stopped or failed drops it (logged), as
        the agent's own hand-over would; so does an agent that was killed, also when
        another agent of its id was spawned since (nothing is its after its kill). While
        its kill's commit is undecided (it timed out), the fact waits for the decision.

        Other threads never touch the outbox: they queue the fact, under a lock the
        agent also holds while it hands the last of them over and stops being busy, so
        no fact is queued after that hand-over and left behind.
        """
        if threading.current_thread() is self._shared.thread:
            self.note(event)
            return
        writer = self._core.writer
        with self._foreign_lock:
            if self._shared.busy or self._killed or writer is None:
                self._note_foreign_late(event, writer)
                return
        try:
            writer.wait_for_room()  # not under the lock: the agent's messages would wait too
            with self._foreign_lock:
                if self._shared.busy or self._killed:  # it changed meanwhile
                    self._note_foreign_late(event, writer)
                    return
                # Handed over under the lock: a kill that begins meanwhile (op_kill takes
                # the lock to mark the agent dead) is journaled after it, never before it.
                writer.submit_nowait([event], wait_for_room=False)
        except (RuntimeClosedError, JournalError) as exc:
            log.warning("agent %s: %s not journaled: %s", self._state.id, type(event).__name__, exc)

    def _note_foreign_late(self, event: Event, writer: JournalWriter | None) -> None:
        """Under the lock: queue ``event`` for the message in hand; drop it after a kill or with no writer.

        While the kill's commit is undecided (``_kill_unsure``) it waits for the decision
        in ``_foreign``: handed over if the agent lives on, dropped if it was killed.
        """
        if self._kill_unsure:
            self._foreign.append(event)
            return
        if self._killed:  # its kill is journaled (or on its way): nothing after it is its
            log.warning(
                "agent %s: %s noted after its kill not journaled", self._state.id, type(event).__name__
            )
            return
        if writer is None or not self._shared.busy:
            return
        cause = self.cause
        if cause is not None and event.cause is None:
            event = msgspec.structs.replace(event, cause=cause)
        self._foreign.append(event)

    def _take_foreign(self) -> None:
        """Under the agent's lock, on any thread: move what other threads noted to the outbox, in order."""
        foreign, outbox = self._foreign, self._outbox
        while True:
            try:
                outbox.append(foreign.popleft())
            except IndexError:
                return

    def _hand_over_foreign(self) -> None:
        """On the actor's thread, as it finishes a message: hand over what other threads noted since.

        Logs what fails rather than raising: it runs in ``on_receive``'s ``finally``.
        """
        try:
            self._flush_outbox()
        except (RuntimeClosedError, JournalError) as exc:
            log.warning("agent %s: what other threads noted was not journaled: %s", self._state.id, exc)
        except Exception:
            log.exception("agent %s: what other threads noted was not handed over", self._state.id)

    def _apply(self, event: Event) -> None:
        state = apply_event(self._state, event)
        if state is not None:
            self._state = state
            if self._shared.lifecycle != _RUNNING:
                self._shared.lifecycle = state.lifecycle

    def _flush_outbox(self) -> int:
        with self._foreign_lock:  # in turn with a kept ctx's change on another thread (journal)
            return self._flush_outbox_locked()

    def _flush_outbox_locked(self, *, snapshot: bool = True) -> int:
        writer = self._core.writer
        if self._foreign and not self._kill_unsure:  # noted during an undecided kill: after it
            self._take_foreign()
        if self._killed and self._outbox:  # noted by another thread after the kill was journaled
            log.warning(
                "agent %s: %s noted after its kill not journaled",
                self._state.id,
                _events_named(self._outbox, then=","),
            )
            self._outbox = []
        if not self._outbox or writer is None:
            self._outbox = []
            if snapshot and self._snapshot_due:
                self._snapshot_due = False
                self._maybe_snapshot()
            return 0
        events, self._outbox = self._outbox, []
        try:
            ticket = writer.submit_nowait(events)
        except RuntimeClosedError as exc:  # applied (batch durability), and now journaled nowhere: say so
            # once per runtime as a warning: a close that gave up on many busy agents
            # would otherwise log one for each, as each finishes its message
            first = self._core.first_unjournaled()
            log.log(
                logging.WARNING if first else logging.DEBUG,
                # the README's words ("events it applied were not journaled") whole, whatever the count
                "agent %s: events it applied were not journaled (%s): %s%s",
                self._state.id,
                _events_named(events),
                exc,
                " (the runtime's later ones, of any agent, are logged at DEBUG)" if first else "",
            )
            raise
        if snapshot:
            self._snapshot_due = False
            self._maybe_snapshot()
        return ticket

    def _maybe_snapshot(self) -> None:
        if (
            not self._killed  # a snapshot of it alive, covering its kill, would revive it on replay
            # nor one while a timed-out commit may still land: it would cover that commit's
            # seq without its change, and recovery would start from it (_catch_up first)
            and not self._stale
            and self._core.writer is not None
            and self._state.events - self._state.snapshot_events >= self._core.snapshot_interval
        ):
            self._state.snapshot_events = self._state.events
            try:
                data = encode_snapshot(self._state)
            except RecursionError:  # a value a forged record nested too deeply: the events stand
                log.warning("agent %s: its state nests too deeply to snapshot; none is taken", self._state.id)
                return
            self._core.writer.submit_snapshot(
                self._stream, data, agent_id=self._state.id, publish_seq=self._state.publish_seq
            )

    def emit_and_deliver(self, message: IpcMessage, deliver: Callable[[bool], None]) -> None:
        """Journal ``message`` after this agent's waiting events, and deliver it.

        In sync durability it is delivered once durable, by the writer, and this agent
        does not wait for the commit; in batch durability it is delivered at once. Either
        way, handing it over waits while the writer's queue is full (``JournalWriter``).
        """
        writer = self._core.writer
        if writer is None:
            deliver(True)
            return
        with self._foreign_lock:  # the outbox, in turn with a kept ctx's change (journal)
            if self._foreign:
                self._take_foreign()
            events = [*self._outbox, message]
            self._outbox = []
            writer.submit_nowait(events, after=deliver if self._core.sync else None)
            try:
                self._maybe_snapshot()
            except (RuntimeClosedError, JournalError) as exc:
                # The message is handed over (its mailbox slot with it): the sender's send
                # stands, and the writer's state shows on this agent's next change.
                log.debug("agent %s: no snapshot after a send: %r", self._state.id, exc)
        if not self._core.sync:
            deliver(True)  # not under the lock: it tells the recipient, under the runtime's

    def flush_outbox(self) -> None:
        """Hand what is waiting to the writer now (before a message leaves this agent)."""
        self._flush_outbox()

    def read_now(self, name: str, *args: object) -> object:
        """Read operation ``name`` (one of ``READS``) on the calling thread, if idle.

        What the same call asked of the actor would answer now, without a message: the
        agent handles no message (``busy`` is set under this lock before a message
        starts), has none waiting (a read asked would queue behind it), takes the
        journal's word before its next message for nothing (a timed-out commit, a
        fail-stop it has not seen), is not killed and its runtime not closing. Otherwise,
        or while another thread holds the agent's lock (a kept ctx's change waiting for
        its commit), ``ASK``: the caller asks the actor, which answers in mailbox order.
        The lock is only tried, never waited for. What the operation raises (a private
        key that is no ``str``) is raised here, as the actor would raise it to the caller.
        """
        lock = self._foreign_lock
        if not lock.acquire(blocking=False):
            return ASK
        try:
            shared = self._shared
            writer = self._core.writer
            if (
                shared.busy
                or not shared.slots.empty
                or self._stale
                or self._killed
                or self._core.stopped
                or (writer is not None and writer._failure is not None and not self._saw_failure)  # noqa: SLF001
            ):
                return ASK
            result: object = getattr(self, "op_" + name)(*args)
            return result
        finally:
            lock.release()

    # ------------------------------------------------------------- state operations

    @property
    def agent_id(self) -> str:
        """The agent's id."""
        return self._state.id

    def _now(self) -> float:
        return self._core.clock.now()

    def op_set_task_context(self, context: Mapping[str, Any] | None) -> None:
        """Replace the task layer with a deep copy of ``context``."""
        event = TaskContextSet(
            at=self._now(), agent=self._state.id, context=admit_mapping(context), cause=self.cause
        )
        if self._core.writer is None:
            self.journal(event)
            ticket = next(self._core.tickets)  # after every publication that returned
        else:
            ticket = self.journal(event) or self._flush_outbox()
        self._task_ticket = max(self._task_ticket, ticket)

    def op_task_context(self) -> dict[str, Any]:
        """A deep copy of the task layer."""
        return copy_mapping(self._state.task_context)

    def op_set_private(self, key: str, value: object) -> None:
        """Set one private key to a deep copy of ``value``."""
        key = require_str(key, "private key")
        # under the agent's lock already (a handle's call, or ctx's): not taken again
        self._journal_locked(
            PrivateSet(
                at=self._now(), agent=self._state.id, key=key, value=admit_value(value), cause=self.cause
            ),
            durable=False,
        )

    def op_private(self, key: str) -> Any:  # noqa: ANN401 - stored values are any encodable value
        """A deep copy of one private value; None when missing.

        A key that is not a ``str``, or that UTF-8 cannot encode, is refused as
        ``set_private`` refuses it (``InvalidTextError``): no private value can have it.
        """
        value = self._state.private.get(require_str(key, "private key"))
        return None if value is None else copy_value(value)

    def op_context_view(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Deep copies of the task and private layers."""
        return copy_mapping(self._state.task_context), copy_mapping(self._state.private)

    def op_set_cognitive_state(self, state: CognitiveState) -> None:
        """Replace the cognitive state (version 0 upgraded; future versions refused)."""
        stored = _copy_cognitive(upgrade_cognitive_state(state), admit_value)
        self.journal(CognitiveStateSet(at=self._now(), agent=self._state.id, state=stored, cause=self.cause))

    def op_cognitive_state(self) -> CognitiveState:
        """A deep copy of the cognitive state."""
        return _copy_cognitive(self._state.cognitive)

    def op_checkpoint_cognitive(self) -> CognitiveState:
        """Journal and return a deep copy of the cognitive state."""
        copy = _copy_cognitive(self._state.cognitive)
        self.journal(CheckpointTaken(at=self._now(), agent=self._state.id, state=copy, cause=self.cause))
        return _copy_cognitive(copy)

    def op_noop(self) -> None:
        """Nothing: answering it proves every earlier message was handled."""

    # ------------------------------------------------------------- lifecycle

    def _set_lifecycle(self, new: AgentState) -> None:
        old = self._state.lifecycle
        if old != new:
            event = LifecycleChanged(
                at=self._now(),
                agent=self._state.id,
                state=cast("Lifecycle", str(new)),
                previous=cast("Lifecycle", str(old)),
            )
            self.journal(event)

    def op_suspend(self) -> None:
        """Suspend; idempotent. A retired agent raises ``AgentRetiredError``."""
        if self._state.lifecycle == AgentState.RETIRED:
            raise AgentRetiredError(self._state.id)
        self._set_lifecycle(AgentState.SUSPENDED)

    def op_resume(self) -> None:
        """Resume a suspended agent."""
        if self._state.lifecycle == AgentState.RETIRED:
            raise AgentRetiredError(self._state.id)
        if self._state.lifecycle != AgentState.SUSPENDED:
            raise AgentNotSuspendedError(self._state.id)
        self._set_lifecycle(AgentState.IDLE)

    def op_retire(self) -> None:
        """Retire; idempotent."""
        if self._shared.lifecycle == AgentState.RUNNING:
            raise AgentRunningError(self._state.id)
        self._set_lifecycle(AgentState.RETIRED)

    def op_recover(self, state: CognitiveState) -> None:
        """Install ``state`` (version 0 upgraded) and become IDLE; IDLE or SUSPENDED only."""
        if self._state.lifecycle == AgentState.RETIRED:
            raise AgentRetiredError(self._state.id)
        if self._shared.lifecycle == AgentState.RUNNING:
            raise AgentRunningError(self._state.id)
        stored = _copy_cognitive(upgrade_cognitive_state(state), admit_value)
        event = AgentRecovered(
            at=self._now(),
            agent=self._state.id,
            cognitive=stored,
            has_checkpoint=stored.checkpoint is not None,
        )
        self.journal(event)

    def op_kill(self) -> None:
        """Journal the death snapshot, then leave the runtime and stop.

        Durable first in either durability: a kill the journal then refused could not
        be undone (the actor is gone), so it must not run ahead of the journal. From
        then on this actor journals nothing: what is still in its mailbox is refused
        (``_after_death``). It leaves the runtime itself, so a kill whose caller timed
        out still completes. If the kill's own commit times out, it stays listed, and
        handles nothing, until the journal has it (``_catch_up``, before its next
        message, which the writer sends once past it): stored, it leaves; refused, or
        lost to a journal that failed, it lives on with the journal's state, as a reopen
        will have it.
        """
        cognitive = upgrade_cognitive_state(self._state.cognitive)
        with self._foreign_lock:  # a kept ``ctx.llm`` client called from another thread reads it
            self._killed = True  # from here on nothing is journaled for it, not even a snapshot
        try:
            self.journal(
                AgentKilled(
                    at=self._now(),
                    agent=self._state.id,
                    cognitive=cognitive,
                    capabilities=self._state.capabilities,
                    parent=self._state.parent,
                ),
                durable=True,
            )
        except ActorTimeoutError:
            with self._foreign_lock:
                self._kill_unsure = True  # decided by the catch-up, once the writer is past it
            raise
        except BaseException:
            self._killed = False  # refused: the agent lives on
            raise
        self._leave()

    def op_subscribe(self, topic: str) -> bool:
        """Subscribe to ``topic``; False when already subscribed."""
        topic = require_str(topic, "topic")
        if topic in self._state.topics:
            return False
        bus = self._core.bus
        order = bus._take_order()  # noqa: SLF001
        self.journal(
            IpcSubscribed(at=self._now(), agent=self._state.id, topic=topic, order=order, cause=self.cause)
        )
        bus._subscribed(self._state.id, topic, subscribed=True, order=order)  # noqa: SLF001
        return True

    def op_unsubscribe(self, topic: str) -> bool:
        """Unsubscribe from ``topic``; False when not subscribed."""
        topic = require_str(topic, "topic")
        if topic not in self._state.topics:
            return False
        self.journal(IpcUnsubscribed(at=self._now(), agent=self._state.id, topic=topic, cause=self.cause))
        self._core.bus._subscribed(self._state.id, topic, subscribed=False)  # noqa: SLF001
        return True

    # ------------------------------------------------------------- messages

    def _on_publish(self, event: TaskContextPublished, ticket: int, seq: int) -> None:
        # Apply in journal (ticket) order: a set_task_context that reached the writer
        # after this publish wins, here as in replay. One applied already (by a reload
        # from the journal, or a later one) is only acknowledged, for the same reason.
        # Under the agent's lock: a kept ctx's set_task_context is in turn with it.
        with self._foreign_lock:
            if not seq or seq > self._state.publish_seq:
                self._state.publish_seq = max(self._state.publish_seq, seq)
                if ticket > self._task_ticket:
                    self._task_ticket = ticket
                    self._state.task_context = event.context
        if seq and self._core.writer is not None:
            self._core.writer.publication_applied(self._state.id, seq)

    def _on_ipc(self, message: IpcMessage) -> None:
        bus = self._core.bus
        try:
            at = self._now()
        except ClockError as exc:  # the delivery cannot be journaled: not handled, a requester told
            log.warning(
                "agent %s: %s; %r (message %s from %r) not handled",
                self._state.id,
                exc,
                message.topic,
                message.id,
                message.sender,
            )
            if message.kind == "request":
                bus.refuse(message, "clock error", exc)
            return
        self.note(IpcDelivered(at=at, message_id=message.id, recipient=self._state.id))
        lifecycle = self._state.lifecycle
        if self._behavior is None or lifecycle in _NOT_HANDLING:
            reason = "no behavior" if self._behavior is None else f"agent {lifecycle.lower()}"
            self._not_handled(message, reason)
            return
        self._shared.lifecycle = _RUNNING
        self.cause = message.id
        self.trace = message.trace_id
        try:
            result = self._behavior.on_message(self.ctx, message)
            # two identity checks, no hash: a class whose metaclass defines __eq__ alone is unhashable
            if (kind := type(result)) is CoroutineType or kind is AsyncGeneratorType:
                _refuse_coroutine(self._behavior, result)
        except BaseException as exc:  # noqa: BLE001 - a behavior's failure is journaled, not fatal
            # Any BaseException too (a sys.exit(), an asyncio.CancelledError): Pykka would
            # stop every actor of the process on it, while the runtime went on listing its
            # agents. A behavior runs on its actor's thread, where no Ctrl-C arrives.
            self._shared.lifecycle = self._state.lifecycle
            if isinstance(exc, RuntimeClosedError) and (self._core.closing or self._core.stopped):
                # this runtime's close, not a failure (another runtime's closing is one)
                self._cut_short(message, exc)
                return
            self._on_behavior_failure(message, exc)
            return
        finally:
            self.cause = self.trace = None
        self._shared.lifecycle = self._state.lifecycle
        if message.kind == "request" and result is None:
            bus.deferred(message)  # answered later with bus.reply, if not already
        elif message.kind == "request":
            self._answer(message, result)

    def _answer(self, message: IpcMessage, result: object) -> None:
        """Answer a request with what its behavior returned, once what it changed is handed over."""
        bus = self._core.bus
        try:
            self._flush_outbox()
        except Exception as exc:
            # The journal refused what the behavior changed (it is fail-stop, say): the
            # requester hears it now, not at its timeout; the agent then reloads.
            bus.handler_failed(message, exc, "journal error")  # IpcHandlerError, as for a refused reply
            raise
        try:
            bus.answer(message, self._state.id, result)
        except UnencodableValueError as exc:  # a reply msgspec cannot encode: the behavior's fault
            # named as the reply, or the requester's IpcHandlerError reads as if handling raised
            said = UnencodableValueError(f"the reply of {self._state.id!r} to {message.topic!r}: {exc}")
            said.__cause__ = exc
            self._on_behavior_failure(message, said)
        except TypeError as exc:  # a reply msgspec cannot encode: the behavior's fault
            self._on_behavior_failure(message, exc)
        except ActorTimeoutError as exc:
            # The reply's commit outlasted call_timeout: its requester has been told
            # (IpcHandlerError; the reply may be stored yet). The reply is the bus's,
            # not this agent's state, and the behavior did not fail: nothing to
            # restart, and its instance keeps what it holds.
            log.warning(
                "agent %s: its reply to %r's request %r (correlation id %s) was not acknowledged in "
                "time; the requester got IpcHandlerError, and the reply may be stored yet: %s",
                self._state.id,
                message.sender,
                message.topic,
                message.correlation_id,
                exc,
            )
        except Exception:
            raise  # the journal's or the clock's: on_receive handles them
        except BaseException as exc:  # noqa: BLE001 - copying the reply ran code of the behavior's objects
            self._on_behavior_failure(message, exc)

    def _not_handled(self, message: IpcMessage, reason: str) -> None:
        """Dead-letter a delivered message this agent cannot handle; a requester fails at once."""
        bus = self._core.bus
        try:
            self._flush_outbox()  # its delivery is journaled before its dead letter, as it came
        finally:
            detail = self._why_no_behavior() if reason == "no behavior" else reason
            why = f"agentipc: no handler: {self._state.id!r} cannot handle {message.topic!r} ({detail})"
            if message.kind != "request":
                bus.dead_letter(message, reason, why)
            else:
                bus.refuse(message, reason, IpcNoHandlerError(why))

    def _why_no_behavior(self) -> str:
        """Why this agent has no behavior, as its dead letters and a requester's error say it.

        The letter's ``reason`` stays ``no behavior``, to count by; its text names the
        behavior the journal holds for the agent, so a reopen that no longer registers a
        name (renamed in the code since) is told apart from a factory that failed.
        """
        name = self._state.behavior
        if name is None:
            return "no behavior: it was spawned without one"
        if not self._core.is_registered(name):
            return f"no behavior: its behavior {name!r} is not registered; {self._core.registered_names()}"
        return f"no behavior: its behavior {name!r} could not be made (logged)"

    def _cut_short(self, message: IpcMessage, exc: RuntimeClosedError) -> None:
        """The runtime's close refused a call of the behavior handling ``message``: say so in the journal.

        While ``close()`` lets the agents handle what is in their mailboxes, the runtime
        is closed to everything but their own state: a behavior's send, broadcast,
        request or session call raises ``RuntimeClosedError``. Its message was not
        handled through, which a ``closed`` dead letter records, after the changes the
        behavior made (a requester gets the error at once; see ``IpcBus.cut_short``).
        Not a failure of the agent: no ``AgentFailed``, no restart.
        """
        log.info(
            "agent %s: the runtime closed while it handled %r (message %s)",
            self._state.id,
            message.topic,
            message.id,
        )
        why = RuntimeClosedError(f"the runtime closed while {self._state.id!r} handled it: {exc}")
        with contextlib.suppress(RuntimeClosedError, JournalError):  # the writer stopped: too late to record
            try:
                self._flush_outbox()
            finally:
                self._core.bus.cut_short(message, why)

    def _on_behavior_failure(self, message: IpcMessage, exc: BaseException) -> None:
        """Journal the failure, then its dead letter (a requester told), and restart the agent.

        The message's changes, then its ``AgentFailed``, each handed over in turn under
        the agent's lock, then the bus's ``handler error`` letter: the journal holds the
        cause before its effect, so a crash or a journal failure between their commits
        never leaves a letter that no failure explains (replay, ``trace`` and an auditor
        read it in that order). Two hand-overs, not one: a journal that refuses one of
        the changes without going fail-stop (the writer then commits the other
        submissions apart) still takes the failure.
        """
        log.warning(  # the topic quoted: it is the sender's text, and may hold a line break
            "behavior of agent %s raised on %r (message %s from %r): %s",
            self._state.id,
            message.topic,
            message.id,
            message.sender,
            journal_repr(exc),
            # the traceback of its first failure only: where the bug is, without a
            # behavior that raises on every message flooding the log with the same one
            exc_info=None if self._failure_traced else exc,
        )
        self._failure_traced = True
        self._core.count_behavior_failure()  # counted also when the journal refuses its record
        try:
            with self._foreign_lock:  # the outbox, in turn with a kept ctx's change (journal)
                self._flush_outbox_locked()  # what the message led to goes first, also when the clock fails
                self.note(
                    AgentFailed(
                        at=self._now(),
                        agent=self._state.id,
                        error=type(exc).__name__,
                        detail=journal_text(exc, 1000),
                        cause=message.id,
                    )
                )
                self._flush_outbox_locked()
        finally:  # a requester hears of the failure even when the journal refuses the outbox
            self._core.bus.handler_failed(message, exc)
        self._restart()

    def _restart(self) -> None:
        """Rebuild this agent from the journal and give it a fresh behavior.

        The reload holds the agent's lock from the hand-over to the adoption: a kept
        ctx's change made in between was applied to the state the reload replaced and
        journaled after it (lost live, and in the next snapshot's seq without it).
        An instance of a class that is not registered has no factory to make a fresh
        one: the agent keeps the instance it runs.
        """
        core = self._core
        with self._foreign_lock:
            self._flush_outbox()
            if core.writer is not None:
                core.writer.flush()
                self._adopt(core.load_agent(self._state.id))
                if self._killed:
                    return
        if core.is_registered(self._state.behavior) or self._behavior is None:
            self._behavior = core.make_behavior(self._state.behavior, agent_id=self._state.id)
        self._shared.has_behavior = self._behavior is not None
        self._shared.lifecycle = self._state.lifecycle


def _copy_cognitive(state: CognitiveState, copy: Callable[[object], Any] = copy_value) -> CognitiveState:
    """A deep copy of a cognitive state (its six fields copied by encoding).

    ``copy=admit_value`` for a state that enters the agent, to be journaled.
    """
    return CognitiveState(
        schema_version=state.schema_version,
        context=copy(state.context),
        observation=copy(state.observation),
        working_memory=copy(state.working_memory),
        decision=copy(state.decision),
        tool_state=copy(state.tool_state),
        checkpoint=copy(state.checkpoint),
    )


_CHANGES: Final = frozenset(
    (
        "set_private",
        "set_task_context",
        "set_cognitive_state",
        "checkpoint_cognitive",
        "subscribe",
        "unsubscribe",
    )
)
"""The ``AgentContext`` state operations that change the agent (the rest read it)."""


class AgentContext:
    """What a behavior may do, for its own agent, from inside its actor.

    Its state methods raise as an ``Agent`` handle's do for bad keys and values and
    for the journal's refusals; ``send``, ``request``, ``delegate``, ``handoff``,
    ``broadcast`` and ``reply`` raise as the bus's (``runtime.bus``) do, with this
    agent as the sender. A behavior reaches the bus through them: its factory is
    called while ``Runtime.open`` recovers agents, before the runtime is returned.

    A ``ctx`` is meant for the message being handled: on the agent's thread, or from
    worker threads the behavior waits for meanwhile. Its state methods run under the
    agent's lock, from whichever thread: one at a time, each journaled and applied
    before the next (two workers' changes replay as they were applied), never while a
    handle's operation, a kill, or the start or end of a message is under way. One
    kept and called later, from another thread while the agent handles no message,
    hands its change over at once and names no cause, as do its sends. While its agent
    is behind the journal (a commit of it timed out and is not stored yet), a state
    method raises ``ActorTimeoutError`` and does nothing (off a message, after waiting
    ``call_timeout`` for the writer): it would be checked against the state without
    that change. Once its agent is killed, every method but ``agent_id``, ``memory`` and ``llm`` raises
    ``AgentNotFoundError`` (``unsubscribe("")`` excepted: it returns False for the empty topic,
    which nothing subscribes to, whatever the agent), also when another agent of that id
    was spawned since (it is another agent); while its kill's commit is undecided (it timed out), they raise
    ``ActorTimeoutError`` at once, and what a kept ``ctx.llm`` records meanwhile is
    journaled if the agent lives on. What the lock does not order is a behavior's own steps beside its
    state methods: a thread it does not wait for, acting while it runs, still races it.

    Once the runtime's ``close()`` has stopped its journal writer (without a journal:
    once it stopped the agents' work, after their ``call_timeout`` to finish), a kept
    ``ctx``'s state changes raise ``RuntimeClosedError`` and change nothing, in either
    durability: nothing would record them (one made in batch durability just as the
    writer stops may still apply, unrecorded, before it raises). Its reads still answer.
    """

    def __init__(self, actor: AgentActor) -> None:
        self._actor = actor
        self._memory: MemoryManager | None = None

    def _off_message(self) -> bool:
        """Whether the call comes from another thread while the agent handles no message.

        Raises ``AgentNotFoundError`` once the agent was killed: nothing is journaled
        for it after its kill.
        """
        actor = self._actor
        if actor._killed:  # noqa: SLF001
            actor.check_alive()
        shared = actor._shared  # noqa: SLF001
        return not shared.busy and threading.current_thread() is not shared.thread

    def _state(self, name: str, *args: object) -> Any:  # noqa: ANN401 - each operation's own result
        """Run state operation ``name`` on the actor, in turn with every other thread's.

        Under the agent's lock, from any thread: two threads' changes are journaled and
        applied in one order, and a message cannot start meanwhile. From another thread
        while the agent is idle, what it changed is handed over at once (no message's
        end will). Raises ``AgentNotFoundError`` once the agent was killed.
        """
        actor = self._actor
        with actor._foreign_lock:  # noqa: SLF001
            off_message = self._off_message()
            if name in _CHANGES:  # nothing would record it: refused before it applies
                core = actor._core  # noqa: SLF001
                if core.writer is None:
                    core.check_running()
                else:
                    core.writer.check_open()
            if actor._stale and not (off_message and actor.try_catch_up()):  # noqa: SLF001
                # Behind the journal: checked against the state without a change whose
                # commit timed out, the call would be journaled after it and contradict
                # it. Off a message it waits one call_timeout for the writer; within a
                # message (a reload would undo what the message did so far) it is refused.
                msg = (
                    f"agent {actor.agent_id!r} is behind the journal (a commit it stopped "
                    "waiting for is not stored yet): the call was not made"
                )
                raise ActorTimeoutError(msg)
            result = getattr(actor, "op_" + name)(*args)
            if off_message:
                actor.flush_outbox()
            return result

    @property
    def agent_id(self) -> str:
        """The agent's id."""
        return self._actor.agent_id

    def set_private(self, key: str, value: object) -> None:
        """Set a private value (deep copy)."""
        self._state("set_private", key, value)

    def private(self, key: str) -> Any:  # noqa: ANN401 - stored values are any encodable value
        """A deep copy of a private value; None when missing."""
        return self._state("private", key)

    def set_task_context(self, mapping: Mapping[str, Any] | None) -> None:
        """Replace this agent's task layer with a deep copy of ``mapping`` (None means empty)."""
        self._state("set_task_context", mapping)

    def task_context(self) -> dict[str, Any]:
        """A deep copy of the task layer."""
        result: dict[str, Any] = self._state("task_context")
        return result

    def context_view(self) -> ContextView:
        """The task and private layers side by side, read-only (copies)."""
        task, private = self._state("context_view")
        return ContextView(task, private)

    def set_cognitive_state(self, state: CognitiveState) -> None:
        """Replace the cognitive state (version 0 becomes 1; future versions are refused).

        Raises:
            TypeError: ``state`` is not a ``CognitiveState`` (a mapping, such as a checkpoint
                read back from a layer, is pointed to ``decode_cognitive_state``).
            CognitiveStateSchemaVersionError: ``state`` is of a future schema version, or
                its version is no int (then also a ``TypeError``).

        """
        self._state("set_cognitive_state", state)

    def cognitive_state(self) -> CognitiveState:
        """A deep copy of the cognitive state."""
        result: CognitiveState = self._state("cognitive_state")
        return result

    def checkpoint_cognitive(self) -> CognitiveState:
        """Journal and return a copy of the cognitive state.

        In sync durability the checkpoint is durable when this returns; in batch
        durability, as any change, once flushed (``ctx.flush()``): a crash before that
        loses it, and ``last_checkpoint`` then finds an earlier one (or None).
        """
        result: CognitiveState = self._state("checkpoint_cognitive")
        return result

    def last_checkpoint(self) -> CognitiveState | None:
        """The agent's latest journaled checkpoint, a fresh copy; None if its id took none.

        ``Runtime.last_checkpoint`` for its own id, from its behavior: a behavior
        restarted after it raised, or after a reopen, finds the checkpoint an earlier
        instance took, and ``ctx.set_cognitive_state`` of it goes back to it. The
        agent's batched changes are handed over and committed first, as ``ctx.flush()``
        does, unless the journal is fail-stop: then it reads what the journal holds. It
        reads the agent's records back from its newest to that checkpoint.

        Raises:
            RuntimeClosedError: ``close()`` stopped the agents' work, or the writer, or
                closed the journal while it read (also without a journal, as
                ``Runtime.last_checkpoint`` once the runtime is closed).
            AgentCheckpointNotSupportedError: the runtime has no journal.
            AgentNotFoundError: the agent was killed.
            ActorTimeoutError: the journal did not commit within ``call_timeout``.
            JournalRecordError: one of those records does not decode (names its seq).

        """
        actor = self._actor
        core = actor._core  # noqa: SLF001
        core.check_running()
        writer = core.writer
        if writer is None:
            raise AgentCheckpointNotSupportedError
        if actor._killed:  # noqa: SLF001
            actor.check_alive()
        writer.hand_over_and_flush((actor.flush_outbox,))
        return last_checkpoint_in(writer.journal, self.agent_id)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until this agent's changes so far are durable: ``runtime.flush()`` from its behavior.

        In batch durability an agent hands its changes to the journal writer when its
        message is done; this hands over what it changed so far now and waits for the
        commit, so a behavior can make a change durable before it tells anyone (an
        exchange's fill before its acknowledgement). It does not wait for other agents.
        In sync durability each state change is durable when its call returns, and what
        ``ctx.send`` sent goes to the writer at once (without this wait); what waits for
        the agent's next change or send, a ``ctx.llm.turn``'s answer, or the message's
        end, there is the message's delivery record and the ``ctx.llm`` calls' records.
        A memory-only runtime has no journal: it returns at once. From a worker thread the behavior waits for,
        as from its own. When the writer's queue is full, handing over first waits for
        room (``call_timeout`` at most), as a message's end does.

        Raises:
            AgentNotFoundError: the agent was killed.
            RuntimeClosedError: ``close()`` stopped the agents' work, or the writer.
            ActorTimeoutError: the journal did not commit within ``timeout`` seconds
                (default, and for 0 or less, ``call_timeout``): the outcome is unknown.
            JournalError: the journal failed (fail-stop). The behavior still reads the
                changes it refused until its message is done; the agent takes the
                journal's word before its next one.
            TypeError: ``timeout`` is not a number.

        """
        actor = self._actor
        core = actor._core  # noqa: SLF001
        wait = core.call_timeout if timeout is None else bounded_wait(timeout, core.call_timeout)
        core.check_running()
        if actor._killed:  # noqa: SLF001
            actor.check_alive()
        actor.flush_outbox()
        if core.writer is not None:
            core.writer.flush(wait)

    @property
    def memory(self) -> MemoryManager:
        """The runtime's session memory (``runtime.memory``): sessions and prompt windows.

        What its calls journal while the agent handles a message (from the agent's
        thread, or worker threads the behavior waits for) names that message as its
        ``cause``, an expiry excepted; as the other ``ctx`` methods, a call made while
        the agent handles none names no cause. ``runtime.memory``'s calls name none.
        """
        memory = self._memory
        if memory is None:
            actor = self._actor
            memory = self._memory = agent_memory(actor._core.memory, lambda: actor.cause)  # noqa: SLF001
        return memory

    @property
    def llm(self) -> JournaledLLM:
        """The agent's LLM client: gated, journaled on its stream, with ``turn``.

        Its ``generate`` raises ``AgentNotFoundError`` once the agent is killed (kept past
        the kill), before the gate and the provider.

        Raises:
            NoLLMProviderError: the runtime has no LLM provider (also a ``ValueError``).

        """
        core = self._actor._core  # noqa: SLF001
        if core.llm_provider is None:
            msg = "no LLM provider: open the runtime with llm_provider= or config.llm.base_url"
            raise NoLLMProviderError(msg)
        return JournaledLLM(
            core.llm_provider,
            core.config.llm,
            clock=core.clock,
            journal=self._actor.note_from_any_thread,
            memory=self.memory,
            agent_id=self.agent_id,
            check_open=self._check_llm,
            hand_over=self._hand_over_llm,
        )

    def _hand_over_llm(self) -> None:
        """Before a ``ctx.llm`` turn's answer goes into its session: hand the output's record over.

        Within a message the record waits in the agent's outbox (with the changes
        before it, as a ``ctx.send`` hands them over); off one it went to the writer
        already. A kill that landed in the call dropped it (or holds it while the kill's
        commit is undecided): this raises ``AgentNotFoundError`` (``ActorTimeoutError``),
        so no answer goes into the session that no record of the call holds.
        """
        if not self._off_message():
            self._actor.flush_outbox()

    def _check_llm(self) -> None:
        """Before a ``ctx.llm`` call: the runtime and journal can take its record, and the agent lives.

        A client kept past its agent's kill journals nothing: it calls no provider either
        (a call the kill lands in is still made, and its record dropped with a warning;
        a ``turn``'s answer then goes into no session: it raises ``AgentNotFoundError``).
        """
        actor = self._actor
        actor._core.check_journaling()  # noqa: SLF001
        if actor._killed:  # noqa: SLF001
            actor.check_alive()

    def send(self, to: str, topic: str, payload: object = None) -> None:
        """Send ``to`` a message from this agent."""
        bus = self._actor._core.bus  # noqa: SLF001
        if self._off_message():
            bus.send(self.agent_id, to, topic, payload)
        else:
            bus.send_from(self._actor, to, topic, payload)

    def request(self, to: str, topic: str, payload: object = None, timeout: float = 30.0) -> IpcMessage:
        """Send a request and wait for the reply (blocks this agent meanwhile).

        It carries the handled message as its cause and continues its trace.

        Raises:
            IpcInvalidMessageError: ``to`` is this agent: it would wait for its own
                mailbox, which it is blocking, until the timeout. A ``ctx`` kept and
                called from another thread while its agent is idle refuses it too
                (``runtime.bus.request(ctx.agent_id, ctx.agent_id, ...)`` asks it there).

        """
        bus, cause, trace = self._ready_to_ask(to)
        return bus.request(self.agent_id, to, topic, payload, timeout, cause=cause, trace=trace)

    def delegate(self, to: str, topic: str, payload: object = None, timeout: float = 30.0) -> IpcMessage:
        """Delegate work to ``to``: exactly ``request``, with this agent as the delegator.

        Raises:
            IpcInvalidMessageError: as ``request``.

        """
        return self.request(to, topic, payload, timeout)

    def handoff(self, to: str, task_id: str, snapshot: object = None, timeout: float = 30.0) -> IpcMessage:
        """Hand a task over to ``to`` and wait for its answer, as ``runtime.bus.handoff``.

        A request on topic ``handoff-task`` whose payload is ``{"task_id": task_id,
        "context": snapshot, "artifacts": []}`` (the original's shape); it carries the
        handled message as its cause and continues its trace.

        Raises:
            IpcInvalidMessageError: as ``request``.
            TypeError: ``task_id`` is not a str.

        """
        bus, cause, trace = self._ready_to_ask(to)
        return bus.handoff(self.agent_id, to, task_id, snapshot, timeout, cause=cause, trace=trace)

    def reply(self, correlation_id: str, payload: object = None) -> None:
        """Answer a request later, from this agent: for one a behavior returned None for.

        ``correlation_id`` is the request's (``message.correlation_id``); an unknown
        or expired one is ignored, as ``runtime.bus.reply`` ignores it.

        Raises:
            IpcInvalidMessageError: an empty ``correlation_id``.
            TypeError: ``correlation_id`` is not a str.
            UnencodableValueError: a payload msgspec cannot encode (also a ``TypeError``);
                the request is still pending.

        """
        actor = self._actor
        if not self._off_message():
            actor.flush_outbox()
        actor._core.bus.reply(correlation_id, payload, frm=self.agent_id)  # noqa: SLF001

    def _ready_to_ask(self, to: str) -> tuple[IpcBus, str | None, str | None]:
        """Refuse a request to this agent itself; send what it sent so far first.

        Returns the bus, and the cause and trace a request carries (none off a message).
        """
        if require_str(to, "recipient") == self.agent_id:  # named first: no object's own __eq__ runs
            msg = f"agentipc: invalid message: {to!r} cannot request itself from its own behavior"
            raise IpcInvalidMessageError(msg)
        actor = self._actor
        if self._off_message():
            return actor._core.bus, None, None  # noqa: SLF001
        actor.flush_outbox()
        return actor._core.bus, actor.cause, actor.trace  # noqa: SLF001

    def subscribe(self, topic: str) -> bool:
        """Subscribe this agent to ``topic`` (journaled); False when it was already.

        Raises:
            IpcInvalidMessageError: ``topic`` is empty.
            TypeError: ``topic`` is not a str.

        """
        self._actor._core.bus._check_ids(self.agent_id, topic)  # noqa: SLF001
        subscribed: bool = self._state("subscribe", topic)
        return subscribed

    def unsubscribe(self, topic: str) -> bool:
        """Unsubscribe this agent from ``topic`` (journaled); False when it was not subscribed.

        As ``runtime.bus.unsubscribe``, it never fails for the topic it is given: an
        empty one has no subscription to remove (False).

        Raises:
            TypeError: ``topic`` is not a str.

        """
        if not require_str(topic, "topic"):
            return False
        unsubscribed: bool = self._state("unsubscribe", topic)
        return unsubscribed

    def broadcast(self, topic: str, payload: object = None) -> int:
        """Broadcast to ``topic``'s subscribers; returns how many mailboxes took it."""
        actor = self._actor
        bus = actor._core.bus  # noqa: SLF001
        if self._off_message():
            return bus.broadcast(self.agent_id, topic, payload)
        actor.flush_outbox()
        return bus.broadcast(self.agent_id, topic, payload, cause=actor.cause, trace=actor.trace)


def _user_code_error(exc: BaseException, where: str) -> UserCodeError:
    """A ``UserCodeError`` standing for ``exc``, raised on ``where``'s actor thread."""
    error = UserCodeError(
        f"{where}: the user's code raised {type(exc).__name__}, which would stop every actor"
    )
    error.__cause__ = exc
    return error
