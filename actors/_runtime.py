"""``Runtime``: starts, recovers, supervises and stops the actors of one journal."""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import inspect
import itertools
import logging
import math
import numbers
import os
import reprlib
import shlex
import threading
import time
from _thread import get_ident
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, Self

import pykka

from cogfabric.events import (
    AgentSpawned,
    CognitiveState,
    TaskContextPublished,
    admit_mapping,
    admit_value,
    upgrade_cognitive_state,
)
from cogfabric.events._codec import require_str
from cogfabric.store import (
    Journal,
    JournalClosedError,
    JournalError,
    JournalIntegrityError,
    JournalRecordError,
    VerifyReport,
)
from cogfabric.store._journal import UNDECODABLE

from . import _interrupt
from ._agent import (
    ASK,
    CALL,
    LIFECYCLE_CALLS,
    PUBLISH,
    READS,
    AgentActor,
    FanOut,
    InFlight,
    MailboxSlots,
    Shared,
    agent_of_thread,
    on_agent_thread,
)
from ._bus import IpcBus
from ._clock import CheckedClock, Clock, FakeClock, SystemClock, bounded_wait
from ._config import Config
from ._core import (
    Core,
    SharedContexts,
    agent_end,
    last_checkpoint_in,
    printable,
    publications,
    replay_agent,
    replay_start,
    snapshot_flaw,
    thread_name,
)
from ._errors import (
    STOPPED_FROM_OUTSIDE,
    ActorTimeoutError,
    AgentCheckpointNotSupportedError,
    AgentExistsError,
    AgentNotFoundError,
    AgentNotSuspendedError,
    AgentRetiredError,
    AgentRunningError,
    ClockError,
    InvalidSpawnSpecError,
    MailboxFullError,
    NoJournalError,
    RuntimeClosedError,
    SettleTimeoutError,
    SpawnSpecTypeError,
)
from ._handle import Agent, ContextView
from ._llm import JournaledLLM, LLMProvider, NoLLMProviderError, OpenAICompatibleProvider
from ._memory import MemoryManager, session_end
from ._state import AgentSnapshot, AgentState, apply_event
from ._stats import RuntimeStats
from ._writer import STOPPED_WAITING, Ack, JournalWriter, error_copy

if TYPE_CHECKING:
    from collections.abc import Callable
    from os import PathLike
    from types import TracebackType

    from cogfabric.events import Event

    from ._agent import Behavior

__all__ = ["Runtime"]

log = logging.getLogger(__name__)

_LATE_POLL = 1.0  # seconds between looks at whether the runtime closed, while finishing late
_STOP_WINDOW: Final = 32
"""How many agents close() has asked to stop and not yet seen stop. Each stop wakes the
agent's thread; thousands woken at once spend close() fighting over the GIL (closing
10,000 idle agents in ``bench/fabric.py --only spawn``: medians of 2.8-3.0 s, and runs
of 75 s and 193 s, asked all at once; medians of 0.7-1.2 s, none over 1.6 s, this many
at a time; see docs/performance.md, "Closing many agents")."""
_STOP_PATIENCE: Final = 0.05
"""How long close() waits for the oldest agent of its window before it moves on, and
waits for those of the window not yet stopped (still busy in their behavior) last."""
_MAX_STREAM_BYTES = 255  # the journal's limit on a stream name (MAX_NAME, store/_record.py)


_BUSY: Final = (
    "its behavior is handling a message: suspend it first (the suspend waits for the messages "
    "ahead of it), then call {call}"
)
"""``AgentRunningError``'s detail for a retire or recover refused while the agent works.

Not "call it again once that message returns": an agent with more mail goes from one
message to the next, RUNNING again at once, so the call is refused again; a suspend
queues behind them and leaves the agent SUSPENDED, which both calls take."""


def check_agent_id(agent_id: str, error: Callable[[str], Exception] = InvalidSpawnSpecError) -> str:
    """Return ``agent_id`` if it can name an agent and its stream ``agent/<id>``.

    Checked before anything is journaled, so that in batch durability a bad id is
    refused to the caller rather than by the journal writer later. ``agent_id`` is what
    ``require_str`` returned (a plain ``str`` UTF-8 can encode): it refuses the rest.

    Raises:
        InvalidSpawnSpecError: (or ``error``) white space or NUL in it, or longer than
            the stream name allows.

    """
    if any(c.isspace() for c in agent_id):
        raise error(f"agent id {agent_id!r} contains white space")
    if "\0" in agent_id:
        raise error(f"agent id {agent_id!r} contains NUL")
    size = len(agent_id.encode())
    limit = _MAX_STREAM_BYTES - len("agent/")
    if size > limit:
        raise error(f"agent id is {size} UTF-8 bytes; at most {limit} fit its stream name")
    return agent_id


def _spawn_priority(priority: object) -> float:
    """A spawn's priority as a finite float; a real number only (not a bool, nor a numeric string)."""
    if isinstance(priority, bool) or not isinstance(priority, numbers.Real):
        raise SpawnSpecTypeError(f"priority must be a number, got {reprlib.repr(priority)}")
    try:
        value = float(priority)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise InvalidSpawnSpecError(f"priority must be a finite number, got {reprlib.repr(priority)}")
    return value


def _spawn_capabilities(capabilities: object) -> tuple[str, ...]:
    """A spawn's capabilities: a collection of strings, as they will be journaled."""
    if isinstance(capabilities, str | bytes) or not isinstance(capabilities, Iterable):
        msg = f"capabilities is a collection of strings, got {reprlib.repr(capabilities)}"
        raise SpawnSpecTypeError(msg)  # of the wrong type, as a capability that is no str
    try:
        return tuple(require_str(capability, "capability") for capability in capabilities)
    except TypeError as exc:
        raise SpawnSpecTypeError(str(exc)) from None


class _Launched(NamedTuple):
    """An agent's actor started for a spawn or a recovery, not yet reachable."""

    state: AgentSnapshot
    behavior: Behavior | None
    shared: Shared
    ref: pykka.ActorRef[AgentActor]


def _warn_if_clock_behind(journal: Journal, clock: Clock) -> None:
    """Log a warning when ``clock`` reads earlier than the journal's last record.

    Times would then go back in the journal, and sessions last accessed "later" would
    outlive their TTL: a simulation reopened on a fresh ``FakeClock`` most likely, which
    should go on from the last record's time. Called before the runtime journals
    anything: a session expiry recovery journals at the clock's time would be the last
    record. Raises nothing but an interruption (a Ctrl-C): a record or a clock that
    cannot be read says nothing here (verification and the first journaled reading
    report them).
    """
    last = journal.last_seq
    if not last:
        return
    try:
        record = next(iter(journal.read(after=last - 1)), None)
        now = clock.now()
    except (JournalError, ClockError):
        return
    if record is not None and now < record.event.at:
        log.warning(
            "the clock reads %r, earlier than the journal's last record (seq %d, at %r): times "
            "would go back; to go on from there, open with FakeClock(start=%r) (a simulated clock)",
            now,
            last,
            record.event.at,
            record.event.at,
        )


class _Entry:
    __slots__ = ("behavior", "handle", "killed", "ref", "shared", "stop_asked")

    def __init__(
        self, ref: pykka.ActorRef[AgentActor], shared: Shared, handle: Agent, behavior: Behavior | None
    ) -> None:
        self.ref = ref
        self.shared = shared
        self.handle = handle
        self.behavior = behavior
        """The behavior the agent started with (an instance given to ``spawn`` stays its own)."""
        self.killed = False
        """Its death is journaled: nothing told to it is handled (set under the runtime's lock)."""
        self.stop_asked = False
        """``close()`` asked its actor to stop: a message told now would queue behind the stop
        and be dropped unseen (set under the runtime's lock, before the stop is queued)."""


_NAMED: Final = 5
"""Agents an error message names before it counts the rest."""


def _named(agent_ids: list[str]) -> str:
    """``'a', 'b' and 3 more``: the first few of a list of agents, for an error message."""
    shown = ", ".join(repr(a) for a in agent_ids[:_NAMED])
    return shown + (f" and {len(agent_ids) - _NAMED} more" if len(agent_ids) > _NAMED else "")


_CLOSE_THREAD: Final = "cogfabric-close"
"""The start of the name of the thread a close() begun by a behavior runs on; the runtime's name follows."""

_MAX_NAME: Final = 64
"""The longest ``name`` ``Runtime.open`` takes, in characters: each of its threads' names carries it."""

_OPEN: set[Runtime] = set()
"""Runtimes not closed yet: closed at interpreter exit (``_close_left_open``)."""

_SPAWNING_LOCK: Final = threading.Lock()
_SPAWNING: dict[int, tuple[object, Runtime, str]] = {}
"""Behavior instances whose spawn is under way, in any runtime of the process: checked
free, not registered yet (``Runtime._claim_instances``). Held by id, with the instance
(so that the id is not another object's meanwhile), the runtime and the agent id."""

_GIVEN_UP: list[tuple[str, object, threading.Event]] = []
"""Agents of closed runtimes whose actors had not stopped when their close() gave up
waiting, as (agent id, behavior, the actor's ``actor_stopped``): their behaviors may
still be running. ``_SPAWNING_LOCK`` guards it; an entry leaves once its actor has
stopped (``_prune_given_up``, at each claim and each close). Neither the runtime nor
its agent is held."""


def _prune_given_up() -> None:
    """Drop the given-up agents whose actors have stopped since; hold ``_SPAWNING_LOCK``."""
    _GIVEN_UP[:] = [one for one in _GIVEN_UP if not one[2].is_set()]


def _unclaim(instances: list[object]) -> None:
    """Release behavior instances claimed by ``Runtime._claim_instances``."""
    if instances:
        with _SPAWNING_LOCK:
            for b in instances:
                _SPAWNING.pop(id(b), None)


def _is_instance(behavior: object) -> bool:
    """Whether spawn's ``behavior`` is an instance (not none, a registered name or a class)."""
    return behavior is not None and not isinstance(behavior, str | type)


def _fork_child_forgets() -> None:
    """In a forked child: no spawn is under way and no actor runs there; the lock is free."""
    _SPAWNING.clear()
    _GIVEN_UP.clear()
    _SPAWNING_LOCK.release()


class _Placement(NamedTuple):
    """Where recovery puts the agent of a stream in ``agents()`` order, and what it read for that."""

    seq: int | None
    """Its first ``AgentSpawned``; None for a stream of LLM records only (an id never spawned)."""
    read: list[int]
    """The seqs of the records read for it."""
    failed: JournalRecordError | None = None
    """A record that did not decode: the agent is then placed by its stream's last record."""


def _place(journal: Journal, stream: str) -> _Placement:
    """Where the agent of ``stream`` was first spawned, to recover agents in that order.

    Nearly always its stream's first record. A model's output recorded on the agent's
    behalf before its spawn (``runtime.llm(agent_id=...)``) comes first in its stream
    but spawns nothing: the agent is placed by its first ``AgentSpawned``, as it was
    listed live. None for a stream of such records only: its id was never spawned, so
    it has no place until it is (live, it had none either). Recovery needs no record
    before an agent's snapshot, so a record that does not decode does not stop it
    here: such an agent is placed by its last record. A tail verification checks what
    this read (``_check_placements``).
    """
    read: list[int] = []
    try:
        start = journal.stream_start(stream)
        read.append(start)
        first = next(iter(journal.read(after=start - 1, until=start)), None)
        if first is None or isinstance(first.event, AgentSpawned):
            return _Placement(start, read)
        for record in journal.read(after=start, stream=stream):
            read.append(record.seq)
            if isinstance(record.event, AgentSpawned):
                return _Placement(record.seq, read)
    except JournalRecordError as exc:
        return _Placement(journal.stream_head(stream), read, exc)
    return _Placement(None, read)


def _check_placements(journal: Journal, placements: Iterable[_Placement], start: int) -> None:
    """Refuse a record at or before ``start`` that placing an agent read and that is not intact.

    A tail verification checks the records after ``start``; a place read from a changed
    record, or guessed without one that does not decode, need not be the live runtime's.

    Raises:
        JournalRecordError: the first such record.

    """
    for placement in placements:
        if placement.failed is not None and placement.failed.seq <= start:
            raise placement.failed
        for seq in placement.read:
            if seq <= start and not journal.record_intact(seq):
                msg = "the record, which places its agent, does not match its hash chain link"
                raise JournalRecordError(seq, msg)


def _close_left_open() -> None:
    """Close every runtime still open, so its batch-durability events reach the journal.

    A Ctrl-C (or a SIGTERM handler's ``sys.exit``) in one close stops that one only: the
    others are closed too, their journals flushed, and the first interruption is raised
    after them (Python prints it, as it does any exception of an exit handler).
    """
    stopped: BaseException | None = None
    for runtime in list(_OPEN):
        try:
            runtime.close()
        except Exception:
            log.exception("closing a runtime left open at exit failed")
        except BaseException as exc:  # noqa: BLE001 - raised below, once the rest are closed
            stopped = stopped or exc
    if stopped is not None:
        raise stopped


# Registered at import, so it runs after the program's own exit handlers registered later.
atexit.register(_close_left_open)
# A forked child has none of its parent's actor threads: it must not try to close them,
# nor count their spawns and behaviors as its own. The claims' lock is held across the
# fork, so the child's copy is not left locked by a thread it does not have.
os.register_at_fork(after_in_child=_OPEN.clear)
os.register_at_fork(
    before=_SPAWNING_LOCK.acquire, after_in_parent=_SPAWNING_LOCK.release, after_in_child=_fork_child_forgets
)


class Runtime:
    """The agent fabric: every agent a Pykka actor, every change journaled.

    Once closed, ``agents()`` and ``children()`` answer ``[]`` and ``close()`` does
    nothing; every other method raises ``RuntimeClosedError``, as do the calls of its
    ``bus`` and ``memory`` that send, journal or read a session (their class docstrings
    say which) and an agent handle's state and lifecycle calls (its fixed attributes,
    ``id``, ``parent``, ``task_id``, ``capabilities``, ``priority`` and ``behavior``,
    still answer).
    The methods' Raises: sections leave it out.

    A Ctrl-C (``KeyboardInterrupt``), or a SIGTERM handler's ``sys.exit``, that stops a
    call while it waits for its commit leaves it as one whose commit timed out: its
    outcome is the journal's, and the live runtime follows it (a spawn's agent is
    reached once stored, a publication and a ``send`` delivered, a request
    dead-lettered, as their ``ActorTimeoutError`` says).
    One that lands between a call's waits, in the runtime's own bookkeeping (a mailbox
    slot taken, a spawned agent made reachable, a step of ``close()``), is held until
    that bookkeeping is through or the next wait begins, then raised there: ``open`` on
    the main thread installs a SIGINT handler that does so and hands each interrupt to
    the handler it replaced (``signal.default_int_handler``, asyncio's, a program's own);
    the last runtime to close puts that one back. A runtime opened on another thread
    installs nothing, and a SIGINT handler installed after ``open`` replaces the
    runtime's (README, "From a notebook"). SIGTERM is held the same way when its handler
    is a Python function as ``open`` runs (the command line's, a program's ``sys.exit``).
    """

    def __init__(self, core: Core, journal: Journal | None) -> None:
        """Use ``Runtime.open``."""
        self._core = core
        self._journal = journal
        self._lock = threading.RLock()
        self._agents: dict[str, _Entry | None] = {}
        self._listed: dict[str, int] = {}
        """Every agent id the journal has a stream of, in the order it was first spawned,
        each with its rank in that order: what ``agents()`` lists by. A spawn enters its
        id when it reserves it, in the order spawns reach the journal; recovery enters
        every stream's id in the order the streams begin, killed agents' too, so an id
        killed and spawned again keeps its first place live as after a reopen. One entry
        per id ever spawned, as the journal keeps one stream per id; without a journal,
        per live agent (a kill takes its id out). ``_in_order`` lists the live ones."""
        self._unlisted_if_refused: set[str] = set()
        """Ids a spawn listed that were not listed before: taken out if the spawn fails."""
        self._closed = False
        self._stopping: list[tuple[str, _Entry]] = []
        """The agents close() is stopping: their behaviors may still run (``_running``)."""
        self._killed: list[_Entry] = []
        """Killed agents whose threads may not have ended yet: close() waits for them too."""
        self._late: dict[threading.Event, threading.Thread] = {}
        """Helper threads finishing calls whose callers timed out (``_finish_late``), each by the
        event it sets when done (a thread not yet started cannot be joined): flush waits for them."""
        self._in_flight = InFlight()
        """The messages the agents hold, in their mailboxes or in hand: what ``settle`` waits on."""
        self._told_late = 0
        """Messages told to agents after their senders timed out (counted on the writer's
        thread): a flush during which one arrives asks the agents to hand over again."""
        self._close_done = _interrupt.Event()  # waited for held: a Ctrl-C leaves it sane
        self._closer: threading.Thread | None = None
        """The thread a close() begun by an agent's behavior runs on (``_close_for_agent``)."""
        self._writer_stopped = False
        """Set by close() once the journal writer stopped: only then may it close the journal."""
        self._interrupted = False
        """Set from a close()'s start until its clean-up is through: still set after one a Ctrl-C
        interrupted, so that a later close() waits for what it left."""
        self._order = threading.Lock()
        """Held while a spawn reserves and submits, and a publication chooses and submits."""
        self._sigint = False
        """Whether ``open`` installed the chaining SIGINT handler (``_interrupt``) for this runtime."""
        self._put_back = False
        """close(): this runtime was the last to close, and puts back the SIGINT handler open replaced."""
        where = getattr(journal, "path", None)  # the LMDB journal's directory (Runtime.open's path)
        self._data_file = None if where is None else Path(os.path.realpath(where)) / "data.mdb"
        """The journal's data file, whose size ``stats()`` reports (None: memory only)."""
        self._bus = IpcBus(self)
        core.bus = self._bus
        core.on_killed = self._on_killed
        if core.writer is not None:
            core.writer.on_failstop = self._reload_all
        self._memory = MemoryManager(core, journal)  # its session actor starts last of all it does
        try:  # anything raised from here on (a thread that cannot start, a Ctrl-C) stops that actor
            core.memory = self._memory
            clock = core.clock.clock if isinstance(core.clock, CheckedClock) else core.clock
            if not isinstance(clock, FakeClock):
                self.memory.start_ticker()
        except BaseException:
            self._memory._close()  # noqa: SLF001 - its session actor, started above
            raise

    @property
    def bus(self) -> IpcBus:
        """The IPC bus (spec §3): send, request, reply, delegate, handoff, broadcast, dead letters.

        A behavior uses ``ctx``'s, with its agent as the sender.
        """
        return self._bus

    @property
    def memory(self) -> MemoryManager:
        """Session memory (spec §5): sessions, structured messages, prompt windows, TTL sweeps."""
        return self._memory

    # ------------------------------------------------------------- opening

    @classmethod
    def open(
        cls,
        path: str | PathLike[str] | None = None,
        *,
        config: Config | Mapping[str, Any] | None = None,
        clock: Clock | None = None,
        behaviors: Mapping[str, Callable[[], Behavior]] | None = None,
        allow_unverified: bool = False,
        verify: Literal["full", "tail"] = "full",
        llm_provider: LLMProvider | None = None,
        key: bytes | str | None = None,
        name: str | None = None,
    ) -> Runtime:
        """Open a runtime on the journal at ``path`` (None: memory only), recovering its agents.

        ``verify="full"`` checks the whole hash chain before recovery, and that every
        record decodes (as ``cogfabric verify`` does; that command also replays each
        snapshot's stream to compare, which recovery, trusting each snapshot's own hash,
        does not); ``"tail"`` checks
        the chain head, every stream's head (where recovery and appends start from the stream)
        and every record recovery replays: from the earliest of the live
        agents' latest snapshots, or from the first record of a live agent without one
        or of a live session (a live session's stream is replayed whole: sessions have
        no snapshots). A killed agent and a session that ended are not replayed: the
        record that says so, the stream's last, is checked on its own; nor is a stream
        of LLM records only (``llm(agent_id=...)`` for an id never spawned). The records
        read to place each agent in ``agents()`` order (its first spawn and any LLM
        records before it) are checked one by one too. It is faster only where that
        start is late: a long journal whose live agents all have recent snapshots and
        whose early sessions have ended, with no long stream of a never-spawned id.

        ``key`` makes the journal's hash chain keyed (a BLAKE2b MAC, see
        ``cogfabric.store.Journal.open``): only a holder of the key can re-chain it
        undetected. A journal written with a key must be opened with the same key.

        ``name`` labels the runtime in its threads' names, and so in a log format's
        ``%(threadName)s``: ``AgentActor-3 [sim-a] researcher-001``,
        ``JournalWriterActor-2 [sim-a]``, ``cogfabric-session-ticker [sim-a]``. It tells
        apart the log lines of runtimes one process hosts. By default the journal
        directory's name (its real path's last part, as ``ascii()`` writes it unless
        printable, cut to 64 characters with an ellipsis), or ``memory`` without a
        journal; ``Runtime.name`` answers it.

        Raises:
            JournalIntegrityError: the journal fails verification (unless ``allow_unverified``).
            JournalKeyError: ``key`` differs from the one the journal was written with
                (also a ``JournalIntegrityError``; ``allow_unverified`` does not waive it).
            JournalHeaderError: the header names another hash: it was changed (also a
                ``JournalIntegrityError``; not waived either).
            JournalDamagedError: a page of the data file is damaged: LMDB cannot read it,
                or the walk of every page at open found one it could crash on (also a
                ``JournalIntegrityError``; not waived either: nothing can be read past it).
            JournalRecordError: a record recovery must read cannot be read: missing,
                malformed, of an unknown type or a newer version (also a
                ``JournalIntegrityError``; not waived either: recovery would leave the
                agent's changes out unannounced).
            JournalFormatError: ``path`` is not a cogfabric journal, or a journal of another
                format (newer or older; the message says which).
            JournalLockedError: another writer holds the journal, or this process has it
                open already (a runtime not closed yet, say: close it first).
            JournalUnavailableError: the directory cannot be created or written to, or the
                storage failed (as ``cogfabric.store.Journal.open``).
            JournalFullError: ``journal.max_map_size`` is too small to create a new journal in.
            AgentCapacityError: the process cannot start a thread for every agent the
                journal holds (none is left running).
            RuntimeCapacityError: the process cannot start the journal writer's, the
                session actor's or the session ticker's thread (nothing of the runtime is
                left running).
            ClockError: ``clock`` lacks ``now()`` or ``monotonic()``, or its ``now()`` is
                not finite seconds (checked again at every journaled reading).
            InvalidConfigError: ``config`` is invalid (the message names the field).
            TypeError: ``behaviors`` is no mapping of str names to callables (a name of
                another type raises ``InvalidTextError``), ``llm_provider`` has no
                ``generate``, or ``allow_unverified`` is no bool (a string "false" would
                waive verification); or ``key`` is neither bytes nor str; or ``name`` is
                not a str.
            ValueError: ``path`` is the empty str (it would name the working directory);
                a ``key`` without a ``path``, or one that is empty, longer than BLAKE2b
                takes (64 bytes) or a str UTF-8 cannot encode; or ``verify`` is neither
                "full" nor "tail"; or ``name`` is blank, longer than 64 characters, or holds
                a character that is not printable (a newline, a control or format character).

        """
        config = Config.of(config)
        checked = CheckedClock.wrap(SystemClock() if clock is None else clock)
        _check_open_arguments(verify, allow_unverified, behaviors, llm_provider)
        name = None if name is None else _checked_name(name)
        if llm_provider is None and config.llm.base_url:
            # before the journal opens: a refused configuration leaves nothing open behind it
            llm_provider = OpenAICompatibleProvider(config.llm)
        journal: Journal | None = None
        writer: JournalWriter | None = None
        if path is None and key is not None:
            msg = "a chain key needs a journal: pass a path, or no key"
            raise ValueError(msg)
        if path is not None:
            jc = config.journal
            journal = Journal.open(
                path,
                sync=jc.fsync,
                map_size=jc.map_size,
                max_map_size=jc.max_map_size,
                key=key,
                check_pages=jc.check_pages,
            )
            try:
                if name is None:  # the path is one Journal.open took
                    name = _default_name(Path(path).resolve().name or "/")
                placements = cls._verify(
                    journal, verify, allow_unverified=allow_unverified, where=os.fspath(path), keyed=bool(key)
                )
                # Not waived by allow_unverified: a runtime whose every change the journal
                # refuses (its chain head contradicts its records) could do nothing.
                journal.check_appendable()
                # before the runtime journals anything: a recovery's expiries, made at this
                # clock's time, would be the last record
                _warn_if_clock_behind(journal, checked)
                writer = JournalWriter(
                    journal,
                    group_commit_max=config.journal.group_commit_max,
                    call_timeout=config.runtime.call_timeout,
                    name=name,
                )
            except BaseException:
                journal.close()
                raise
        try:
            core = Core(
                config=config, clock=checked, writer=writer, behaviors=behaviors or {}, name=name or "memory"
            )
            core.llm_provider = llm_provider
            runtime = cls(core, journal)  # recovers the sessions
        except BaseException:
            try:
                if writer is not None:
                    with contextlib.suppress(Exception):
                        writer.stop()
            finally:  # a second Ctrl-C during the stop must not leave the path locked
                if journal is not None:
                    journal.close()
            raise
        try:
            # the chaining SIGINT (and SIGTERM) handler, once the runtime is whole (close() takes it out
            # again): noted and the runtime listed before a Ctrl-C it holds is raised
            with _interrupt.HELD:
                runtime._sigint = _interrupt.install()
                _OPEN.add(runtime)
            if journal is not None:
                runtime._recover(journal, placements)
        except BaseException:
            runtime.close()
            raise
        return runtime

    @staticmethod
    def _verify(
        journal: Journal, mode: str, *, allow_unverified: bool, where: str, keyed: bool = False
    ) -> dict[str, _Placement] | None:
        """Check the journal at ``where`` as ``mode`` says; a tail check returns the places it read.

        A refusal names the command that reports it, with ``--key-file`` for a journal
        opened with a key (without it the command only says that a key is missing).
        ``mode`` is "full" or "tail" (``open`` refused any other before it opened the journal).
        """
        placements = None
        if mode == "full":
            after = 0
        else:
            placements = {stream: _place(journal, stream) for stream in journal.streams("agent/")}
            after = Runtime._replay_start(journal, placements, allow_unverified=allow_unverified)
        # decode too: a record no reader can decode (an unknown type, a newer version,
        # re-chained by a forger) is refused here, not only when recovery reads it
        report = journal.verify(after=after, decode=True)
        if not report.ok:
            at = "" if report.first_bad_seq is None else f" at seq {report.first_bad_seq}"
            if not allow_unverified:
                Runtime._raise_undecodable(journal, report)
                command = f"cogfabric verify {printable(shlex.quote(where))}" + (
                    " --key-file KEYFILE" if keyed else ""
                )
                msg = (
                    f"the journal failed verification{at}: {report.reason}; {printable(where)} is refused "
                    f"(`{command}` reports it; allow_unverified=True opens it anyway, trusting what it "
                    'holds, and what is appended then is past the bad part for good; README, "When a '
                    'journal fails verification", salvages what precedes it)'
                )
                raise JournalIntegrityError(msg, report)
            # the seq, as the refusal names it: what to look at, and where a salvage stops
            log.warning(
                "opening an unverified journal: it fails verification%s: %s; it fails there for "
                "good, whatever is appended after it",
                at,
                report.reason,
            )
        return placements

    @staticmethod
    def _raise_undecodable(journal: Journal, report: VerifyReport) -> None:
        """For a record whose chain holds but whose event no reader here decodes, raise its typed error.

        A newer version or an unknown type (a journal of a newer cogfabric, say) is then
        a ``JournalRecordVersionError`` or ``JournalRecordTypeError``: an
        ``EventVersionError`` or ``UnknownEventTypeError`` naming the type and the
        versions, and still a ``JournalIntegrityError``. Any other failure returns.
        """
        seq = report.first_bad_seq
        if seq is None or not report.reason.startswith(UNDECODABLE):
            return
        try:
            for _ in journal.read(after=seq - 1, until=seq):
                pass
        except JournalRecordError as exc:
            exc.report = report
            raise

    @staticmethod
    def _replay_start(journal: Journal, placements: dict[str, _Placement], *, allow_unverified: bool) -> int:
        """The seq before the first record recovery replays: a tail check starts after it.

        A live agent is replayed from its latest snapshot, or from its first record when
        it has none (or one that is damaged or unusable: ``snapshot_flaw``); a live
        session from its first record. A killed agent and a session that ended are not
        replayed: the last record that says so is checked on its own. Nor is a stream of
        LLM records only (``runtime.llm(agent_id=...)`` for an id never spawned).
        Recovery also reads each agent's first spawn (and the LLM records before it) to
        place it in ``agents()`` order, a killed one's too (``placements``, each agent
        stream's): unless checks are waived, those before the start are checked here one
        by one (``_check_placements``).
        The last record is always checked, with its stream's index entry: were the stream
        index emptied, a check of nothing would find no agent and no session to recover.
        """
        starts: list[int] = []
        for stream in journal.streams("agent/"):
            # Recovery skips a killed agent on its last record's word: that record must
            # match its chain link, or the agent is checked from where its replay starts
            end = agent_end(journal, stream)
            if end:
                if journal.record_intact(end):
                    continue
                # recovery reads it (agent_end) to tell a killed agent: the check starts
                # before it, even when the agent's snapshot covers it
                starts.append(end - 1)
            try:
                snapshot = journal.load_snapshot(stream)
            except JournalRecordError:
                if not allow_unverified:
                    raise
                snapshot = None  # recovery replays its events instead (replay_agent)
            if snapshot is not None and snapshot_flaw(journal, snapshot) is not None:
                snapshot = None  # its hash matches, yet it is unusable: replay_agent passes it over
            if snapshot is None and placements[stream].seq is None:
                continue  # LLM records of an id never spawned: recovery replays nothing of it
            starts.append(snapshot.seq if snapshot is not None else journal.stream_start(stream) - 1)
        for stream in journal.streams("session/"):
            # Recovery skips a session that ended, on its last record's word: that record
            # must match its chain link, or the whole stream is checked.
            end = session_end(journal, stream)
            if end and journal.record_intact(end):
                continue
            starts.append(journal.stream_start(stream) - 1)
        last = journal.last_seq
        start = max(0, min(*starts, last - 1)) if starts else max(0, last - 1)
        if not allow_unverified:  # a killed id keeps its place for a new spawn: it counts too
            _check_placements(journal, placements.values(), start)
        return start

    def _recover(self, journal: Journal, placements: dict[str, _Placement] | None = None) -> None:
        """Start every live agent from the journal, in the order each was first spawned.

        ``placements``: each agent stream's place, as a tail check read them (else read here).
        """
        spawned: dict[str, int] = {}
        for stream in journal.streams("agent/"):
            placement = placements.get(stream) if placements is not None else None
            first = (placement or _place(journal, stream)).seq
            if first is not None:  # None: LLM records only, for an id never spawned
                spawned[stream] = first
        streams = sorted(spawned, key=spawned.__getitem__)
        live = [stream for stream in streams if not agent_end(journal, stream)]  # a killed one stays dead
        # the runtime stream read once, from where the earliest replay starts, not once per agent
        start = min((replay_start(journal, s) for s in live), default=journal.last_seq)
        published = publications(journal, after=start)
        contexts = SharedContexts(journal, published)  # one copy of a publication for its targets, as live
        replayed = set(live)
        left: dict[str, list[str]] = {}  # behavior name: the agents left without it (logged)
        for stream in streams:
            agent_id = stream.removeprefix("agent/")
            with self._lock:
                self._list(agent_id)  # a killed one keeps its place for a new spawn
            if stream not in replayed:
                continue
            state = replay_agent(journal, agent_id, published=published)
            if state is not None:
                contexts.share(state)
                self._start(state, self._core.make_behavior(state.behavior, agent_id=agent_id, left=left))
        self._core.note_left_without(left)

    # ------------------------------------------------------------- agents

    def _start(self, state: AgentSnapshot, behavior: Behavior | None) -> Agent:
        return self._register(self._launch(state, behavior))

    def _launch(self, state: AgentSnapshot, behavior: Behavior | None) -> _Launched:
        """Start an agent's actor, which nothing reaches until ``_register``.

        Raises:
            AgentCapacityError: the process could not start its thread.

        """
        shared = Shared(
            state.lifecycle,
            self._core.mailbox_size,
            has_behavior=behavior is not None,
            in_flight=self._in_flight,
        )
        return _Launched(state, behavior, shared, AgentActor.start(self._core, state, behavior, shared))

    def _launch_all(self, states: list[AgentSnapshot], behaviors: list[Behavior | None]) -> list[_Launched]:
        """Start the actors of a spawn, all or none (before anything of it is journaled).

        Raises:
            AgentCapacityError: the process could not start one of their threads; those
                started are stopped again.

        """
        launched: list[_Launched] = []
        try:
            for state, behavior in zip(states, behaviors, strict=True):
                launched.append(self._launch(state, behavior))
        except BaseException:
            self._stop_launched(launched)
            raise
        return launched

    def _stop_launched(self, launched: Iterable[_Launched]) -> None:
        """Stop a spawn's actors: each asked first, then waited for (a Ctrl-C stops the wait)."""
        stops = [(one.state.id, one.ref.stop(block=False)) for one in launched]  # a dead one's: False
        deadline = time.monotonic() + self._core.call_timeout
        for agent_id, stop in stops:
            try:
                _interrupt.get(stop, max(0.0, deadline - time.monotonic()))
            except pykka.Timeout:
                log.warning(
                    "runtime %r: the actor of agent %r did not stop in time", self._core.name, agent_id
                )

    def _register(self, launched: _Launched) -> Agent:
        """Make a launched agent reachable (listed, addressable, subscribed); return its handle.

        Called once its spawn is stored (or handed over, in batch durability). If
        ``close()`` began meanwhile, close will not see this actor: it is stopped here,
        and the handle is returned all the same (the spawn is in the journal, and the
        agent is back on reopen; the handle's calls raise ``RuntimeClosedError``).
        """
        state, shared, ref = launched.state, launched.shared, launched.ref
        handle = Agent(self, state, shared)
        with self._lock:
            closed = self._closed
            if not closed:
                self._agents[state.id] = _Entry(ref, shared, handle, launched.behavior)
                self._list(state.id)
                self._unlisted_if_refused.discard(state.id)  # started: it stays listed
        if closed:
            self._stop_ref(ref, state.id)
            return handle
        self.bus._index(state.id, state.topics, state.topic_orders)  # noqa: SLF001
        return handle

    def spawn(
        self,
        agent_id: str | None = None,
        *,
        task_id: str | None = None,
        task_context: Mapping[str, Any] | None = None,
        parent: str | None = None,
        capabilities: Iterable[str] = (),
        priority: float = 0.0,
        experience_prior: object = None,
        behavior: str | Behavior | type | None = None,
    ) -> Agent:
        """Spawn an agent and return its handle (journaled before it exists, in sync durability).

        ``behavior`` is a registered name, a registered class, or an instance: the
        agent runs that very instance (one agent's only). The journal keeps the
        registered name, and a restart (after the behavior raised) or a reopen makes a
        fresh behavior from its factory. An instance of a class that is not registered
        is journaled by its class's qualified name (logged): a restart keeps the
        instance, and a reopen cannot reattach it unless that name is registered, so
        the agent comes back without a behavior and messages to it are dead-lettered.
        A class counts as registered when it is itself a factory in ``behaviors``
        (an instance made by a function that is registered is not recognised). An
        empty id is assigned one, and an empty ``parent`` is none (a root agent), as
        in the original.

        Raises:
            InvalidSpawnSpecError: the id contains white space or NUL, is longer than
                249 UTF-8 bytes (its stream name, ``agent/<id>``, must fit 255) or holds
                a lone surrogate; the behavior is an unknown name or a class that is not
                registered, has no ``on_message`` (or an ``async def`` one, which
                nothing would await), runs another agent already, or its
                factory raised (its error is the cause); also (as
                ``SpawnSpecTypeError``, a ``TypeError`` too) an argument of the wrong
                type: a non-str id, ``task_id``, ``parent`` or capability, or a
                priority that is no real number; a priority that is not finite.
            UnencodableValueError: ``task_context`` or ``experience_prior`` holds a
                value msgspec cannot encode (also a ``TypeError``).
            AgentExistsError: a live agent has that id, or its spawn is under way (a
                spawn retried after ``ActorTimeoutError``, or after a Ctrl-C).
            AgentCapacityError: the process cannot start another thread for it (nothing
                is journaled).
            RuntimeClosedError: the runtime is closed (a spawn stored as ``close()``
                begins returns its handle: the agent is back on reopen).
            ActorTimeoutError: the spawn was not journaled within ``call_timeout``
                (sync durability); a journal's refusal raises its ``JournalError``.

        """
        spec = {
            "agent_id": agent_id,
            "task_id": task_id,
            "task_context": task_context,
            "parent": parent,
            "capabilities": capabilities,
            "priority": priority,
            "experience_prior": experience_prior,
            "behavior": behavior,
        }
        return self.spawn_many([spec])[0]

    def spawn_many(self, specs: Iterable[Mapping[str, Any]]) -> list[Agent]:
        """Spawn many agents, journaled as one group commit; each spec holds ``spawn``'s arguments.

        All or nothing for the checks: if any spec is invalid or any id is taken,
        no agent is spawned.

        Raises:
            InvalidSpawnSpecError: an id contains white space, a behavior is unknown,
                a spec has an unknown key or is no mapping, or two specs share an id;
                an argument of the wrong type as in ``spawn``.
            UnencodableValueError, RuntimeClosedError,
            ActorTimeoutError: as ``spawn``.
            TypeError: ``specs`` is not iterable.
            AgentExistsError: a live agent has one of the ids.
            AgentCapacityError: the process cannot start a thread for one of them (nothing
                is journaled, and none of them runs).

        """
        self._check_open()
        specs = list(specs)
        for spec in specs:
            if not isinstance(spec, Mapping):
                msg = f"a spawn spec is a mapping of spawn's arguments, got {type(spec).__name__}"
                raise InvalidSpawnSpecError(msg)
            unknown = [key for key in spec if not (isinstance(key, str) and key in _SPAWN_ARGUMENTS)]
            if unknown:  # "self", or a key that is no str, would fail as Python's own TypeError
                shown = ", ".join(sorted(map(reprlib.repr, unknown)))
                raise InvalidSpawnSpecError(f"unknown spawn arguments [{shown}]")
        events = [self._spawn_event(**spec) for spec in specs]
        ids = [event.agent for event in events]
        if len(set(ids)) != len(ids):
            counts = collections.Counter(ids)
            twice = next(agent_id for agent_id in ids if counts[agent_id] > 1)
            where = [index for index, agent_id in enumerate(ids) if agent_id == twice]
            detail = f"two specs share an agent id: {twice!r} (specs[{where[0]}] and specs[{where[1]}])"
            raise InvalidSpawnSpecError(detail)
        # Made before the hold: a factory is the program's code (a model loaded, a client
        # connected), which a Ctrl-C stops at once, as anywhere else.
        core = self._core
        made = [core.live_behavior(s.get("behavior"), e.behavior) for s, e in zip(specs, events, strict=True)]
        # A Ctrl-C from here on is held until the spawn's bookkeeping is through (or it
        # waits: for room in the writer's queue, for its commit), then raised.
        with _interrupt.HELD:
            instances = self._claim_instances([s.get("behavior") for s in specs], ids)
            try:
                ack, launched = self._launch_spawn(made, events, ids)
            except BaseException:
                _unclaim(instances)
                raise
            agents = self._reach_spawned(ack, ids, launched, instances)
            # once its agents run: not for a spawn the journal refused (sync durability)
            self._core.note_unregistered(event.behavior for event in events)
            return agents

    def _launch_spawn(
        self, made: list[Behavior | None], events: list[AgentSpawned], ids: list[str]
    ) -> tuple[Ack | None, list[_Launched]]:
        """Start a spawn's actors (running ``made``), hand its events to the writer; the sync ack."""
        with self._lock:  # a taken id costs no thread (_reserve checks again, atomically)
            taken = next((agent_id for agent_id in ids if agent_id in self._agents), None)
            # an id killed before: its stream holds its earlier lives (journal only)
            again = {agent_id for agent_id in ids if agent_id in self._listed} if self._journal else set()
        if taken is not None:
            raise AgentExistsError(taken)
        states = [self._spawned_state(event) for event in events]
        for state in states:
            if state.id in again:
                # A snapshot with its first change of its own (a kill takes none): else
                # recovery replays the id's stream from its first life on, every life of
                # a pooled id that took fewer than ``snapshot_interval`` events each.
                # Never stored negative: a snapshot sets it to ``events`` as it is taken.
                state.snapshot_events = state.events - self._core.snapshot_interval
        # Their threads first: a process that can start no more fails the spawn before
        # anything of it is journaled (the actors are reachable once it is).
        launched = self._launch_all(states, made)
        try:
            return self._submit_spawn(events, ids), launched
        except BaseException:
            self._stop_launched(launched)
            raise

    def _submit_spawn(self, events: list[AgentSpawned], ids: list[str]) -> Ack | None:
        """Reserve the ids and hand the spawn to the writer; its acknowledgement in sync durability."""
        writer = self._core.writer
        if writer is not None:
            writer.wait_for_room()  # not while holding _order, which other callers wait for
        with self._order:  # in the journal before or after a publication, as it is live
            self._reserve(ids)
            try:
                if writer is not None and self._core.sync:
                    return writer.submit(events, wait_for_room=False)
                if writer is not None:
                    writer.submit_nowait(events, wait_for_room=False)
            except BaseException:
                self._release(ids)
                raise
        return None

    def _reach_spawned(
        self, ack: Ack | None, ids: list[str], launched: list[_Launched], instances: list[object]
    ) -> list[Agent]:
        """Wait for the spawn's commit (sync durability), then make its agents reachable.

        Releases the claims of the behavior instances once their agents are reachable
        or the spawn failed; a spawn finished late leaves that to its helper thread.
        """
        late = False
        try:
            if ack is not None:
                try:
                    ack.wait(self._core.call_timeout)
                except STOPPED_WAITING:
                    # Whether they are stored is unknown until the writer gets to them (a
                    # timeout, or a Ctrl-C): the ids stay reserved, and the agents are
                    # reached if the spawn commits.
                    finish = functools.partial(self._spawned_late, launched, instances)
                    late = self._finish_late(ack, finish, "spawn")
                    if not late:
                        self._stop_launched(launched)  # their ids stay reserved until a reopen
                    raise
                except BaseException:
                    self._release(ids)
                    self._stop_launched(launched)
                    raise
            agents: list[Agent] = []
            try:
                for one in launched:
                    agents.append(self._register(one))  # noqa: PERF401 - counts those reached if one fails
            except BaseException:
                self._release(ids)
                self._stop_launched(launched[len(agents) :])
                raise
            return agents
        finally:
            if not late:
                _unclaim(instances)

    def _reserve(self, ids: list[str]) -> None:
        """Reserve ``ids`` for agents being spawned, all or none.

        Raises:
            AgentExistsError: one of them is live or reserved already.

        """
        with self._lock:
            for agent_id in ids:
                if agent_id in self._agents:
                    raise AgentExistsError(agent_id)
            for agent_id in ids:
                self._agents[agent_id] = None  # reserved while journaling
                # listed in the order spawns reach the journal (callers hold _order), as a
                # reopen lists them; a spawn that then fails takes a new id out again
                if agent_id not in self._listed:
                    self._list(agent_id)
                    self._unlisted_if_refused.add(agent_id)

    @staticmethod
    def _spawned_state(event: AgentSpawned) -> AgentSnapshot:
        state = apply_event(None, event)
        assert state is not None
        return state

    def _release(self, ids: Iterable[str]) -> None:
        """Drop the reservations of agents that were not started."""
        with self._lock:
            for agent_id in ids:
                if agent_id in self._agents and self._agents[agent_id] is None:
                    del self._agents[agent_id]
                if agent_id in self._unlisted_if_refused:
                    self._unlisted_if_refused.discard(agent_id)
                    self._listed.pop(agent_id, None)

    def _claim_instances(self, given: list[object], ids: list[str]) -> list[object]:
        """Claim the behavior instances of a spawn; refuse one given twice, or one an agent runs.

        ``given`` holds each agent's behavior, ``ids`` its id. One object's ``on_message``
        would otherwise run on two actors' threads at once. An agent of any runtime of
        the process counts, one being spawned (claimed), one its closing runtime is
        still stopping, and one a closed runtime's close() gave up waiting for
        (``_GIVEN_UP``) too. Returns the instances claimed: release them with
        ``_unclaim`` once their agents are reachable or the spawn failed.

        Raises:
            InvalidSpawnSpecError: as above.
            AgentExistsError: the instance's spawn under this very id is under way in
                this runtime, or stored already (a spawn retried after it timed out).

        """
        pairs = [(b, a) for b, a in zip(given, ids, strict=True) if _is_instance(b)]
        instances = [b for b, _ in pairs]
        if len({id(b) for b in instances}) != len(instances):
            msg = "one behavior instance is given to two agents; each agent needs its own"
            raise InvalidSpawnSpecError(msg)
        if not instances:
            return instances
        with _SPAWNING_LOCK:
            for b, agent_id in pairs:
                claim = _SPAWNING.get(id(b))
                if claim is None:
                    continue
                if claim[1] is self and claim[2] == agent_id:
                    raise AgentExistsError(agent_id)  # its first spawn reserved the id
                msg = "this behavior instance is being spawned for another agent; each agent needs its own"
                raise InvalidSpawnSpecError(msg)
            with self._lock:
                again = [a for b, a in pairs if getattr(self._agents.get(a), "behavior", None) is b]
            if again:
                raise AgentExistsError(again[0])  # the same spawn again, stored already
            _prune_given_up()
            given_up = next((a for a, given, _ in _GIVEN_UP if any(given is b for b in instances)), None)
            if given_up is not None:
                msg = (
                    f"this behavior instance may still run agent {given_up!r} of a closed runtime, whose "
                    "close() gave up waiting for it; each agent needs its own"
                )
                raise InvalidSpawnSpecError(msg)
            for runtime in {self, *list(_OPEN)}:
                running = runtime._running(instances)  # noqa: SLF001 - this class's own, in another runtime
                if running is not None:
                    where = "" if runtime is self else " of another runtime"
                    msg = (
                        f"this behavior instance runs agent {running!r}{where} already; "
                        "each agent needs its own"
                    )
                    raise InvalidSpawnSpecError(msg)
            for b, agent_id in pairs:
                _SPAWNING[id(b)] = (b, self, agent_id)
        return instances

    def _running(self, instances: list[object]) -> str | None:
        """The id of an agent of this runtime that runs one of ``instances``, or is stopping with it."""
        with self._lock:
            entries = [(agent_id, e) for agent_id, e in self._agents.items() if e is not None]
            entries += self._stopping
        for agent_id, entry in entries:
            if any(entry.behavior is b for b in instances):
                return agent_id
        return None

    def _spawned_late(self, launched: list[_Launched], instances: list[object], committed: bool) -> None:
        """A spawn whose caller timed out is over: make its agents reachable if it was stored."""
        registered = 0
        try:
            if committed and not self._closed:
                for one in launched:
                    self._register(one)
                    registered += 1
                self._core.note_unregistered(one.state.behavior for one in launched)
        finally:
            self._stop_launched(launched[registered:])
            self._release(one.state.id for one in launched)  # those not reached, if any
            _unclaim(instances)

    def _finish_late(self, ack: Ack, done: Callable[[bool], None], what: str) -> bool:
        """Run ``done(committed)`` on a helper thread once ``ack`` resolves; False if none starts.

        For a caller that stopped waiting (``ActorTimeoutError``, a Ctrl-C): the writer still
        commits what it was handed, and the live runtime must follow what the journal
        then holds, as replay will. The writer resolves every acknowledgement when it
        commits, fails or stops, so the thread ends. A process out of threads cannot
        start one: then the live runtime does not follow (logged), and only a reopen
        reads what the journal holds.
        """

        def wait() -> None:
            committed = False
            while True:
                try:
                    ack.wait(_LATE_POLL)
                    committed = True
                except ActorTimeoutError:
                    if not self._closed:
                        continue
                except Exception:  # noqa: BLE001 - refused or failed: not stored
                    committed = False
                break
            try:
                done(committed)
            except Exception:
                log.exception("finishing a %s after its caller timed out failed", what)
            finally:
                finished.set()
                self._late.pop(finished, None)

        finished = _interrupt.Event()  # waited for held (flush): a Ctrl-C leaves it sane
        thread = threading.Thread(
            target=wait, name=thread_name(f"cogfabric-late-{what}", self._core.name), daemon=True
        )
        self._late[finished] = thread  # before it starts: a flush from now on waits for it
        try:
            thread.start()
        except RuntimeError:  # no thread left
            finished.set()
            self._late.pop(finished, None)
            log.warning(
                "no thread to finish a %s whose commit timed out: the live runtime will not follow "
                "it if it commits; reopen the runtime to take it from the journal",
                what,
            )
            return False
        return True

    def _spawn_event(
        self,
        agent_id: str | None = None,
        *,
        task_id: str | None = None,
        task_context: Mapping[str, Any] | None = None,
        parent: str | None = None,
        capabilities: Iterable[str] = (),
        priority: float = 0.0,
        experience_prior: object = None,
        behavior: str | Behavior | type | None = None,
    ) -> AgentSpawned:
        core = self._core
        if agent_id is None or agent_id == "":
            agent_id = f"agent-{os.urandom(6).hex()}"  # an empty identity is auto-assigned (spec §2.3)
        try:
            agent_id = require_str(agent_id, "agent id")  # no str, or a lone surrogate: as below
            task_id = None if task_id is None else require_str(task_id, "task_id")
            parent = None if parent is None else require_str(parent, "parent")
        except TypeError as exc:
            raise SpawnSpecTypeError(str(exc)) from None
        agent_id = check_agent_id(agent_id)
        if parent == "":
            parent = None  # no agent has the empty id: the original's root agent
        priority = _spawn_priority(priority)
        capabilities = _spawn_capabilities(capabilities)
        cognitive = CognitiveState()
        if experience_prior is not None:
            cognitive = CognitiveState(schema_version=1, context=admit_value(experience_prior))
        return AgentSpawned(
            at=core.clock.now(),
            agent=agent_id,
            task_id=task_id,
            parent=parent,
            capabilities=capabilities,
            priority=priority,
            task_context=admit_mapping(task_context),
            cognitive=cognitive,
            behavior=core.behavior_name(behavior),
        )

    def agent(self, agent_id: str) -> Agent:
        """The handle of a live agent.

        Raises:
            AgentNotFoundError: no live agent has that id.
            InvalidTextError: ``agent_id`` is no id: not a ``str``, or UTF-8 cannot encode
                it (also a ``TypeError``).

        """
        return self._entry(agent_id).handle

    def agents(self) -> list[str]:
        """The ids of the live agents, in the order their ids were first spawned (none after ``close()``).

        With a journal, an agent killed and spawned again keeps its id's first place, so
        the list is the same before and after a reopen; a memory-only runtime forgets a
        killed agent's id (it keeps no stream of it), and a new spawn of it comes last.
        A reopen places each id by its first ``AgentSpawned``, also when LLM records made
        for it with ``runtime.llm(agent_id=...)`` came before its spawn. For that order
        the runtime keeps every id ever spawned (a hundred bytes or so each); this list,
        like ``children`` and ``context_views``, costs what the live agents do, not the
        ids spawned and killed before.
        """
        with self._lock:
            return [a for a, _ in self._in_order()]

    def _list(self, agent_id: str) -> None:
        """Enter ``agent_id`` in ``_listed`` after every id there, unless it is there (under ``_lock``).

        Its rank is one past the last entry's, the highest (ranks grow in the dict's order).
        """
        listed = self._listed
        if agent_id not in listed:
            listed[agent_id] = next(reversed(listed.values()), -1) + 1

    def _in_order(self) -> list[tuple[str, _Entry]]:
        """The live agents in ``agents()`` order, each with its entry (under ``_lock``).

        ``_listed`` keeps every id ever spawned: where it holds many more than the live
        agents (a long-lived runtime whose agents come and go), the live ones are sorted
        by their ranks rather than found by a walk of every id the journal ever held.
        """
        live, listed = self._agents, self._listed
        if len(listed) <= 4 * len(live):
            return [(a, e) for a in listed if (e := live.get(a)) is not None]
        found = [(a, e) for a, e in live.items() if e is not None and a in listed]
        return sorted(found, key=lambda item: listed[item[0]])

    def children(self, agent_id: str) -> list[str]:
        """The live agents spawned with ``agent_id`` as parent (they outlive it), in ``agents()`` order.

        An unknown id is no error: its children are those that name it as their parent,
        which a spawn does not check (the parent link is provenance; the parent may be
        gone, or never have been an agent here), so usually none: ``[]``, as the original's.

        Raises:
            InvalidTextError: ``agent_id`` is not a ``str``, or UTF-8 cannot encode it (also a
                ``TypeError``).

        """
        require_str(agent_id, "agent_id")
        with self._lock:
            return [a for a, e in self._in_order() if e.handle.parent == agent_id]

    def context_views(
        self, agent_ids: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> dict[str, ContextView]:
        """Many agents' ``context_view()`` at once: ``{agent_id: ContextView}``.

        What ``runtime.agent(a).context_view()`` answers for each agent, read together:
        each view is a deep copy of that agent's task and private layers, read-only, and
        holds only that agent's own private values. ``agent_ids=None`` (the default)
        reads every live agent, in ``agents()`` order, suspended and retired ones too;
        otherwise the agents given, in the order given (an id given twice is read once).
        An agent killed meanwhile is left out of ``None``'s reading; one given by id
        raises. The reads share one ``timeout``, in real seconds (default, and for 0 or
        less, ``call_timeout``).

        Each agent is read between two of its messages, after every message its mailbox
        held when the read reached it, as its handle's call would be: an idle agent with
        an empty mailbox is read at once on the calling thread, under the agent's lock
        and without a message; every other agent is asked, all of them before any answer
        is waited for, so that they answer side by side. So each view is one agent's
        consistent state, but the agents are not read at one instant: while messages are
        in flight, one agent's view may show a message another's does not yet. After
        ``settle()``, with no other thread sending meanwhile, no agent moves, and the
        views are the state the round left.

        Raises:
            AgentNotFoundError: an id given is no live agent (killed before or during
                the read); nothing is read when it is known before.
            InvalidTextError: an id given is not a ``str``, or UTF-8 cannot encode it
                (also a ``TypeError``).
            TypeError: ``agent_ids`` is a single ``str`` rather than ids, or ``timeout``
                is not a number.
            AgentRunningError: called from a behavior whose own agent is among those to
                read (it would wait for itself: its own state is ``ctx``'s; pass
                ``agent_ids`` without it), or one of them waits for that behavior's
                reply; nothing is read.
            ActorTimeoutError: agents did not answer within ``timeout`` (a behavior
                still running; the message names them). Their reads stay in their
                mailboxes, and are answered to no one.
            MailboxFullError: an agent's mailbox stayed full until ``timeout``, so it
                could not be asked.
            RuntimeClosedError: the runtime is closed, also by a ``close()`` meanwhile.
            JournalError: the journal went fail-stop, and an agent asked, which takes the
                journal's word before its next message, could not read it.

        """
        views = self._read_all("context_view", agent_ids, timeout)
        return {agent_id: ContextView(*layers) for agent_id, layers in views.items()}

    def cognitive_states(
        self, agent_ids: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> dict[str, CognitiveState]:
        """Many agents' ``cognitive_state()`` at once: ``{agent_id: CognitiveState}`` (deep copies).

        Reads as ``context_views`` does, which has the order, the consistency and the
        errors of both.
        """
        states: dict[str, CognitiveState] = self._read_all("cognitive_state", agent_ids, timeout)
        return states

    def _read_all(self, name: str, agent_ids: Iterable[str] | None, timeout: float | None) -> dict[str, Any]:
        """Read operation ``name`` of many agents: idle ones on this thread, the rest asked at once."""
        self._check_open()
        wait = self._core.call_timeout if timeout is None else bounded_wait(timeout, self._core.call_timeout)
        every = agent_ids is None
        entries = self._to_read(agent_ids)
        caller = agent_of_thread(self._core)
        if caller is not None:  # a behavior: checked for all before any is read
            for agent_id, entry in entries:
                self._refuse_waiting_for_itself(agent_id, entry, name, caller)
        deadline = time.monotonic() + wait
        results: dict[str, Any] = {}
        asked = self._read_or_ask(name, entries, results, deadline, every=every)
        late: list[str] = []
        for agent_id, future in asked:
            try:
                results[agent_id] = future.get(timeout=max(0.0, deadline - time.monotonic()))
            except pykka.Timeout:
                late.append(agent_id)
            except (pykka.ActorDeadError, AgentNotFoundError) as exc:
                self._check_open()  # stopped by close(), not killed
                if isinstance(exc, pykka.ActorDeadError):
                    self._check_not_stopped_outside(agent_id)
                if not every:
                    raise AgentNotFoundError(agent_id) from exc
                del results[agent_id]
        if late:
            msg = (
                f"{_named(late)} did not answer {name} within {wait:g} s; the reads stay in their "
                "mailboxes and are answered to no one"
            )
            raise ActorTimeoutError(msg)
        return results

    def _to_read(self, agent_ids: Iterable[str] | None) -> list[tuple[str, _Entry]]:
        """The live agents ``agent_ids`` names, once each, in its order (None: all, in ``agents()`` order)."""
        if agent_ids is None:
            with self._lock:
                return self._in_order()
        if isinstance(agent_ids, str):
            msg = f"agent_ids is ids, not one id: give [{agent_ids!r}]"
            raise TypeError(msg)
        chosen: dict[str, _Entry] = {}
        for given in agent_ids:
            agent_id = require_str(given, "agent_id")
            chosen.setdefault(agent_id, self._entry(agent_id))
        return list(chosen.items())

    def _read_or_ask(
        self,
        name: str,
        entries: list[tuple[str, _Entry]],
        results: dict[str, Any],
        deadline: float,
        *,
        every: bool,
    ) -> list[tuple[str, pykka.Future[Any]]]:
        """Read each idle agent into ``results``; ask the others, those with a full mailbox last.

        Every agent takes its place in ``results`` in ``entries`` order (an asked one ``ASK``
        until its answer comes). One killed meanwhile leaves it if ``every``, else raises.
        """
        asked: list[tuple[str, pykka.Future[Any]]] = []
        full: list[tuple[str, _Entry]] = []
        message = (CALL, name, ())
        for agent_id, entry in entries:
            results[agent_id] = answer = entry.shared.read_now(name)
            if answer is ASK:
                full.append((agent_id, entry))
        for wait_for_room in (False, True):  # asked once the others are: what is left of the timeout
            waiting, full = full, []
            for agent_id, entry in waiting:
                try:
                    self._admit(
                        agent_id, entry, max(0.0, deadline - time.monotonic()) if wait_for_room else 0.0
                    )
                    asked.append((agent_id, self._ask_current(agent_id, entry, message)))
                except MailboxFullError:
                    if wait_for_room:
                        raise
                    full.append((agent_id, entry))
                except AgentNotFoundError:
                    if not every:
                        raise
                    del results[agent_id]
        return asked

    def _ask_current(
        self, agent_id: str, entry: _Entry, message: tuple[Any, ...], *, control: bool = False
    ) -> pykka.Future[Any]:
        """Ask ``message`` (its mailbox slot taken) of ``entry``'s actor, if still ``agent_id``'s.

        Under the runtime's lock, as ``_tell_current`` tells: a kill's or ``close()``'s stop
        is queued only after its entry is marked, so the message goes before the stop and
        is answered (a killed agent refuses it). Pykka's own ask checks that the actor
        lives, then queues: a stop that ended the actor in between would leave the message
        unanswered, and its reader waiting out its timeout for an agent long gone.

        ``control``: the slot is a lifecycle call's (``acquire_control``), given back as such.

        Raises:
            AgentNotFoundError: it was killed; the slot is given back.
            RuntimeClosedError: ``close()`` asked its actor to stop.

        """
        with self._lock:
            if (
                not entry.killed
                and not entry.stop_asked
                and (self._agents.get(agent_id) is entry or self._closed)
            ):
                # an actor dead all the same (a bug) answers the future with ActorDeadError,
                # its slots counted out by its end (MailboxSlots.retire)
                return entry.ref.ask(message, block=False)
        slots = entry.shared.slots
        if control:  # given back, and no longer in flight
            slots.release_control()
            slots.handled()
        else:
            slots.release()
        self._check_open()
        raise AgentNotFoundError(agent_id)

    def suspend(self, agent_id: str) -> None:
        """Suspend an agent; idempotent. Raises ``AgentRetiredError`` for a retired one.

        An agent whose behavior is handling a message (RUNNING) is suspended once that
        message is handled, in its mailbox order: the call waits for that, at most
        ``call_timeout``. A suspend that raises ``ActorTimeoutError`` still takes effect
        when the agent gets to it, as the journal will show (the original flips the
        state at once and lets the work go on).

        Raises:
            AgentNotFoundError: no live agent has that id.
            InvalidTextError: ``agent_id`` is no id: not a ``str``, or UTF-8 cannot encode
                it (also a ``TypeError``).
            AgentRetiredError: the agent is retired.
            ActorTimeoutError: the agent did not get to it within ``call_timeout``.
            JournalError: the journal refused the change, or is fail-stop.

        """
        self._ask(agent_id, "suspend")

    def resume(self, agent_id: str) -> None:
        """Resume a suspended agent.

        A RUNNING agent is not suspended: it is refused at once, as in the original,
        rather than after the message its behavior is handling; unless a lifecycle call
        waits in its mailbox (a suspend that timed out, say), which the resume follows.

        Raises:
            AgentNotFoundError: no live agent has that id.
            InvalidTextError: ``agent_id`` is no id: not a ``str``, or UTF-8 cannot encode
                it (also a ``TypeError``).
            AgentNotSuspendedError: the agent is not suspended (RUNNING included).
            AgentRetiredError: the agent is retired.
            ActorTimeoutError: the agent did not get to it within ``call_timeout`` (queued
                behind a running message and a lifecycle call); it still takes effect
                when the agent does.
            JournalError: the journal refused the change, or is fail-stop.

        """
        if self._running_with_no_call_ahead(agent_id):
            raise AgentNotSuspendedError(agent_id)
        self._ask(agent_id, "resume")

    def _running_with_no_call_ahead(self, agent_id: str) -> bool:
        """Whether ``agent_id``'s behavior handles a message and no lifecycle call waits behind it.

        ``resume``, ``retire`` and ``recover`` refuse such an agent at once, as the
        original does a RUNNING one; behind a lifecycle call that waits in the mailbox (a
        suspend that timed out, say) they queue instead, and are checked against the
        state it leaves: a suspend then a retire (or a recover) works as in the original,
        however long the message in hand takes. From the agent's own behavior: False,
        for ``_ask`` to refuse it (``AgentRunningError``, the call would wait for itself).

        Raises:
            AgentNotFoundError: no live agent has that id.
            InvalidTextError: ``agent_id`` is no id.

        """
        shared = self._entry(agent_id).shared
        # pending first: the agent takes a lifecycle call out only after its behavior's
        # message is over, so no call pending and RUNNING afterwards means none is ahead
        pending = shared.slots.control_pending
        return (
            not pending
            and shared.lifecycle == AgentState.RUNNING
            and shared.thread is not threading.current_thread()
        )

    def retire(self, agent_id: str) -> None:
        """Retire an agent; idempotent. Raises ``AgentRunningError`` while it runs.

        Unless a lifecycle call waits in its mailbox (a suspend that timed out, say): the
        retire follows it, as ``resume`` does, so a suspend then a retire works as in the
        original however long the message in hand takes.

        Raises:
            AgentNotFoundError: no live agent has that id.
            InvalidTextError: ``agent_id`` is no id: not a ``str``, or UTF-8 cannot encode
                it (also a ``TypeError``).
            AgentRunningError: its behavior is handling a message (and no lifecycle call
                waits in its mailbox).
            ActorTimeoutError: the agent did not get to it within ``call_timeout``; it
                still takes effect when the agent does.
            JournalError: the journal refused the change, or is fail-stop.

        """
        if self._running_with_no_call_ahead(agent_id):
            raise AgentRunningError(agent_id, _BUSY.format(call="retire"))
        self._ask(agent_id, "retire")

    def recover(self, agent_id: str, state: CognitiveState) -> None:
        """Install a cognitive state (e.g. a checkpoint) in an IDLE or SUSPENDED agent.

        Version 0 is upgraded to 1; a SUSPENDED agent becomes IDLE, as in the original.
        Stricter than the original, which also accepts a RUNNING agent (README, "Where
        cogfabric differs"); behind a lifecycle call that waits in its mailbox (a suspend
        that timed out, say) it queues, as ``resume`` does, and is checked once the agent
        gets to it.

        Raises:
            AgentNotFoundError: no live agent has that id.
            InvalidTextError: ``agent_id`` is no id: not a ``str``, or UTF-8 cannot encode
                it (also a ``TypeError``).
            AgentRunningError: its behavior is handling a message (and no lifecycle call
                waits in its mailbox).
            AgentRetiredError: it is retired.
            ActorTimeoutError: the agent did not get to it within ``call_timeout`` (queued
                behind a running message and a lifecycle call); it still takes effect
                when the agent does.
            CognitiveStateSchemaVersionError: ``state`` is of a future schema version.
            TypeError: ``state`` is not a ``CognitiveState`` (a mapping, such as a checkpoint
                read back from a layer, is pointed to ``decode_cognitive_state``).
            UnencodableValueError: one of its fields holds a value msgspec cannot encode
                (also a ``TypeError``).
            JournalError: the journal refused the change, or is fail-stop.

        """
        if self._running_with_no_call_ahead(agent_id):
            raise AgentRunningError(agent_id, _BUSY.format(call="recover"))
        if self._entry(agent_id).shared.lifecycle == AgentState.RETIRED:
            raise AgentRetiredError(agent_id)  # before the state's version, as the original checks
        upgrade_cognitive_state(state)
        self._ask(agent_id, "recover", state)

    def last_checkpoint(self, agent_id: str) -> CognitiveState | None:
        """The cognitive state of ``agent_id``'s latest checkpoint, read from the journal; None if none.

        ``checkpoint_cognitive`` journals every checkpoint it returns; this reads the
        latest back, a fresh copy, for a live, suspended, retired or killed agent, also
        after the runtime was reopened: checkpoint an agent, kill it, spawn another and
        ``recover`` it from the checkpoint, with a crash anywhere in between. An id
        killed and spawned again has one stream: its latest checkpoint of either life.

        It first hands over the agent's batched changes (so a checkpoint taken in batch
        durability is found, also one a kept ``ctx`` or a behavior's worker thread took
        while the agent handles a message; from a behavior, its own agent's changes too)
        and waits for the journal to commit them, unless the journal is fail-stop (also
        when it fails meanwhile): then it reads what the journal holds. It reads the
        agent's records from its newest back to its latest checkpoint (the agent's whole
        stream when it took none).

        Raises:
            AgentCheckpointNotSupportedError: the runtime has no journal.
            AgentNotFoundError: the journal holds no record of ``agent_id``.
            InvalidTextError: ``agent_id`` is no id: not a ``str``, or UTF-8 cannot encode
                it (also a ``TypeError``).
            RuntimeClosedError: the runtime is closed (also by another thread's ``close()`` while
                it reads).
            ActorTimeoutError: the journal did not commit within ``call_timeout``.
            JournalRecordError: one of those records does not decode (names its seq).

        """
        self._check_open()
        journal = self._journal
        if journal is None:
            raise AgentCheckpointNotSupportedError
        plain = require_str(agent_id, "agent_id")
        own = self._own_entry()
        asked = self._agents.get(plain)  # a dict read is atomic; writers hold the lock
        writer = self._core.writer
        if writer is not None:
            # the agents' batched changes: the asked one's too, a kept ctx's or a worker
            # thread's mid-message
            entries = (own,) if asked is own else (own, asked)
            writer.hand_over_and_flush(entry.shared.flush_outbox for entry in entries if entry is not None)
        return last_checkpoint_in(journal, plain)

    def kill(self, agent_id: str) -> None:
        """Journal a death snapshot and remove the agent; its children live on.

        The agent removes itself once its death is journaled, in its mailbox order, so
        a kill that raises ``ActorTimeoutError`` (the agent was busy) still completes
        when the agent gets to it, as the journal will show; nothing it still had in its
        mailbox is handled after that. A kill whose own commit timed out is decided by
        the journal: the agent stays listed, handling nothing, until the commit ends;
        then it leaves if stored, and lives on if refused or lost to a journal failure.
        Like every lifecycle call, it is queued even when the agent's mailbox is full
        (past the bound): it gets ``MailboxFullError`` only
        when the mailbox holds ``MailboxSlots.CONTROL_EXTRA`` (16) lifecycle calls already
        (calls that timed out, made again) and none is handled within ``call_timeout``.

        Raises:
            AgentNotFoundError: no live agent has that id.
            InvalidTextError: ``agent_id`` is no id: not a ``str``, or UTF-8 cannot encode
                it (also a ``TypeError``).
            ActorTimeoutError: the agent, or the kill's commit, did not answer within
                ``call_timeout`` (as above).
            JournalError: the journal refused the kill, or is fail-stop: the agent lives on.

        """
        entry = self._entry(agent_id)
        self._ask(agent_id, "kill")
        # Its actor queued its own stop as it left (_on_killed), or close() stops it: wait
        # for its thread to end. A stop asked here, after Pykka found the actor alive, could
        # land in its inbox just after that stop ended it, and be waited for in vain.
        thread = entry.shared.thread
        if thread is not None and thread is not threading.current_thread():
            with _interrupt.HELD:  # but in its wait, which a Ctrl-C as it begins ends within a slice
                _interrupt.join(thread, self._core.call_timeout)
            if thread.is_alive():
                log.warning(
                    "runtime %r: the actor of agent %r did not stop in time", self._core.name, agent_id
                )

    def _on_killed(self, agent_id: str, ref: pykka.ActorRef[AgentActor]) -> None:
        """An agent's death is journaled (on its actor's thread): remove it and stop it."""
        with self._lock:
            entry = self._agents.get(agent_id)
            if entry is None or entry.ref is not ref:
                return  # removed already (the runtime is closing)
            entry.killed = True
            del self._agents[agent_id]
            # its thread ends after the stop below: close() waits for it (those ended are dropped)
            self._killed = [e for e in self._killed if e.shared.thread is None or e.shared.thread.is_alive()]
            self._killed.append(entry)
            if self._journal is None:  # no stream keeps its id's place: a memory-only run stays bounded
                self._listed.pop(agent_id, None)
        entry.shared.slots.close()  # a sender waiting for room hears AgentNotFoundError now
        self.bus._forget(agent_id)  # noqa: SLF001
        ref.stop(block=False)  # behind what is in its mailbox, which it refuses

    def publish_task_context(self, task_id: str, mapping: Mapping[str, Any] | None) -> list[str]:
        """Replace the task layer of every live agent of ``task_id``, as one journaled event.

        Returns the ids it went to, once the event is durable; each agent applies it in
        its mailbox order, after any ``set_task_context`` journaled before it. Being
        durable, it goes to every target that is still live: a mailbox that stays full
        (``call_timeout`` at most, for all targets together) takes it over its size
        (logged), rather than leave that agent short of what replay will give it. If
        the commit times out (``ActorTimeoutError``), it is delivered once stored.
        ``mapping`` None means an empty task layer, as for ``set_task_context``.

        Raises:
            RuntimeClosedError: the runtime is closed.
            TypeError: ``task_id`` is not a str, or ``mapping`` is no mapping.
            UnencodableValueError: ``mapping`` holds a value msgspec cannot encode
                (also a ``TypeError``).
            ActorTimeoutError: the event was not durable within ``call_timeout``.
            JournalError: the journal refused the event, or is fail-stop (no agent gets it).

        """
        self._check_open()
        task_id = require_str(task_id, "task_id")
        copied = admit_mapping(mapping)
        with _interrupt.HELD:  # a Ctrl-C is held until it is delivered (or waits), then raised
            return self._publish(task_id, copied)

    def _publish(self, task_id: str, copied: dict[str, Any]) -> list[str]:
        writer = self._core.writer
        if writer is not None:
            writer.wait_for_room()  # not while holding _order, which other callers wait for
        # The targets are the agents live now, and the event is queued before any spawn
        # can reserve an id again: replay applies it to the same agents.
        with self._order:
            with self._lock:
                chosen = [
                    (a, e) for a, e in self._agents.items() if e is not None and e.handle.task_id == task_id
                ]
            targets = [agent_id for agent_id, _ in chosen]
            event = TaskContextPublished(
                at=self._core.clock.now(), task_id=task_id, context=copied, agents=tuple(targets)
            )
            if writer is None:  # no writer to number it: the runtime's own tickets order it
                ack, ticket = None, next(self._core.tickets)
            else:
                ack, ticket = writer.submit([event], wait_for_room=False), 0
        if ack is None:
            self._deliver_publication(event, chosen, ticket, 0)
            return targets
        try:
            seq = ack.wait(self._core.call_timeout)[0]
        except STOPPED_WAITING:  # a timeout, a Ctrl-C, a SIGTERM's sys.exit
            # It may still commit; replay would then apply it to every target, so the
            # live agents get it too, once it does.
            def late(committed: bool) -> None:
                if committed and not self._closed:
                    self._deliver_publication(event, chosen, ack.ticket, ack.seqs[0])

            self._finish_late(ack, late, "publication")
            raise
        self._deliver_publication(event, chosen, ack.ticket, seq)
        return targets

    def _deliver_publication(
        self, event: TaskContextPublished, targets: list[tuple[str, _Entry]], ticket: int, seq: int
    ) -> None:
        writer = self._core.writer
        deadline = time.monotonic() + self._core.call_timeout  # one wait for all full mailboxes
        plain = (PUBLISH, event, ticket, seq)
        fanout = FanOut(len(targets))
        told = 0

        def tell(agent_id: str, entry: _Entry, message: tuple[Any, ...]) -> None:
            try:
                self._tell_publication(agent_id, entry, message, deadline)
            except AgentNotFoundError:
                # Killed: it will never apply it, nor change its state again. Not an agent
                # close() stopped or asked to stop: its behavior may still run, and a kept
                # ctx change its state, until the writer stops; each snapshot it takes must
                # stay short of the publication, which replay applies.
                if writer is not None and entry.killed:
                    writer.publication_applied(agent_id, seq)

        try:
            for agent_id, entry in targets:
                tell(agent_id, entry, fanout.wrap(entry.shared, plain))
                told += 1
        except BaseException:
            # Interrupted (a Ctrl-C while pacing): it is durable, so replay gives it to
            # every target; the rest get it too, unpaced. The one interrupted may get it
            # twice, which changes nothing (an agent applies a publication once).
            for agent_id, entry in targets[told:]:
                tell(agent_id, entry, plain)
            raise

    def _tell_publication(
        self, agent_id: str, entry: _Entry, message: tuple[Any, ...], deadline: float
    ) -> None:
        """Deliver a durable publication: past a mailbox still full at ``deadline``, logged.

        The event is in the journal already, so replay applies it to every target; a
        live agent that missed it would differ from its own replay. Full mailboxes
        delay the publisher by ``call_timeout`` at most, all of them together; then each
        takes one message over its size.
        """
        if entry.shared.slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
            self._tell_current(agent_id, entry, message)
        else:
            self._tell_past_bound(agent_id, message, "task context publication", entry)

    def _tell_past_bound(
        self, agent_id: str, message: tuple[Any, ...], what: str, entry: _Entry | None = None
    ) -> None:
        """Tell a durable ``message`` to a full mailbox, one over its size (logged).

        Raises:
            AgentNotFoundError: the agent is gone (killed).

        """
        entry = self._entry(agent_id) if entry is None else entry
        log.warning("the mailbox of %r is full; a %s goes past its size", agent_id, what)
        entry.shared.slots.take()
        self._tell_current(agent_id, entry, message)

    def _tell_current(self, agent_id: str, entry: _Entry, message: tuple[Any, ...]) -> None:
        """Tell ``message`` (its mailbox slot taken) to ``entry``'s actor, if still ``agent_id``'s.

        A kill removes the entry, under the lock, before it stops the actor: a message
        told after that would queue behind the stop and never be handled. ``close()``
        takes every entry before it stops the actors, and not to kill them: what it
        is told meanwhile is handled, or dropped, as close() documents.

        Raises:
            AgentNotFoundError: it was killed; the slot and any fan-out place are given back.

        """
        with self._lock:
            current = (
                not entry.killed
                and not entry.stop_asked
                and (self._agents.get(agent_id) is entry or self._closed)
            )
            if current:
                try:
                    entry.ref.tell(message)
                except pykka.ActorDeadError:
                    current = False
        if not current:
            entry.shared.slots.release()
            FanOut.untold(message)
            raise AgentNotFoundError(agent_id)

    def llm(self, provider: LLMProvider | None = None, *, agent_id: str | None = None) -> JournaledLLM:
        """An LLM client that journals every refusal, output and provider failure.

        Refusals are ``PromptRejected``, outputs ``LlmOutputRecorded``, a provider's
        failures ``LlmCallFailed`` (the caller gets ``ProviderError``); the gate uses
        ``config.llm``'s limit. ``provider`` defaults to the runtime's
        (``Runtime.open(llm_provider=...)``, or one made from ``config.llm``).

        With ``agent_id``, the records go to that agent's stream, ``agent/<id>``, on its
        behalf, without a cause, whenever the client is called: the id is not checked
        against the live agents (it may name one not spawned yet, or killed; an audit
        shows such records where they fall). Without it they go to the ``runtime``
        stream. A behavior's own calls belong on ``ctx.llm``, which names the message
        being handled as their cause and journals nothing once its agent is killed.

        Raises:
            NoLLMProviderError: no provider was given and the runtime has none (also a
                ``ValueError``).
            ValueError: ``agent_id`` cannot name an agent's stream (it is empty, say).
            InvalidTextError: ``agent_id`` is neither a str nor None, or UTF-8 cannot
                encode it (also a ``TypeError``).
            TypeError: ``provider`` has no ``generate`` method.

        """
        self._check_open()
        if agent_id is not None:
            agent_id = require_str(agent_id, "agent_id")
            if not agent_id:
                msg = "agent_id must not be empty: it names the agent's stream, agent/<id>"
                raise ValueError(msg)
            agent_id = check_agent_id(agent_id, ValueError)
        chosen = self._core.llm_provider if provider is None else provider
        if chosen is None:
            msg = "no LLM provider: pass one, or open the runtime with llm_provider= or config.llm.base_url"
            raise NoLLMProviderError(msg)
        return JournaledLLM(
            chosen,
            self._core.config.llm,
            clock=self._core.clock,
            journal=self._journal_now,
            memory=self.memory,
            agent_id=agent_id,
            check_open=self._check_journaling,
        )

    def _check_journaling(self) -> None:
        self._check_open()
        self._core.check_journaling()

    def _journal_now(self, event: Event) -> None:
        self._core.persist([event])

    # ------------------------------------------------------------- messaging

    def _check_open(self) -> None:
        if self._closed:
            msg = "the runtime is closed"
            raise RuntimeClosedError(msg)

    def _check_not_stopped_outside(self, agent_id: str, entry: _Entry | None = None) -> None:
        """Raise ``RuntimeClosedError`` if the actor of ``agent_id`` (``entry``) died though never killed.

        For a call that found the agent's actor dead: neither its kill nor ``close()``
        stopped it, so the host application did (``pykka.ActorRegistry.stop_all()``), and
        the agent is not gone from the journal, as ``AgentNotFoundError`` would say.
        """
        if entry is None:
            entry = self._agents.get(agent_id)
        if entry is not None and not entry.killed and not entry.stop_asked and not self._closed:
            msg = f"agent {agent_id!r}'s actor {STOPPED_FROM_OUTSIDE}"
            raise RuntimeClosedError(msg)

    def _entry(self, agent_id: str) -> _Entry:
        self._check_open()
        try:
            entry = self._agents.get(agent_id)  # a dict read is atomic; writers hold the lock
        except TypeError:  # unhashable: "unhashable type" would not say what was wrong
            entry = None
        if entry is None:  # only on a miss, off the hot path:
            # an id no agent can have is named as such, as everywhere else; a str
            # subclass (unhashable, or hashed its own way) is looked up by its text
            plain = require_str(agent_id, "agent_id")
            entry = None if plain is agent_id else self._agents.get(plain)
            if entry is None:
                raise AgentNotFoundError(plain)
        return entry

    def _incarnation(self, agent_id: str, shared: Shared) -> _Entry:
        """The registry entry of the agent whose ``Shared`` is ``shared`` (a handle's agent).

        Raises:
            AgentNotFoundError: that agent was killed, even if a new one took its id.
            RuntimeClosedError: the runtime is closed.

        """
        entry = self._entry(agent_id)
        if entry.shared is not shared:
            raise AgentNotFoundError(agent_id)
        return entry

    def _has_behavior(self, agent_id: str) -> bool:
        with self._lock:
            entry = self._agents.get(agent_id)
        return entry is not None and entry.shared.has_behavior

    def _admit(self, agent_id: str, entry: _Entry, timeout: float | None = None) -> None:
        """Take a mailbox slot, waiting ``timeout`` (default ``call_timeout``) at most.

        Not at all from the agent's own behavior (a send or broadcast to itself): only
        that behavior, which would be waiting, could make room.
        """
        own = entry.shared.thread is threading.current_thread()
        wait = 0.0 if own else self._core.call_timeout if timeout is None else timeout
        if not entry.shared.slots.acquire(timeout=wait):
            self._check_open()  # closed while the sender waited
            if self._agents.get(agent_id) is not entry:
                raise AgentNotFoundError(agent_id)  # killed while the sender waited
            msg = (
                f"the mailbox of {agent_id!r} stayed full for {wait:g} s: it holds runtime.mailbox_size "
                f"({self._core.mailbox_size}) messages and the agent handles them slower than they come; "
                "send fewer, raise runtime.mailbox_size, or wait longer (a request's timeout, "
                "runtime.call_timeout)"
            )
            if own:
                msg = f"the mailbox of {agent_id!r} is full, and only its behavior (the sender) empties it"
            raise MailboxFullError(msg)

    def _admit_control(self, agent_id: str, entry: _Entry) -> None:
        """Take a mailbox slot for a lifecycle call: past the bound, within its allowance."""
        wait = self._core.call_timeout
        if not entry.shared.slots.acquire_control(timeout=wait):
            self._check_open()  # closed while the caller waited
            if self._agents.get(agent_id) is not entry:
                raise AgentNotFoundError(agent_id)  # killed while the caller waited
            msg = (
                f"the mailbox of {agent_id!r} held {MailboxSlots.CONTROL_EXTRA} lifecycle calls "
                f"(calls that timed out, made again) for {wait:g} s"
            )
            raise MailboxFullError(msg)

    def _admitted(self, agent_id: str, timeout: float | None = None) -> _Entry:
        """The live agent's entry, with a mailbox slot taken for one message.

        Raises:
            RuntimeClosedError: its actor was stopped from outside the runtime (which a
                memory-only runtime, with no journal writer to refuse the message first,
                would otherwise tell as ``AgentNotRegisteredError``, or a send's dead letter).

        """
        entry = self._entry(agent_id)
        if not entry.ref.is_alive():
            self._check_not_stopped_outside(agent_id, entry)
        self._admit(agent_id, entry, timeout)
        return entry

    def _tell(
        self,
        agent_id: str,
        message: tuple[Any, ...],
        timeout: float | None = None,
        fanout: FanOut | None = None,
    ) -> None:
        entry = self._entry(agent_id)
        if fanout is not None:
            message = fanout.wrap(entry.shared, message)
        try:
            self._admit(agent_id, entry, timeout)
        except BaseException:
            FanOut.untold(message)
            raise
        if fanout is not None and self._agents.get(agent_id) is not entry:
            # Killed since: its actor would drop a message queued behind its stop, and the
            # fan-out would wait for its place. Not checked under the lock, as
            # _tell_current does: every agent a fan-out wakes would queue for it.
            entry.shared.slots.release()
            FanOut.untold(message)
            raise AgentNotFoundError(agent_id)
        try:
            entry.ref.tell(message)
        except pykka.ActorDeadError as exc:
            entry.shared.slots.release()
            FanOut.untold(message)
            raise AgentNotFoundError(agent_id) from exc

    def _ask(
        self,
        agent_id: str,
        name: str,
        *args: object,
        incarnation: Shared | None = None,
    ) -> Any:  # noqa: ANN401 - the operation's result
        """Run operation ``name`` on the agent's actor; ``incarnation``: only on that one.

        A handle passes its agent's ``Shared``: once that agent is killed, a new agent
        spawned with the same id is not the one the handle was given. A lifecycle
        operation (``LIFECYCLE_CALLS``) takes its mailbox slot past the bound rather than
        wait for room: a kill must reach an agent whose mailbox its own busy behavior
        keeps full. A caller that timed out may call again, so a mailbox holds
        ``CONTROL_EXTRA`` lifecycle calls at most (``MailboxSlots.acquire_control``);
        past that the next one waits for one of them to be handled. A read (``READS``) of
        an agent idle with an empty mailbox is answered on this thread (``read_now``).
        """
        if incarnation is None:  # a lifecycle call or the bus: the id as given, named by its text
            agent_id = require_str(agent_id, "agent_id")
            entry = self._entry(agent_id)
        else:  # a handle: its agent's own id
            entry = self._incarnation(agent_id, incarnation)
        self._refuse_waiting_for_itself(agent_id, entry, name, agent_of_thread(self._core))
        if name in READS and (answer := entry.shared.read_now(name, *args)) is not ASK:
            return answer  # idle, its mailbox empty: what the actor would answer now
        # From the slot taken to the call asked, a Ctrl-C is held (on the main thread only:
        # elsewhere no signal lands), then raised: the call goes on in the agent.
        held = get_ident() == _interrupt.main_ident and _interrupt.enter()
        try:
            if name in LIFECYCLE_CALLS:
                self._admit_control(agent_id, entry)
            else:
                self._admit(agent_id, entry)
            # asked while still its id's, before a kill's stop (not lost behind it)
            future = self._ask_current(agent_id, entry, (CALL, name, args), control=name in LIFECYCLE_CALLS)
        finally:
            if held:
                _interrupt.release(held)
        try:
            result = future.get(timeout=self._core.call_timeout)
        except pykka.Timeout as exc:
            found = self._core.bus._waiting_for(agent_id)  # noqa: SLF001 - blocked in a request: on whom
            waits = f" (its behavior was waiting for {found[0]})" if found is not None else ""
            msg = (
                f"agent {agent_id!r} did not answer {name} within {self._core.call_timeout} s{waits}; "
                "the call stays in its mailbox and takes effect (or is refused) when the agent gets to it"
            )
            raise ActorTimeoutError(msg) from exc
        except pykka.ActorDeadError as exc:
            self._check_open()  # stopped by close(), not killed
            self._check_not_stopped_outside(agent_id, entry)
            raise AgentNotFoundError(agent_id) from exc
        return result

    def _refuse_waiting_for_itself(self, agent_id: str, entry: _Entry, name: str, caller: str | None) -> None:
        """Raise ``AgentRunningError`` if asking ``agent_id`` from this thread would wait for itself.

        ``caller``: the agent whose behavior runs on this thread (``agent_of_thread``), if any.
        """
        if entry.shared.thread is threading.current_thread():
            # its own behavior: the ask would queue behind the message it is handling
            detail = (
                f"its own behavior called {name} on it through the runtime or a handle, which would "
                "wait for itself: use ctx for its own state, and lifecycle calls from elsewhere"
            )
            raise AgentRunningError(agent_id, detail)
        if caller is not None and (chain := self.bus.waits_for(agent_id, caller)) is not None:
            # its behavior waits, itself or through others, for the reply of the behavior
            # calling: the ask would queue behind that wait until call_timeout
            circle = " -> ".join(map(repr, chain))
            detail = (
                f"the behavior of {caller!r} called {name} on it while it waits for that "
                f"behavior's reply ({circle}), which would wait for itself"
            )
            raise AgentRunningError(agent_id, detail)

    # ------------------------------------------------------------- closing

    def backup(self, dest: str | PathLike[str], *, compact: bool = True) -> int:
        """Copy this runtime's journal, consistently, to ``dest``, a new journal directory.

        The journal's ``backup`` (``LmdbJournal.backup``) from this process, which holds
        the journal open (another ``Journal.open`` of its path here is refused): LMDB's
        copy of one read transaction, taken while the agents go on changing state. It
        holds every change committed when it began, so in batch durability call
        ``flush()`` first for everything handed over until then (from a behavior,
        ``flush()`` covers its own agent's changes only). A commit that must grow the
        journal's map meanwhile waits for the copy's end, and so do the agents waiting
        for it (in sync durability, each change). Not verified: check it with
        ``cogfabric verify DEST`` (and the key, for a keyed journal).

        Returns:
            The last seq the backup holds.

        Raises:
            NoJournalError: the runtime has no journal (``path=None``).
            RuntimeClosedError: the runtime is closed (also by another thread's ``close()``,
                which waits for a backup under way to end).
            FileExistsError: ``dest`` exists and is not an empty directory.
            JournalUnavailableError: ``dest`` cannot be written (its parent missing or not
                writable, no room left, a mount point): nothing is left under ``dest``.
            JournalDamagedError: LMDB could not read a page of the journal.
            TypeError: ``compact`` is not a bool.
            ValueError: ``dest`` is empty.

        """
        self._check_open()
        journal = self._journal
        if journal is None:
            raise NoJournalError
        try:
            return journal.backup(dest, compact=compact)
        except JournalClosedError as exc:
            msg = "the runtime is closed"
            raise RuntimeClosedError(msg) from exc

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every change handed over so far is durable (batch durability).

        Every agent with mail waiting or a message in hand is asked to hand over what
        the messages already in its mailbox led to (an idle agent handed its changes
        over when it finished its last message, and is not woken; one killed meanwhile
        is not waited for); all of them together get ``timeout`` seconds (default, and
        for 0 or less, ``call_timeout``). Then the
        journal gets as long to commit everything handed over, also when an agent was
        too busy to answer: what it handed over before is made durable all the same. Then
        what a call that timed out left to finish is finished (a spawn registers its
        agents, a publication reaches its agents; a message whose send timed out, stored
        meanwhile, reaches its recipient, which is asked in turn to hand over what it
        leads to), and each agent that stopped waiting
        for a commit takes the journal's word for its state, each within as long again,
        so that every read shows what the journal holds. Called from a
        behavior, it hands over that agent's own changes and waits for the journal, not
        for other agents (two agents flushing at once would each wait for the other);
        ``ctx.flush()`` does the same, also from a worker thread the behavior waits for
        (from which this one would wait for that busy agent, and time out). It does
        not wait for the messages those messages send in turn: ``settle()`` does.

        Raises:
            RuntimeClosedError: the runtime is closed.
            MailboxFullError: an agent's mailbox stayed full, so it could not be asked to
                hand over its changes (the others' changes are made durable first).
            ActorTimeoutError: an agent was still busy after ``timeout`` (say, in a long
                LLM call; the message names it, and everything handed over is durable),
                or the journal did not commit in time (the outcome is unknown).
            JournalError: the journal failed (fail-stop); in batch durability every agent
                first drops what it applied that the journal does not hold (within
                ``timeout``: a busy one does so before its next message), so lifecycle,
                ``agents()`` and every read agree with the journal.
            TypeError: ``timeout`` is not a number.

        """
        self._check_open()
        wait = self._core.call_timeout if timeout is None else bounded_wait(timeout, self._core.call_timeout)
        with _interrupt.HELD:  # but in its waits, each through _interrupt.wait
            self._flush(wait)

    def _flush(self, wait: float) -> None:
        own = self._own_entry()
        problem: Exception | None = None
        told_late = self._told_late
        if own is not None:
            own.shared.flush_outbox()
        else:
            problem = self._hand_over_all(time.monotonic() + wait)
        if self._core.writer is not None:
            try:
                self._core.writer.flush(wait)
                if own is None and problem is None:  # a busy agent's error comes first
                    self._await_late(time.monotonic() + wait)
                    self._await_catch_ups(time.monotonic() + wait)
                    if self._told_late != told_late:
                        # A message whose send timed out was stored meanwhile and reached
                        # its agent after it was asked: what it leads to is handed over too.
                        problem = self._hand_over_all(time.monotonic() + wait)
                        self._core.writer.flush(wait)
            except JournalError:
                if own is None and self._core.writer.failure is not None:
                    # Fail-stop: in batch durability agents may show changes the journal
                    # refused. Each takes the journal's word before this raises, so
                    # lifecycle, agents() and every read agree with the journal from now.
                    self._await_reloads(time.monotonic() + wait)
                    self._core.writer.failure_reported()  # close() need not raise it again
                raise
        if problem is not None:
            raise problem

    def settle(self, timeout: float | None = None) -> None:
        """Wait until the agents are quiet: no message waits or is handled, and it is all durable.

        Returns once no agent has a message waiting in its mailbox or in hand (no
        behavior runs), counting what those messages lead to: a send, broadcast,
        request or publication made while a message is handled takes its place in its
        recipient's mailbox before that message counts as done, so a chain of messages
        is in flight from its first to its last. Then, as ``flush()`` does, everything
        handed over is made durable (batch durability too; without a journal there is
        nothing to commit) and what calls that timed out left to finish is finished;
        if that delivered more (a send whose commit had timed out, stored meanwhile),
        it waits for that too. So when it returns, every read, an export of the journal,
        ``backup`` and ``dead_letters()`` show the end of what was sent.

        A message is done once handled, or refused: dead-lettered because its agent was
        suspended or retired when it reached it (a message to a suspended agent is not
        held for its resume), has no behavior, or was killed before it got to it (what
        its mailbox held behind the kill is dead-lettered, or dropped once its actor
        stopped), and also when its behavior raised (the failure is journaled and the
        agent restarted before it counts as done). A
        behavior waiting for a reply is running: its message is done when the reply
        comes, or the request times out. A request made from outside the agents counts
        until its recipient handled it, not until its requester has the reply. Messages
        other threads send meanwhile count too: a driver that keeps sending keeps it
        waiting, as do agents that keep messaging each other (until ``timeout``). Only
        messages count: a thread a behavior left running with its ``ctx`` is not waited
        for, nor what it sends later.

        ``timeout`` is real seconds, as every wait of the runtime (the clock's
        ``monotonic()`` is not read); None (the default), and 0 or less, mean
        ``call_timeout``, one past ``MAX_WAIT`` (1e9 s) that long.

        Raises:
            SettleTimeoutError: messages were still in flight after ``timeout`` (it says
                how many, and which agents hold them; also when a mailbox other threads
                keep full could not be asked to hand over), or the journal did not commit
                what they handed over in time; an ``ActorTimeoutError``. Nothing is
                cancelled.
            AgentRunningError: called from a behavior (its own message is in flight
                until it returns, so it would wait for itself; from a worker thread a
                behavior waits for, it would time out instead, not known as the agent's).
            RuntimeClosedError: the runtime is closed, also by a ``close()`` while it waits.
            JournalError: the journal failed (fail-stop), as ``flush()`` raises it.
            TypeError: ``timeout`` is not a number.

        """
        self._check_open()
        wait = self._core.call_timeout if timeout is None else bounded_wait(timeout, self._core.call_timeout)
        me = agent_of_thread(self._core)
        if me is not None:
            detail = (
                "its own behavior called settle(), which would wait for itself: its message is in flight "
                "until the behavior returns"
            )
            raise AgentRunningError(me, detail)
        with _interrupt.HELD:  # but in its waits, each through _interrupt.wait
            self._settle(wait)

    def _settle(self, wait: float) -> None:
        deadline = time.monotonic() + wait
        flight = self._in_flight
        while True:
            if not flight.wait_for_zero(deadline, lambda: self._closed):
                raise self._still_in_flight(wait)
            self._check_open()
            try:
                # tiny, not 0: flush() reads 0 or less as call_timeout
                self.flush(max(deadline - time.monotonic(), 1e-3))
            except (ActorTimeoutError, MailboxFullError) as exc:
                # the journal's commit, an agent a late message woke, or a mailbox another
                # thread filled since the count was zero (flush could not ask that agent)
                if not flight.count:
                    raise SettleTimeoutError(0, (), wait, str(exc)) from exc
                raise self._still_in_flight(wait) from exc
            if not flight.count:
                return

    def _still_in_flight(self, wait: float) -> SettleTimeoutError:
        """``settle``'s timeout: how many messages are in flight, and the agents holding them."""
        count = self._in_flight.count
        busy = tuple(
            agent_id
            for agent_id, entry in list(self._agents.items())
            if entry is not None and (entry.shared.busy or not entry.shared.slots.empty)
        )
        return SettleTimeoutError(count, busy, wait)

    def _reload_all(self) -> None:
        """The journal went fail-stop: have every live agent take its word (on the writer's thread).

        Each agent reloads its state from the journal before its next message
        (``AgentActor._dispatch``), and this no-op is that message, past the bound (once:
        fail-stop lasts). Asked, not told: what the reload raises (a spawn the journal
        refused is no agent) goes to the discarded answer, not to Pykka, which would stop
        the actor. A killed agent it reloads leaves the registry.
        """
        self._noops(past_bound=True)

    def _await_reloads(self, deadline: float) -> None:
        """Wait (until ``deadline``) for every live agent to have taken the journal's word."""
        for _, future in self._noops(past_bound=False):
            with contextlib.suppress(Exception):
                _interrupt.get(future, max(0.0, deadline - time.monotonic()))

    def _await_late(self, deadline: float) -> None:
        """Wait (until ``deadline``) for the calls whose callers timed out to be finished.

        The writer is past their commits, so each helper thread (``_finish_late``) has
        its answer: a spawn it registers, a publication it delivers.

        Raises:
            ActorTimeoutError: one was not finished by ``deadline``.

        """
        for finished, thread in list(self._late.items()):
            if thread is threading.current_thread():
                continue
            if not finished.wait(max(0.0, deadline - time.monotonic())):
                what = thread.name.removeprefix("cogfabric-late-")
                msg = f"a {what} whose caller timed out was not finished in time"
                raise ActorTimeoutError(msg)

    def _await_catch_ups(self, deadline: float) -> None:
        """Wait (until ``deadline``) for the agents that stopped waiting for a commit to catch up.

        Each takes the journal's word for its state, now that the writer is past that
        commit: until then its lifecycle and the bus's topic index may not show what the
        journal holds.

        Raises:
            ActorTimeoutError: an agent was still busy at ``deadline`` (the message names it).

        """
        for agent_id, future in self._noops(past_bound=True, stale_only=True):
            try:
                _interrupt.get(future, max(0.0, deadline - time.monotonic()))
            except pykka.Timeout as exc:
                msg = f"agent {agent_id!r} did not take the journal's word for a timed-out change in time"
                raise ActorTimeoutError(msg) from exc
            except Exception:  # noqa: BLE001, S110 - what the reload raises (or a killed agent) is not flush's
                pass

    def _noops(self, *, past_bound: bool, stale_only: bool = False) -> list[tuple[str, pykka.Future[Any]]]:
        """Ask every live agent a no-op; ``past_bound``: also one whose mailbox is full.

        ``stale_only``: only the agents that stopped waiting for a commit (``Shared.stale``).
        Each is asked while still its id's (``_ask_current``), also on the writer's thread
        (``_reload_all``: every holder of the runtime's lock only queues, it never waits for
        the writer): one killed meanwhile is left out, not waited for behind its stop.
        """
        # no _lock needed: list() copies the registry's items in one C call, atomically
        entries = [
            (agent_id, e)
            for agent_id, e in list(self._agents.items())
            if e is not None and (e.shared.stale or not stale_only)
        ]
        asked = []
        message = (CALL, "noop", ())
        for agent_id, entry in entries:
            slots = entry.shared.slots
            with _interrupt.HELD:  # the slot taken goes with the message asked
                if past_bound:
                    slots.take()
                elif not slots.acquire(timeout=0):
                    continue  # mail waits: it takes the journal's word before handling it
                try:
                    asked.append((agent_id, self._ask_current(agent_id, entry, message)))
                except (AgentNotFoundError, RuntimeClosedError):
                    continue  # killed, or stopped by close(): its slot is given back
        return asked

    def _hand_over_all(self, deadline: float) -> Exception | None:
        """Ask every agent that may hold changes to hand them over; the error for those that did not.

        An idle agent (no mail waiting, no message in hand) handed over what its last
        message changed when it finished it, so it is not asked (not woken). The others
        with room in their mailbox are asked first, without waiting; then those whose
        mailbox was full get what is left of the deadline to make room. Each is asked
        while still its id's (``_ask_current``): one whose kill's stop is queued is left
        out, not waited for behind the stop.
        """
        with _interrupt.HELD, self._lock:  # a Ctrl-C as the lock is let go would keep it
            entries = [(agent_id, e) for agent_id, e in self._agents.items() if e is not None]
        asked: list[tuple[str, pykka.Future[Any]]] = []
        full: list[tuple[str, _Entry]] = []
        message = (CALL, "noop", ())
        for agent_id, entry in entries:
            shared = entry.shared
            # mailbox first: the actor marks itself busy before its mailbox looks empty
            if shared.slots.empty and not shared.busy:
                continue  # idle: nothing to hand over (and the others are awake: no FanOut)
            try:
                with _interrupt.HELD:  # the slot taken goes with the message asked
                    self._admit(agent_id, entry, 0.0)
                    # under the runtime's lock, before a kill's stop (not lost behind it)
                    asked.append((agent_id, self._ask_current(agent_id, entry, message)))
            except AgentNotFoundError:
                continue  # killed meanwhile
            except MailboxFullError:
                full.append((agent_id, entry))
        still_full: list[str] = []
        for agent_id, entry in full:
            try:
                with _interrupt.HELD:  # not while it waits for room (_admit's wait)
                    self._admit(agent_id, entry, max(0.0, deadline - time.monotonic()))
                    asked.append((agent_id, self._ask_current(agent_id, entry, message)))
            except AgentNotFoundError:
                continue
            except MailboxFullError:
                still_full.append(agent_id)
        busy: list[str] = []
        for agent_id, future in asked:
            try:
                _interrupt.get(future, max(0.0, deadline - time.monotonic()))
            except pykka.Timeout:
                busy.append(agent_id)
            except (pykka.ActorDeadError, AgentNotFoundError):
                continue  # killed meanwhile: what it handed over is in the writer's queue
        if still_full:
            others = f"; still busy: {_named(busy)}" if busy else ""
            msg = f"flush: the mailbox of {_named(still_full)} stayed full, so it was not asked{others}"
            return MailboxFullError(msg)
        if busy:
            msg = (
                f"flush: {_named(busy)} still busy after the flush's timeout; everything handed over "
                "before is durable, what their current messages change is not yet"
            )
            return ActorTimeoutError(msg)
        return None

    def _own_entry(self) -> _Entry | None:
        """The agent whose actor runs on this thread (a behavior calling in), if any."""
        me = threading.current_thread()
        return next((e for e in list(self._agents.values()) if e is not None and e.shared.thread is me), None)

    def _stop_ref(self, ref: pykka.ActorRef[AgentActor], agent_id: str) -> None:
        """Stop one actor: asked, then waited for (a Ctrl-C stops the wait, the stop is asked)."""
        try:
            _interrupt.get(ref.stop(block=False), self._core.call_timeout)
        except (pykka.ActorDeadError, pykka.Timeout):
            log.warning("runtime %r: the actor of agent %r did not stop in time", self._core.name, agent_id)

    def close(self) -> None:
        """Flush, stop every actor and close the journal; idempotent.

        The agents get ``call_timeout``, all together, to handle what is in their
        mailboxes, with the runtime closed to everything but their own state: a
        behavior's send, broadcast, request or session call raises
        ``RuntimeClosedError``, and a message whose behavior stops on it leaves a
        ``closed`` dead letter after the changes it made. What is left after that is
        dropped. It returns once the threads of the actors it stopped (and of the
        agents killed before) have ended (an agent still busy in its behavior is left
        to it: its thread runs on until the behavior returns).

        A runtime still open when the interpreter exits is closed then (its actors run
        on daemon threads, which would not keep the process alive, nor be waited for).
        Called from one of its agents' behaviors, it returns at once and closes the
        runtime on a helper thread: closed to other calls at once, its journal closed once
        that behavior has returned and its changes are handed over (``call_timeout`` at
        most). A second caller waits for the first (``5 * call_timeout`` at most), unless
        it is an agent's thread, which that close() may be waiting for.

        A Ctrl-C that interrupts it leaves the runtime closed all the same, every actor
        asked to stop without waiting (in batch durability, what the agents had not handed
        over to the writer is lost); a ``close()`` after it waits for the journal writer to
        commit what it holds and close the journal, as this one would have.

        Raises:
            JournalError: in batch durability, the journal failed (fail-stop) and no
                ``flush()`` (nor an earlier ``close()``) has raised that failure: changes
                applied since the last commit may not be stored (everything is closed all
                the same). Also after a change's own call raised it: in batch durability
                other changes, handed over without a caller waiting, may be lost with it.
                Called from an agent's behavior, close() logs it instead, and the
                program's own ``close()`` (which waits for that one) raises it.
            ActorTimeoutError: the journal writer made no progress for ``call_timeout``
                (it closes the journal itself once its commits are done).

        """
        # Its bookkeeping is held against a Ctrl-C (raised once it is through, or as it
        # waits: for another close(), for the agents, the session actor, the writer).
        try:
            with _interrupt.HELD:
                if not self._closed_by_a_behavior():
                    self._close_held()
        finally:
            if self._put_back:  # the last runtime to close: the SIGINT handler open replaced
                self._put_back = False
                _interrupt.put_back()

    def _close_held(self) -> None:
        """``close()`` on any thread but a behavior's, a Ctrl-C held but in its waits."""
        with self._lock:
            closing = self._closed
            self._closed = self._core.closing = True
            # (a second caller finds no agents left: it adds none)
            self._stopping += [(agent_id, e) for agent_id, e in self._agents.items() if e is not None]
            entries = [e for e in self._agents.values() if e is not None]
            self._agents.clear()
            killed, self._killed = self._killed, []
        self._in_flight.wake()  # a settle() under way raises RuntimeClosedError now
        if closing:
            # Another thread closes it: return once that is over, unless this is one of
            # its agents' threads, which that close() waits to stop.
            if not on_agent_thread():
                self._close_after_another()
            return
        failures: list[Exception] = []
        done = False
        self._interrupted = True  # until this close() is through (a Ctrl-C can land anywhere)
        try:  # from here on, whatever interrupts it (a Ctrl-C), the finally below closes
            for entry in entries:
                entry.shared.slots.close()  # a sender waiting for room gets RuntimeClosedError now
            self._stop_agents(entries)  # a Ctrl-C in its waits: every agent is asked to stop all the same
            self._core.stopped = True  # an agent still busy drops the rest of its mailbox
            failures = self._stop_the_rest()
            self._join_stopped_threads(entries + killed)
            done = True
        finally:
            try:
                if not done:
                    self._cut_short()
                writer = self._core.writer
                if writer is not None and not self._writer_stopped:
                    # The writer is still committing (its stop timed out, or a Ctrl-C came):
                    # closing the journal under it would lose what it holds. It closes the
                    # journal itself once it stops.
                    writer.stop_soon()
                    if not writer.close_journal_when_stopped():
                        log.error(
                            "runtime %r: close(): the journal writer is still committing; it closes "
                            "the journal (%s) once it is done",
                            self._core.name,
                            getattr(writer.journal, "path", "its journal"),
                        )
                elif self._journal is not None:
                    _close_journal(self._journal)  # synced and unlocked even if a stop above failed
                self._interrupted = not done
            finally:
                with _SPAWNING_LOCK, self._lock:  # one step, while open: a claim sees them here or there
                    _prune_given_up()
                    _GIVEN_UP.extend(
                        (a, e.behavior, e.ref.actor_stopped)
                        for a, e in self._stopping
                        if e.behavior is not None and not e.ref.actor_stopped.is_set()
                    )
                    self._stopping = []
                _OPEN.discard(self)  # only now: a close() at exit waits for this one
                self._close_done.set()
                if self._sigint:
                    self._sigint = False
                    self._put_back = _interrupt.uninstall()
        if failures:
            raise failures[0]
        if threading.current_thread() is not self._closer:
            self._raise_unreported()

    def _close_after_another(self) -> None:
        """A ``close()`` while another thread's is under way: wait for it, then finish what it left.

        Raises:
            ActorTimeoutError: the journal writer made no progress for ``call_timeout``.
            JournalError: as ``close()``.

        """
        if not self._close_done.wait(5 * self._core.call_timeout):
            log.warning("runtime %r: close() waited for another thread's close() in vain", self._core.name)
            return
        if self._interrupted:
            self._finish_interrupted()
        if threading.current_thread() is not self._closer:
            self._raise_unreported()  # the close() an agent began raised nothing

    def _cut_short(self) -> None:
        """A ``close()`` interrupted (a Ctrl-C): ask what it had yet to stop (a later one waits for it)."""
        self._core.stopped = True  # an agent still busy drops the rest of its mailbox
        self.memory._close_soon()  # noqa: SLF001 - the runtime's own part

    def _finish_interrupted(self) -> None:
        """A ``close()`` after one a Ctrl-C interrupted: wait for the writer and the session actor to end.

        The interrupted one asked them to stop without waiting, or was interrupted again
        before it asked (a second Ctrl-C): each is asked again. The writer closes the
        journal once it has committed what it holds (at once if it has stopped), so that
        the path can be opened again once this returns.

        Raises:
            ActorTimeoutError: the journal writer made no progress for ``call_timeout``.

        """
        self._cut_short()
        writer = self._core.writer
        if writer is not None:
            writer.close_journal_when_stopped()
            writer.stop()
        elif self._journal is not None:
            _close_journal(self._journal)
        thread = self.memory.actor_thread
        if thread is not None and thread is not threading.current_thread():
            _interrupt.join(thread, self._core.call_timeout)

    def _closed_by_a_behavior(self) -> bool:
        """Whether ``close()``, called from one of this runtime's agents' behaviors, returns at once.

        The first such call starts the closer thread (``_close_for_agent``); a later one,
        before it ran, has nothing to do. One closer only: a second one's end would take
        itself for a program's ``close()`` and raise the journal's failure into a log,
        which the program's own ``close()`` would then miss.
        """
        closer = None
        with self._lock:
            own = not self._closed and self._own_entry() is not None
            if own and self._closer is None:
                self._closer = closer = threading.Thread(
                    target=self._close_for_agent,
                    name=thread_name(_CLOSE_THREAD, self._core.name),
                    daemon=True,
                )
        if not own:
            return False
        if closer is None:
            return True  # a close() begun by a behavior is under way already
        try:
            closer.start()
        except RuntimeError:  # no new threads at interpreter shutdown (Python 3.12.0-3.12.2)
            return False  # close here: _stop_agents does not wait for this agent's own actor
        return True

    def _raise_unreported(self) -> None:
        """Batch durability: raise the journal's failure unless flush() or close() raised it.

        The journal failed under changes applied already, which it does not hold: close()
        flushes, and says so as that flush() would.
        """
        writer = self._core.writer
        if writer is None or self._core.sync:
            return
        failure = writer.failure_unreported
        if isinstance(failure, Exception):
            writer.failure_reported()
            copied = error_copy(failure)
            raise copied if isinstance(copied, Exception) else failure

    def _close_for_agent(self) -> None:
        """``close()`` on the thread an agent's behavior began it on: a failure is logged.

        The journal's failure is left to the program's own ``close()`` (or ``flush()``),
        which raises it; this thread has no caller to raise it to.
        """
        try:
            self.close()
        except Exception:
            log.exception("close(), begun by an agent's behavior, failed")

    def _join_stopped_threads(self, entries: list[_Entry]) -> None:
        """Wait for the threads of the agents that stopped to end, ``call_timeout`` at most in all.

        Pykka acknowledges a stop from inside the actor's loop, and its thread then
        empties the inbox and ends: without this wait, a ``threading.enumerate()`` just
        after ``close()`` could still list it. A thread whose actor did not stop (its
        behavior still busy) is not waited for: it runs on until the behavior returns.
        ``entries`` holds the agents killed before too, whose stop was acknowledged alike.
        The session actor's and the writer's threads are waited for as they stop.
        """
        me = threading.current_thread()
        deadline = time.monotonic() + self._core.call_timeout
        for entry in entries:
            thread = entry.shared.thread
            if thread is not None and thread is not me and entry.ref.actor_stopped.is_set():
                _interrupt.join(thread, max(0.0, deadline - time.monotonic()))

    def _stop_the_rest(self) -> list[Exception]:
        """Fail the requests no agent answered, stop the session actor, then the writer.

        Each step runs whatever the one before did: above all, the writer commits what
        it was handed before the journal closes. Returns what failed.
        """
        steps = [self.bus._close, self.memory._close]  # noqa: SLF001 - the runtime's own parts
        if self._core.writer is not None:
            steps.append(self._core.writer.stop)
        failures: list[Exception] = []
        for step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - close() raises it once every step ran
                log.warning(
                    "runtime %r: close(): %s failed: %r",
                    self._core.name,
                    getattr(step, "__qualname__", step),
                    exc,
                )
                failures.append(exc)
            else:
                if self._core.writer is not None and step == self._core.writer.stop:
                    self._writer_stopped = True
        return failures

    def _stop_agents(self, entries: list[_Entry]) -> None:
        """Stop every agent actor; all together wait ``call_timeout`` at most.

        At most ``_STOP_WINDOW`` are asked and not yet stopped at a time. When the oldest
        of them has not stopped within ``_STOP_PATIENCE``, those of the window not yet
        stopped (busy in their behavior, most likely) are waited for last, so they do not
        hold up the others. Whatever interrupts it, every agent is asked to stop.
        """
        deadline = time.monotonic() + self._core.call_timeout

        def stopped(future: pykka.Future[bool], until: float) -> bool:
            try:  # a dead actor's future gives False: it stopped before
                _interrupt.get(future, max(0.0, until - time.monotonic()))
            except pykka.Timeout:
                return False
            return True

        me = threading.current_thread()
        window: collections.deque[tuple[_Entry, pykka.Future[bool]]] = collections.deque()
        busy: list[tuple[_Entry, pykka.Future[bool]]] = []
        asked = 0
        try:
            for entry in entries:
                future = self._ask_to_stop(entry)
                asked += 1
                if entry.shared.thread is me:
                    continue  # close() called from this agent's behavior: it stops once it returns
                window.append((entry, future))
                if len(window) < _STOP_WINDOW:
                    continue
                if stopped(window[0][1], min(deadline, time.monotonic() + _STOP_PATIENCE)):
                    window.popleft()
                else:
                    busy += (pair for pair in window if not pair[0].ref.actor_stopped.is_set())
                    window.clear()
        except BaseException:
            for entry in entries[asked:]:
                self._ask_to_stop(entry)  # no agent is left running once close() gave up on it
            raise
        # those asked last get a moment even when the deadline passed while they were asked
        until = max(deadline, time.monotonic() + _STOP_PATIENCE)
        late = [entry for entry, future in itertools.chain(window, busy) if not stopped(future, until)]
        if late:
            waiting = sum(max(entry.shared.slots.waiting, 0) for entry in late)
            log.warning(
                "runtime %r: %s did not stop within %s s; about %s in %s and will be dropped, not handled",
                self._core.name,
                "1 agent actor" if len(late) == 1 else f"{len(late)} agent actors",
                self._core.call_timeout,
                "1 message still waits" if waiting == 1 else f"{waiting} messages still wait",
                "its mailbox" if len(late) == 1 else "their mailboxes",
            )

    def _ask_to_stop(self, entry: _Entry) -> pykka.Future[bool]:
        """Queue the stop of ``entry``'s actor; never raises.

        Marked first, under the lock ``_tell_current`` tells under: a message is told
        before the stop (and handled), or refused (a request's requester learns it at
        once, instead of waiting its timeout for a reply that cannot come).
        """
        with self._lock:
            entry.stop_asked = True
        return entry.ref.stop(block=False)

    def stats(self) -> RuntimeStats:
        """Figures to watch a running runtime by: agents, mailboxes, dead letters, the journal.

        Cheap enough to call every second from a monitoring thread, with thousands of
        agents: it asks no agent's actor and waits for no commit. It reads what the
        runtime keeps anyway (each agent's lifecycle and mailbox count, as
        ``Agent.state`` and ``Agent.queued`` do, the bus's dead letter counts, the
        journal writer's queue and commit count, the journal's last seq, the size of
        its data file), in one pass over the live agents.
        ``RuntimeStats`` says of each field its unit, and whether it is exact or a
        snapshot that other threads move meanwhile. Without a journal, its fields are
        None.

        Raises:
            RuntimeClosedError: ``close()`` was called (as every method of a closed
                runtime); the run's last figures are to be taken before it. The bus's
                ``dead_letter_counts()`` still answers after it, the letters of requests
                the close failed included.

        """
        self._check_open()
        with self._lock:  # a copy, in C: a spawn or kill changes the dict under this lock
            entries = list(self._agents.values())
        size = self._core.mailbox_size
        states: dict[str, int] = {state.value: 0 for state in AgentState}
        live = queued = deepest = full = 0
        for entry in entries:
            if entry is None:  # an id a spawn under way reserved
                continue
            shared = entry.shared
            live += 1
            states[shared.lifecycle] = states.get(shared.lifecycle, 0) + 1
            waiting = shared.slots.waiting
            queued += waiting
            deepest = max(deepest, waiting)
            if waiting >= size:
                full += 1
        writer, journal = self._core.writer, self._journal
        backlog = backlog_max = commits = last_seq = journal_bytes = max_map = None
        commit_seconds: float | None = None
        failure: str | None = None
        if writer is not None and journal is not None:
            try:
                last_seq = journal.last_seq
            except JournalClosedError as exc:  # close() got that far since the check above
                msg = "the runtime is closed"
                raise RuntimeClosedError(msg) from exc
            backlog, backlog_max = writer.backlog, writer.backlog_max
            commits, commit_seconds = writer.commits, writer.commit_seconds
            error = writer.failure
            failure = None if error is None else f"{type(error).__name__}: {error}"
            max_map = self._core.config.journal.max_map_size
            if self._data_file is not None:
                with contextlib.suppress(OSError):  # gone from under the runtime: unknown
                    journal_bytes = self._data_file.stat().st_size
        return RuntimeStats(
            agents=live,
            idle=states[AgentState.IDLE],
            running=states[AgentState.RUNNING],
            suspended=states[AgentState.SUSPENDED],
            retired=states[AgentState.RETIRED],
            queued=queued,
            in_flight=self._in_flight.count,
            queued_max=deepest,
            mailboxes_full=full,
            dead_letters=self._bus.dead_letter_counts(),
            behavior_failures=self._core.behavior_failures,
            writer_backlog=backlog,
            writer_backlog_max=backlog_max,
            commits=commits,
            commit_seconds=commit_seconds,
            journal_last_seq=last_seq,
            journal_bytes=journal_bytes,
            journal_max_map_size=max_map,
            journal_failure=failure,
        )

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    @property
    def name(self) -> str:
        """The runtime's name (``Runtime.open(name=...)``), which every thread it starts carries."""
        return self._core.name

    def __repr__(self) -> str:
        """``<Runtime 'name' '/path/to/journal' sync, 2 agents>``, or ``... closed>``; asks no agent.

        The journal's directory as opened and its durability (no journal: ``memory``),
        and the live agents (suspended and retired ones too).
        """
        where = "memory" if self._journal is None else repr(str(getattr(self._journal, "path", "journal")))
        if self._closed:
            return f"<Runtime {self.name!r} {where} closed>"
        agents = sum(entry is not None for entry in list(self._agents.values()))
        if self._journal is not None:  # a memory-only runtime has no durability to name
            where += " sync" if self._core.sync else " batch"
        return f"<Runtime {self.name!r} {where}, {agents} agent{'' if agents == 1 else 's'}>"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _close_journal(journal: Journal) -> None:
    """Close ``journal``; a backup under way is waited for unheld, as every wait of close()."""
    journal._close(_interrupt.wait)  # noqa: SLF001 - the backends' hook for the runtime


def _check_open_arguments(
    verify: object, allow_unverified: object, behaviors: object, llm_provider: object
) -> None:
    """``Runtime.open``'s argument checks, before anything is opened."""
    if verify not in ("full", "tail"):
        msg = f"verify must be 'full' or 'tail', not {reprlib.repr(verify)}"
        raise ValueError(msg)
    if not isinstance(allow_unverified, bool):  # "false" would waive verification
        shown = reprlib.repr(allow_unverified)  # bounded, and safe from a failing __repr__
        msg = f"allow_unverified is a bool, got {type(allow_unverified).__name__} {shown}"
        raise TypeError(msg)
    if behaviors is not None and not isinstance(behaviors, Mapping):
        msg = f"behaviors maps names to behavior factories, got {type(behaviors).__name__}"
        raise TypeError(msg)
    for name, factory in (behaviors or {}).items():
        # the name is journaled with every agent that runs it: another type would be
        # written, and then refuse to decode on every reopen
        require_str(name, "a behavior's name")
        if not callable(factory):
            what = type(factory).__name__
            msg = f"behaviors maps names to behavior factories: {name!r} maps to a {what}, not callable"
            raise TypeError(msg)
    if llm_provider is not None and not callable(getattr(llm_provider, "generate", None)):
        msg = f"llm_provider has a generate(prompt, **params) method, got {type(llm_provider).__name__}"
        raise TypeError(msg)


def _default_name(directory: str) -> str:
    """A runtime's name from its journal directory's name: printable, at most ``_MAX_NAME`` characters.

    A directory's name may be 255 bytes long; each of the runtime's threads carries its name.
    """
    name = printable(directory)
    return name if len(name) <= _MAX_NAME else name[: _MAX_NAME - 1] + "\N{HORIZONTAL ELLIPSIS}"


def _checked_name(name: object) -> str:
    """``Runtime.open``'s ``name`` (a plain ``str``): a short line of printable text, safe in a log line."""
    if not isinstance(name, str):
        msg = f"name is a str, got {type(name).__name__} {reprlib.repr(name)}"
        raise TypeError(msg)
    name = str.__str__(name)  # a str subclass's text: none of its methods runs later
    if not name.strip():
        msg = f"name is a runtime's label in its threads' names, not blank: got {name!r}"
        raise ValueError(msg)
    if len(name) > _MAX_NAME:
        msg = f"name is at most {_MAX_NAME} characters, got {len(name)}"
        raise ValueError(msg)
    if not name.isprintable():  # a newline would forge a log line, an ESC sequence hide one
        msg = f"name holds a character a log line would not show as it is: {name!r}"
        raise ValueError(msg)
    return name


_SPAWN_ARGUMENTS: Final = frozenset(inspect.signature(Runtime.spawn).parameters) - {"self"}
"""The keys of a spawn spec: ``spawn``'s arguments."""
