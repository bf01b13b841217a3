"""What every actor of one runtime shares: the writer, the clock, the bus, the settings."""

from __future__ import annotations

import heapq
import inspect
import itertools
import logging
import queue
import sys
import threading
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec
import pykka

from cogfabric.events import AgentKilled, CheckpointTaken, TaskContextPublished
from cogfabric.store import InvalidStreamError, JournalClosedError, JournalRecordError

from ._clock import CheckedClock
from ._errors import AgentNotFoundError, InvalidSpawnSpecError, RuntimeCapacityError, RuntimeClosedError
from ._state import AgentSnapshot, apply_event, decode_snapshot

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

    from cogfabric.events import CognitiveState, Event
    from cogfabric.store import Journal, Record, Snapshot

    from ._agent import Behavior
    from ._bus import IpcBus
    from ._clock import Clock
    from ._config import Config
    from ._llm import LLMProvider
    from ._memory import MemoryManager
    from ._writer import JournalWriter

__all__ = [
    "Core",
    "Publications",
    "SharedContexts",
    "agent_end",
    "printable",
    "publications",
    "replay_agent",
    "replay_start",
    "snapshot_flaw",
    "snapshot_problem",
    "thread_name",
]

log = logging.getLogger(__name__)


def printable(text: str) -> str:
    """``text`` as it is if printable, else as ``ascii()`` shows it: one safe line of a log.

    A directory's or an agent's name may hold a newline or an ESC sequence, which a log
    line (``%(threadName)s``) would otherwise print as it is, forging a line or hiding one.
    """
    return text if text.isprintable() else ascii(text)


def start_actor_loop(
    actor: pykka.ThreadingActor, start: Callable[[], None], capacity: Callable[[int], Exception]
) -> None:
    """Run Pykka's ``_start_actor_loop`` (``start``); a process out of threads is ``capacity(running)``.

    Pykka registered the actor before its thread starts: a start that failed would leave
    it in ``pykka.ActorRegistry`` for good, a live actor no thread serves, which
    ``ActorRegistry.stop_all()`` waits for forever; so it is taken out again, whatever
    the start raised (a ``MemoryError`` from ``Thread.start``, a Ctrl-C in ``Runtime.open``,
    which no hold covers), and what was asked of it meanwhile (a ``stop_all()`` or a
    broadcast on another thread) is answered as a stopped actor answers it. Another
    ``RuntimeError`` (the interpreter shutting down, say) is raised as it is.
    """
    try:
        start()
    except BaseException as exc:
        pykka.ActorRegistry.unregister(actor.actor_ref)
        actor.actor_stopped.set()
        _answer_queued(actor)
        if not isinstance(exc, RuntimeError) or "can't start new thread" not in str(exc):
            raise
        # pthread_create failed: the process is out of threads (or of memory for one)
        raise capacity(threading.active_count()) from exc


def start_thread(thread: threading.Thread, role: str, runtime: str | None) -> None:
    """``thread.start()``; a process out of threads is ``RuntimeCapacityError`` (``role``, ``runtime``).

    Another ``RuntimeError`` (the interpreter shutting down, say) is raised as it is.
    """
    try:
        thread.start()
    except RuntimeError as exc:
        if "can't start new thread" not in str(exc):
            raise
        # pthread_create failed: the process is out of threads (or of memory for one)
        raise RuntimeCapacityError(role, threading.active_count(), runtime) from exc


def _answer_queued(actor: pykka.ThreadingActor) -> None:
    """Answer every message queued to an actor whose thread did not start with ``ActorDeadError``.

    As Pykka's own teardown answers a stopped actor's (``ActorRef.stop`` reads it as
    False); without waiting: a thread that did start (a Ctrl-C in ``Thread.start``'s
    wait for it) may take a message first.
    """
    inbox: Any = actor.actor_inbox  # a queue.Queue, or AgentActor's SimpleQueue: both take block
    while True:
        try:
            envelope = inbox.get(block=False)
        except queue.Empty:
            return
        if envelope.reply_to is not None:
            dead = pykka.ActorDeadError(f"{actor.actor_ref} stopped before handling the message")
            envelope.reply_to.set_exception(exc_info=(pykka.ActorDeadError, dead, None))


def thread_name(role: str, runtime: str) -> str:
    """The name of a thread a runtime starts: its ``role`` and the runtime's name (``Runtime.name``).

    ``AgentActor-3 [sim-a]``, ``cogfabric-session-ticker [sim-a]``: the name it had
    stays in front, so what finds a thread by it (``startswith``) still does.
    """
    return f"{role} [{runtime}]"


class Core:
    """Shared collaborators of the actors of one runtime."""

    def __init__(
        self,
        *,
        config: Config,
        clock: Clock,
        writer: JournalWriter | None,
        behaviors: Mapping[str, Callable[[], Behavior]],
        name: str,
    ) -> None:
        """Bind the settings; the runtime sets ``bus`` right after."""
        self.config = config
        self.name = name
        """The runtime's name (``Runtime.name``), printable: every thread it starts carries it."""
        self.clock = CheckedClock.wrap(clock)
        """The runtime's clock, its wall readings checked (``ClockError``) before they are journaled."""
        self.writer = writer
        # each name as its plain text, as the journal keeps it: a str subclass's own
        # __repr__ (a StrEnum member's, or one that raises) must not reach an error or a
        # log record that lists the names, nor its __eq__ or __hash__ a lookup
        self.behaviors = {str.__str__(name): factory for name, factory in behaviors.items()}
        self._unregistered_logged: set[str] = set()
        self.sync = config.journal.durability == "sync"
        self.call_timeout = config.runtime.call_timeout
        self.snapshot_interval = config.journal.snapshot_interval
        self.mailbox_size = config.runtime.mailbox_size
        self.tickets = itertools.count(1)
        """Without a writer, what orders task context changes: a publication and each
        ``set_task_context`` take the next, and the later one wins (the writer's tickets
        do it with a journal)."""
        self.bus: IpcBus = None  # type: ignore[assignment]  # set by the runtime
        self.memory: MemoryManager = None  # type: ignore[assignment]  # set by the runtime
        self.llm_provider: LLMProvider | None = None
        self.on_killed: Callable[[str, Any], None] | None = None
        """Set by the runtime: an agent's actor calls it once its death is journaled."""
        self.stopped = False
        """Set by ``Runtime.close`` once its agents had ``call_timeout`` to finish: an agent
        still running drops what is left in its mailbox instead of handling it."""
        self.closing = False
        """Set by ``Runtime.close`` as it begins: a ``RuntimeClosedError`` out of a behavior
        from then on is this runtime's close, not the behavior's failure (another
        runtime's is one)."""
        self.foreign_logged = False
        """An agent logged a message that was not the runtime's (``AgentActor._not_ours``): once is enough."""
        self.unjournaled_logged = False
        """An agent logged, as a warning, changes it applied after the writer stopped
        (``AgentActor._flush_outbox_locked``): a close that cuts short hundreds of busy
        agents says so once, the later ones at DEBUG."""
        self.behavior_failures = 0
        """Times a behavior raised on a message since open (``Runtime.stats``): counted on
        the failure's path, under ``_counts``, never on a message's."""
        self._counts = threading.Lock()

    def first_not_ours(self) -> bool:
        """Whether an agent got the first message that is not the runtime's (``foreign_logged``, set now)."""
        if self.foreign_logged:
            return False
        with self._counts:  # two agents taking a broadcast at once: one logs it
            first, self.foreign_logged = not self.foreign_logged, True
        return first

    def first_unjournaled(self) -> bool:
        """Whether these are the first changes the stopped writer refused (sets ``unjournaled_logged``)."""
        if self.unjournaled_logged:
            return False
        with self._counts:  # agents finishing their messages at once: one warns
            first, self.unjournaled_logged = not self.unjournaled_logged, True
        return first

    def count_behavior_failure(self) -> None:
        """Count one behavior failure (``behavior_failures``); agents fail on many threads at once."""
        with self._counts:
            self.behavior_failures += 1

    def check_running(self) -> None:
        """Raise ``RuntimeClosedError`` once ``close()`` stopped the agents' work (``stopped``)."""
        if self.stopped:
            msg = "the runtime is closed"
            raise RuntimeClosedError(msg)

    def check_journaling(self) -> None:
        """Raise what journaling would raise now, before work whose record it would lose.

        Raises:
            RuntimeClosedError: ``close()`` stopped the agents' work, or the writer.
            JournalError: the journal is fail-stop (``JournalStillFullError`` after a
                full map, else ``JournalFailedError``).

        """
        self.check_running()
        if self.writer is not None:
            self.writer.check_usable()

    def persist(self, events: Sequence[Event], *, durable: bool = True) -> None:
        """Journal ``events`` through the writer.

        In sync durability (and when ``durable``) this returns once they are durable;
        otherwise once they are handed over. Without a journal it does nothing.
        """
        writer = self.writer
        if writer is None or not events:
            return
        if durable and self.sync:
            ack = writer.submit(events)
            assert ack is not None
            ack.wait(self.call_timeout)
        else:
            writer.submit_nowait(events)

    def behavior_name(self, behavior: str | Behavior | type | None) -> str | None:
        """The name journaled for ``behavior``: a registered name, a registered class, or an instance.

        An instance of a registered class journals that class's name. An instance of a
        class that is not registered runs all the same, and journals its class's
        qualified name (``module.QualName``; ``note_unregistered`` logs it): on a reopen that
        name is unknown unless registered, so the agent comes back without a behavior
        (issue: "an instance's class must be registered to be reattached").

        Raises:
            InvalidSpawnSpecError: an unknown name, or a class that is not registered.

        """
        if behavior is None:
            return None
        if isinstance(behavior, str):
            # a str subclass's text, plain, as the journal stores it and a reopen looks it
            # up: its own __eq__ or __hash__ must not find a name its text does not name
            name = str.__str__(behavior)
            if name not in self.behaviors:
                msg = (
                    f"unknown behavior {name!r} ({self.registered_names()}; "
                    "Runtime.open(..., behaviors={name: factory}) registers them)"
                )
                raise InvalidSpawnSpecError(msg)
            return name
        cls = behavior if isinstance(behavior, type) else type(behavior)
        for name, factory in self.behaviors.items():
            if factory is cls:
                return str.__str__(name)
        if isinstance(behavior, type):
            msg = (
                f"behavior class {cls.__name__} is not registered; "
                "pass behaviors={name: class} to Runtime.open"
            )
            twin = next((n for n, f in self.behaviors.items() if _same_name(f, cls)), None)
            if twin is not None:  # a notebook cell that defines the class, run again
                msg += (
                    f" (the class registered as {twin!r} has its name, but is another class object, "
                    f"defined again since: behavior={twin!r} runs the registered one; to run the new "
                    "one, close the runtime and reopen it with the new class in behaviors)"
                )
            raise InvalidSpawnSpecError(msg)
        return f"{cls.__module__}.{cls.__qualname__}"

    def note_unregistered(self, names: Iterable[str | None]) -> None:
        """Log, once per class, that the instances a spawn started cannot be reattached.

        Called once the spawn's agents are reachable: a spawn refused (its instance runs
        another agent, its id is taken, or in sync durability the journal refused it)
        runs nothing, so there is nothing to warn of.
        """
        for name in names:
            if name is None or name in self.behaviors or name in self._unregistered_logged:
                continue
            self._unregistered_logged.add(name)
            log.warning(
                "behavior instance of %s is not registered: it runs, but a reopen cannot reattach it "
                "(pass behaviors={name: class} to Runtime.open)",
                name,
            )

    def registered_names(self) -> str:
        """The names ``behaviors`` registers, as an error or a log record lists them."""
        if not self.behaviors:
            return "registered: none"
        # the first few only: each dead letter of an agent left without its behavior lists them
        shown = ", ".join(repr(n) for n in itertools.islice(self.behaviors, _NAMES_SHOWN))
        count = len(self.behaviors)
        more = f" and {count - _NAMES_SHOWN} more" if count > _NAMES_SHOWN else ""
        return f"registered: {shown}{more}"

    def is_registered(self, name: str | None) -> bool:
        """Whether a fresh behavior can be made for the journaled ``name``."""
        return name is not None and name in self.behaviors

    def live_behavior(self, given: str | Behavior | type | None, name: str | None) -> Behavior | None:
        """What a spawned agent runs: the instance it was given, or a fresh one made for ``name``.

        Raises:
            InvalidSpawnSpecError: the instance has no ``on_message`` (or an ``async``
                one, or reading it raised), or the factory failed.

        """
        if given is None or isinstance(given, str | type):
            return self.make_behavior(name, strict=True)
        try:  # its own __getattr__ runs: one that raises (a KeyError) refuses it as any flaw does
            handles, is_async = _handles_messages(given), _async_on_message(given)
        except Exception as exc:
            msg = f"behavior {type(given).__name__}: reading its on_message raised {exc!r}"
            raise InvalidSpawnSpecError(msg) from exc
        if not handles:
            msg = f"behavior {type(given).__name__} has no on_message(ctx, message)"
            raise InvalidSpawnSpecError(msg)
        if is_async:
            raise InvalidSpawnSpecError(f"behavior {type(given).__name__} {ASYNC_ON_MESSAGE}")
        return given

    def make_behavior(
        self,
        name: str | None,
        *,
        strict: bool = False,
        agent_id: str | None = None,
        left: dict[str, list[str]] | None = None,
    ) -> Behavior | None:
        """A fresh behavior for a journaled name, or None (logged) when it is unknown.

        ``agent_id`` names the agent in the log record, as a reopen of many agents
        logs one record for each that is left without its behavior: for the first
        ``_AGENTS_NAMED`` of a name, that is. A reopen passes ``left`` (name: agent ids),
        which keeps count; the later agents' records are at DEBUG, and the reopen sums
        them up in one record (``note_left_without``), so that a journal of hundreds of
        agents reopened without their behavior does not log hundreds of warnings. A
        factory's traceback is in the record of the first agent it failed for; the
        others' records name their exception (it may fail for some agents only, each
        for a reason of its own).

        A factory that raises leaves the agent without a behavior too (logged): the
        agent exists in the journal, so it must exist live. With ``strict`` (a spawn,
        before anything is journaled) the error is raised instead.

        So does a factory whose product has no callable ``on_message``, or an
        ``async`` one, or one whose attribute lookup raises (an attribute dict's
        ``__getattr__``, which raises ``KeyError``): it could handle no message. On a
        reopen each agent's factory is called in turn, and a failure of one leaves that
        agent alone without its behavior.

        Raises:
            InvalidSpawnSpecError: with ``strict``, the factory raised, or made no behavior.

        """
        if name is None:
            return None
        factory = self.behaviors.get(name)
        whose = "" if agent_id is None else f"agent {agent_id!r}: "
        if factory is None:
            log.log(
                logging.DEBUG if _counted(left, name, agent_id) > _AGENTS_NAMED else logging.WARNING,
                "%sbehavior %r is not registered: the agent runs without one, and messages to it are "
                "dead-lettered (%s); to give it one, open the journal with behaviors={%r: factory}",
                whose,
                name,
                self.registered_names(),
                name,
            )
            return None
        try:
            behavior = factory()
            # what the factory made is checked here too: its own __getattr__ (an attribute
            # dict's, which raises KeyError) runs, and must fail this agent only
            msg = _unfit(name, behavior)
        except Exception as exc:
            if strict:
                raise InvalidSpawnSpecError(f"behavior {name!r} could not be made: {exc!r}") from exc
            _not_made(whose, name, _counted(left, name, agent_id))
            return None
        except BaseException:  # a CancelledError, a sys.exit(): fatal to Pykka on an actor's thread
            if strict or threading.current_thread() is threading.main_thread():
                raise  # the caller's own thread (a spawn, a reopen): a Ctrl-C must stop it
            _not_made(whose, name, _counted(left, name, agent_id))
            return None
        if msg:
            if strict:
                raise InvalidSpawnSpecError(msg)
            quiet = _counted(left, name, agent_id, unfit=True) > _AGENTS_NAMED
            log.log(logging.DEBUG if quiet else logging.ERROR, "%s%s: the agent runs without one", whose, msg)
            return None
        return behavior

    def note_left_without(self, left: dict[str, list[str]]) -> None:
        """After a reopen: one record for each behavior that left more agents without it than were named.

        Its level is their records' own: a warning for a name not registered, an error
        for a factory that failed (``could not be made``) or made something that handles
        no message; when it did both, for the agents past the named ones, the record
        counts each.
        """
        for name, agents in left.items():
            rest = agents[_AGENTS_NAMED:]
            if not rest:
                continue
            shown = ", ".join(repr(agent) for agent in rest[:_AGENTS_NAMED])
            more = f" and {len(rest) - _AGENTS_NAMED} more" if len(rest) > _AGENTS_NAMED else ""
            registered = name in self.behaviors
            one = len(rest) == 1
            log.log(
                logging.ERROR if registered else logging.WARNING,
                "behavior %r %s: %s without it than the %d named above (%s%s; %s at DEBUG); %s is False",
                name,
                _why_left(rest, getattr(agents, "unfit", ())) if registered else "is not registered",
                "1 more agent runs" if one else f"{len(rest)} more agents run",
                _AGENTS_NAMED,
                shown,
                more,
                "logged" if one else "each logged",
                "its handle's has_behavior" if one else "their handles' has_behavior",
            )

    def load_agent(self, agent_id: str) -> AgentSnapshot | None:
        """Rebuild one agent from the journal (latest snapshot plus tail)."""
        assert self.writer is not None
        return replay_agent(self.writer.journal, agent_id)


# What a subclass of the ``Behavior`` protocol inherits when it defines no ``on_message``
# of its own (a misspelt one, say): a stub that returns None, which defers every reply.
_PROTOCOL_STUB: Final = ("cogfabric.actors._agent", "Behavior.on_message")


_NAMES_SHOWN: Final = 10
"""How many registered behavior names an error or a log record lists."""

_AGENTS_NAMED: Final = 10
"""How many agents a reopen names, a record each, for one behavior it leaves them without."""


class _Left(list[str]):
    """The agents a reopen left without one behavior, in order.

    ``unfit``: those of them its factory made something for that handles no message.
    """

    def __init__(self) -> None:
        super().__init__()
        self.unfit: set[str] = set()


def _counted(
    left: dict[str, list[str]] | None, name: str, agent_id: str | None, *, unfit: bool = False
) -> int:
    """Note that a reopen left ``agent_id`` without ``name``'s behavior; how many so far (0: not a reopen).

    ``unfit``: its factory made something that handles no message (else it raised, or
    ``name`` is not registered).
    """
    if left is None or agent_id is None:
        return 0
    agents = left.setdefault(name, _Left())
    agents.append(agent_id)
    if unfit and isinstance(agents, _Left):
        agents.unfit.add(agent_id)
    return len(agents)


def _why_left(rest: list[str], unfit: Collection[str]) -> str:
    """Why a registered factory left ``rest`` without a behavior: it raised, made something unfit, or both."""
    unfit_ones = sum(agent in unfit for agent in rest)
    if not unfit_ones:
        return "could not be made"
    if unfit_ones == len(rest):
        return "made something that handles no message"
    raised = len(rest) - unfit_ones
    return f"could not be made for {raised} and made something that handles no message for {unfit_ones}"


def _not_made(whose: str, name: str, counted: int) -> None:
    """Log, in the ``except`` that caught it, that ``name``'s factory failed.

    With its traceback for the first agent of a reopen only, at DEBUG past the
    ``_AGENTS_NAMED`` first. The others' records name the exception in their text: a
    factory may fail for some agents only, and not always alike (the first agent of the
    name may even have been left without it for something unfit its factory made).
    """
    traced = counted <= 1
    log.log(
        logging.DEBUG if counted > _AGENTS_NAMED else logging.ERROR,
        "%sbehavior %r could not be made%s: the agent runs without one",
        whose,
        name,
        "" if traced else f" ({sys.exc_info()[1]!r})",
        exc_info=traced,
    )


def _unfit(name: str, behavior: object) -> str:
    """Why the product of ``name``'s factory can handle no message; "" when it can.

    Raises:
        Exception: whatever the product's own attribute lookup raises.

    """
    if inspect.iscoroutine(behavior):
        behavior.close()  # nothing awaits it: no "never awaited" warning
        return f"behavior {name!r} made a coroutine: its factory is async, and nothing would await it"
    if not _handles_messages(behavior):
        return f"behavior {name!r} made a {type(behavior).__name__} with no on_message(ctx, message)"
    if _async_on_message(behavior):
        return f"behavior {name!r} made a {type(behavior).__name__}, which {ASYNC_ON_MESSAGE}"
    return ""


def _same_name(factory: object, cls: type) -> bool:
    """Whether ``factory`` is a class of ``cls``'s module and qualified name (``cls`` redefined)."""
    return (
        isinstance(factory, type)
        and factory.__qualname__ == cls.__qualname__
        and factory.__module__ == cls.__module__
    )


def _handles_messages(behavior: object) -> bool:
    """Whether ``behavior`` has the one method a behavior needs: ``on_message(ctx, message)``.

    The ``Behavior`` protocol's own stub, which a subclass that defines none inherits,
    does not count: every request to the agent would wait out its timeout.
    """
    on_message = getattr(behavior, "on_message", None)
    if not callable(on_message):
        return False
    function = getattr(on_message, "__func__", on_message)
    return (getattr(function, "__module__", None), getattr(function, "__qualname__", None)) != _PROTOCOL_STUB


ASYNC_ON_MESSAGE: Final = (
    "has an async on_message: the runtime calls it on its agent's thread and would never "
    "await it (define it with def, and run any coroutine inside it, with asyncio.run say)"
)


def _async_on_message(behavior: object) -> bool:
    """Whether ``behavior.on_message`` is ``async``: a coroutine that nothing would await.

    Each message would be delivered and do nothing, with no failure, no dead letter and
    no reply (a request would fail on the coroutine as a reply it cannot encode).
    """
    on_message = getattr(behavior, "on_message", None)
    return inspect.iscoroutinefunction(on_message) or inspect.isasyncgenfunction(on_message)


def replay_agent(
    journal: Journal,
    agent_id: str,
    until: int | None = None,
    *,
    published: Publications | None = None,
    from_snapshot: bool = True,
) -> AgentSnapshot | None:
    """Rebuild ``agent_id`` from ``journal`` as it was at seq ``until`` (default: the end).

    Starts from the latest snapshot at or before ``until`` when there is one (and
    ``from_snapshot``), then applies the agent's own events and the task contexts
    published to it, in seq order. A snapshot that cannot be used (damaged, past its
    stream's last record, of another agent, or its data does not decode) is passed
    over, logged: the events are the truth. ``from_snapshot=False`` replays the events
    alone, as an audit does: a snapshot is outside the hash chain. ``published``: the
    runtime stream's publications (``publications``), read once for many agents.

    None when no agent of that id lives at ``until``: its stream holds no spawn by
    then (an unknown id, or an ``until`` before its spawn, 0 or less included), or it
    was killed by then (a later spawn of the id is another agent, from its seq on).
    """
    snapshot = _load_snapshot(journal, "agent/" + agent_id) if from_snapshot else None
    return _replay(journal, agent_id, until, snapshot, published)


class Publications(NamedTuple):
    """The last task context published in the runtime stream to each agent, in ``after < seq <= until``.

    A publication replaces the agent's task layer, as its own ``TaskContextSet`` does, and
    sets nothing else but ``publish_seq`` (the seq of the last one applied): replayed to
    ``until`` or later, an agent ends with the same state whether the publications before
    its last are applied or not. So only that last one is kept, one record an agent, not
    every publication of the journal (a journal of many rounds holds a great many).
    """

    after: int
    by_agent: dict[str, list[Record]]
    until: int = 0
    """The last seq read: a replay to another seq reads the runtime stream itself."""


def publications(journal: Journal, after: int = 0, until: int | None = None) -> Publications:
    """Read the runtime stream once (``after < seq <= until``) for many agents' replays.

    A replay that must start before ``after``, or end at another seq than ``until`` (a
    writer appended since), reads the stream itself.
    """
    end = journal.last_seq if until is None else min(until, journal.last_seq)
    found: dict[str, list[Record]] = {}
    for record in journal.read(after=after, until=end, stream="runtime"):
        event = record.event
        if isinstance(event, TaskContextPublished):
            for agent_id in event.agents:
                found[agent_id] = [record]  # the last wins: see Publications
    return Publications(after, found, end)


class SharedContexts:
    """Gives recovered agents the task context of the publication they applied last, one copy for all.

    A publication's context is one object for all its targets, live and replayed from
    their events (``Publications``); but a snapshot holds its agent's own copy, so 200
    targets recovered from snapshots would each hold one, a context of megabytes 200
    times. Each publication is read (or taken from ``published``) and encoded once.
    """

    def __init__(self, journal: Journal, published: Publications) -> None:
        self._journal = journal
        self._records = {record.seq: record for records in published.by_agent.values() for record in records}
        self._found: dict[int, tuple[dict[str, Any], bytes] | None] = {}

    def share(self, state: AgentSnapshot) -> None:
        """Replace ``state``'s task layer by its last publication's context if it holds that one.

        Only one whose encoding equals the publication's: equal values of equal types, not
        ``==``, which takes ``1`` for ``1.0`` (a layer set after the publication stays its own).
        """
        seq = state.publish_seq
        if not seq:
            return
        if seq not in self._found:
            self._found[seq] = self._context_at(seq)
        found = self._found[seq]
        if found is None or found[0] is state.task_context:
            return
        context, encoded = found
        if _encoder.encode(state.task_context) == encoded:
            state.task_context = context

    def _context_at(self, seq: int) -> tuple[dict[str, Any], bytes] | None:
        record = self._records.get(seq)
        if record is None:
            try:
                record = next(iter(self._journal.read(after=seq - 1, until=seq)), None)
            except JournalRecordError:
                return None
        event = None if record is None else record.event
        if not isinstance(event, TaskContextPublished):
            return None
        return event.context, _encoder.encode(event.context)


def last_checkpoint_in(journal: Journal, agent_id: str) -> CognitiveState | None:
    """The state of the latest ``CheckpointTaken`` of ``agent_id``'s stream, None if it took none.

    Read back from the stream's newest record (``Journal.read_back``): it costs the
    records after that checkpoint. Decoded from the journal, so a fresh copy.

    Raises:
        AgentNotFoundError: the journal holds no record of ``agent_id`` (or no agent can
            have that id: a NUL, too long).
        JournalRecordError: one of those records does not decode (names its seq).
        RuntimeClosedError: the journal was closed (only the runtime's ``close()`` closes
            it) since the caller checked that the runtime is open.

    """
    try:
        records = journal.read_back("agent/" + agent_id)
        found = False
        for record in records:
            if isinstance(record.event, CheckpointTaken):
                return record.event.state
            found = True
    except InvalidStreamError:
        raise AgentNotFoundError(agent_id) from None
    except JournalClosedError:
        msg = "the runtime is closed"
        raise RuntimeClosedError(msg) from None
    if not found:
        raise AgentNotFoundError(agent_id)
    return None


def agent_end(journal: Journal, stream: str) -> int:
    """The seq of the kill that ended the agent of ``stream``, its last record; 0 while it lives.

    One record read: recovery need not replay a killed agent (only a later spawn, which
    would be its last record, brings one back), and a tail verification need not start
    at its first record. A last record that does not decode reads as 0: replayed, it is
    named where it fails. So does an LLM record made for the id after its kill
    (``runtime.llm(agent_id=...)``): replay then finds the kill and brings nothing back.
    """
    head = journal.stream_head(stream)
    try:
        last = next(iter(journal.read(after=head - 1, until=head)), None)
    except JournalRecordError:
        return 0
    return head if last is not None and isinstance(last.event, AgentKilled) else 0


def replay_start(journal: Journal, stream: str) -> int:
    """The seq an agent's replay starts after: its snapshot's, else the one before its first record.

    The snapshot is not decoded here: if replay finds it unusable, it starts earlier.
    """
    try:
        snapshot = journal.load_snapshot(stream)
    except JournalRecordError:
        snapshot = None
    return snapshot.seq if snapshot is not None else max(0, journal.stream_start(stream) - 1)


def _replay(
    journal: Journal,
    agent_id: str,
    until: int | None,
    snapshot: Snapshot | None,
    published: Publications | None = None,
) -> AgentSnapshot | None:
    state: AgentSnapshot | None = None
    after = 0
    if snapshot is not None and until is not None and _clamped_before(journal, snapshot, agent_id, until):
        snapshot = None  # it may hold changes made after ``until``: replay the events alone
    if snapshot is not None and (until is None or snapshot.seq <= until):
        usable = _decoded(journal, snapshot)
        if isinstance(usable, str):
            log.warning("agent %s: %s; replaying its events", agent_id, usable)
        elif until is not None and usable.publish_seq > until:
            pass  # it holds a task context published after ``until``: replay the events alone
        else:
            state, after = usable, snapshot.seq
    own = journal.read(after=after, until=until, stream="agent/" + agent_id)
    theirs: Iterable[Record]
    end = journal.last_seq if until is None else until
    if published is None or after < published.after or end != published.until:
        theirs = (
            r
            for r in journal.read(after=after, until=until, stream="runtime")
            if _publishes_to(r.event, agent_id)
        )
    else:
        theirs = (r for r in published.by_agent.get(agent_id, ()) if after < r.seq <= end)
    for record in heapq.merge(own, theirs, key=_seq_of):
        state = apply_event(state, record.event)
        if state is not None and isinstance(record.event, TaskContextPublished):
            state.publish_seq = record.seq
    return state


def _clamped_before(journal: Journal, snapshot: Snapshot, agent_id: str, until: int) -> bool:
    """Whether ``snapshot`` was clamped to a publication and ``until`` falls inside what it holds.

    The writer saves a snapshot taken before the agent applied a publication as covering
    the seq just before that publication (``JournalWriter.submit_snapshot``): its state
    may hold the agent's own changes committed after it. Replay to the end re-applies
    them (they are idempotent), but a replay to a seq before the stream's last record
    would show them early.
    """
    if until >= journal.stream_head("agent/" + agent_id):
        return False
    after = next(iter(journal.read(after=snapshot.seq, until=snapshot.seq + 1)), None)
    return after is not None and _publishes_to(after.event, agent_id)


def _load_snapshot(journal: Journal, stream: str) -> Snapshot | None:
    try:
        return journal.load_snapshot(stream)
    except JournalRecordError as exc:
        # Verification refuses a damaged snapshot, so this is a journal opened with
        # allow_unverified (or damaged since): the events are the truth, the snapshot
        # only a shortcut.
        log.warning("the snapshot of %s is damaged (%s); replaying its events from the start", stream, exc)
        return None


def snapshot_flaw(journal: Journal, snapshot: Snapshot) -> str | None:
    """Why recovery cannot start from ``snapshot`` (it replays the agent's events instead), or None.

    A snapshot that matches its hash may still be unusable: one covering a seq past
    its stream's last record (no writer saves one; recovery would skip what it
    claims to cover), one whose data does not decode, one of another agent's state, or
    one naming a publication to the agent at a seq that holds none.
    """
    usable = _decoded(journal, snapshot)
    return usable if isinstance(usable, str) else None


def _decoded(journal: Journal, snapshot: Snapshot) -> AgentSnapshot | str:
    """The snapshot's state, or why recovery cannot start from it (``snapshot_flaw``)."""
    head = journal.stream_head(snapshot.stream)
    if not 0 < snapshot.seq <= head:
        where = (
            "before the first seq, 1" if snapshot.seq <= 0 else f"past its stream's last record, seq {head}"
        )
        return f"its snapshot covers seq {snapshot.seq}, {where}"
    try:
        state = decode_snapshot(snapshot.data)
    except (msgspec.DecodeError, RecursionError) as exc:  # a ValidationError too
        return f"its snapshot at seq {snapshot.seq} does not decode as a runtime agent's snapshot: {exc}"
    owner = snapshot.stream.removeprefix("agent/")
    if state.id != owner:  # another agent's state: recovered from it, this agent would vanish
        return f"its snapshot at seq {snapshot.seq} holds the state of agent {state.id!r}, not of {owner!r}"
    if state.publish_seq and not _published_to(journal, state.publish_seq, owner):
        # Replay as of an earlier seq passes over a snapshot holding a later publication:
        # one past the last seq was passed over by every check, yet recovered from.
        return (
            f"its snapshot at seq {snapshot.seq} names a task context published to it at seq "
            f"{state.publish_seq}, and the journal holds none there (its last seq is {journal.last_seq})"
        )
    return state


def _published_to(journal: Journal, seq: int, agent_id: str) -> bool:
    """Whether the record at ``seq`` publishes a task context to ``agent_id``."""
    if not 0 < seq <= journal.last_seq:
        return False
    record = next(iter(journal.read(after=seq - 1, until=seq)), None)
    return record is not None and _publishes_to(record.event, agent_id)


def snapshot_problem(
    journal: Journal, agent_id: str, *, until: int | None = None, published: Publications | None = None
) -> str | None:
    """Why ``agent_id``'s snapshot disagrees with its events, or None when it agrees (or has none).

    Rebuilds the agent as of now from its snapshot plus what follows, and from its
    events alone, and compares the two (all but the counters of events applied, which
    only say when the next snapshot is due, and its topics as a set: a snapshot saved
    before a publication it already holds replays its later events twice, which can
    reorder them). A snapshot is checked against its own hash only, which anyone can
    recompute for an unkeyed journal: this is what catches a forged one there, beside
    an anchored head. It compares the end states as of ``until`` (default: the last
    seq now): a forged value that a later event overwrites goes unseen.
    """
    try:
        snapshot = journal.load_snapshot("agent/" + agent_id)
    except JournalRecordError as exc:
        return f"its snapshot is damaged: {exc}"
    if snapshot is None:
        return None
    flaw = snapshot_flaw(journal, snapshot)
    if flaw is not None:
        return flaw
    if until is None:
        until = journal.last_seq  # both replays see the same records while a writer appends
    via_snapshot = _comparable(_replay(journal, agent_id, until, snapshot, published))
    from_events = _comparable(_replay(journal, agent_id, until, None, published))
    if via_snapshot != from_events:
        return f"its snapshot at seq {snapshot.seq} does not hold the state its events make"
    return None


_encoder = msgspec.msgpack.Encoder()


def _comparable(state: AgentSnapshot | None) -> bytes:
    """The state's bytes, but for what differs between two faithful replays (NaN compares equal too).

    Not ``order="deterministic"``, which refuses a dict whose keys are not strings (a
    private value may be one). Each dict's keys still come in the same order: a key
    set again (as a clamped snapshot's replay does) keeps its place, and no event
    deletes one, but for the topics' orders, which an unsubscription deletes: those,
    like the topics, are compared sorted.
    """
    if state is None:
        return b""
    plain = msgspec.structs.replace(
        state,
        events=0,
        snapshot_events=0,
        topics=sorted(state.topics),
        topic_orders=dict(sorted(state.topic_orders.items())),
    )
    return _encoder.encode(plain)


def _publishes_to(event: object, agent_id: str) -> bool:
    return isinstance(event, TaskContextPublished) and agent_id in event.agents


def _seq_of(record: Record) -> int:
    return record.seq
