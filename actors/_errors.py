"""Errors of the actor runtime; messages start with the original's strings (spec §2.1, §3.1)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cogfabric._errors import CogfabricError

__all__ = [
    "ActorError",
    "ActorTimeoutError",
    "AgentCapacityError",
    "AgentCheckpointNotSupportedError",
    "AgentExistsError",
    "AgentNotFoundError",
    "AgentNotRegisteredError",
    "AgentNotSuspendedError",
    "AgentRetiredError",
    "AgentRunningError",
    "InvalidConfigError",
    "InvalidSpawnSpecError",
    "IpcError",
    "IpcHandlerError",
    "IpcInvalidMessageError",
    "IpcTimeoutError",
    "MailboxFullError",
    "RuntimeCapacityError",
    "RuntimeClosedError",
    "SessionNotFoundError",
    "SettleTimeoutError",
    "UserCodeError",
]


def _thread_limits() -> str:
    """The limits set on this process that bound its threads, for a capacity error's message.

    A thread that cannot start says nothing of why (Python's ``RuntimeError`` carries no
    errno): in a container the cause is most often a limit of the process, which is named
    here when set. ``ulimit -u`` counts every thread of the user (root is exempt, but not
    the root of a user namespace, a rootless container's; named when below Linux's
    default, half of ``kernel.threads-max``);
    ``ulimit -v`` bounds the address space, which each thread's stack, glibc's malloc
    arena of each thread (64 MiB each, up to eight per core) and each open journal's map
    take part of. Empty when neither is set (or off Unix); never raises, as it runs
    inside an error's constructor.
    """
    try:
        return _limits_set()
    except (ImportError, OSError, ValueError, AttributeError):  # not Unix, no such limit, or unreadable
        return ""


def _limits_set() -> str:
    import resource  # noqa: PLC0415 - Unix only, and read only when a thread failed

    notes = []
    tasks = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    if tasks != resource.RLIM_INFINITY and not _exempt_root() and tasks < _default_tasks():
        notes.append(f"ulimit -u is {tasks:,} (threads and processes of its user, all counted)")
    space = resource.getrlimit(resource.RLIMIT_AS)[0]
    if space != resource.RLIM_INFINITY:
        stack = threading.stack_size() or _glibc_stack()
        each = f" ({stack:,} bytes)" if stack else ""
        arenas = ", glibc's malloc arena of each thread (64 MiB each, up to eight per core)"
        arenas = arenas if _glibc() else ""
        notes.append(
            f"ulimit -v is {space:,} bytes of address space, which each thread's stack{each}{arenas}, "
            "and each open journal's map (its map_size), take part of: lower threading.stack_size() "
            f"or map_size{', set MALLOC_ARENA_MAX=2' if arenas else ''}, or raise it"
        )
    return "; this process's limits: " + "; ".join(notes) if notes else ""


def _glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):  # musl, macOS: no such name
        return False


def _glibc_stack() -> int:
    """A thread's stack when ``threading.stack_size()`` is 0: glibc's is ``ulimit -s``, unless unlimited.

    0 where not known: glibc's own default (unlimited), or another libc's (musl's, macOS's).
    glibc reads ``ulimit -s`` as the process starts, not as it changes later.
    """
    import resource  # noqa: PLC0415 - Unix only, and read only when a thread failed

    stack = resource.getrlimit(resource.RLIMIT_STACK)[0]
    return stack if _glibc() and stack != resource.RLIM_INFINITY else 0


def _exempt_root() -> bool:
    """Whether Linux exempts this process from ``ulimit -u``: root, but not a user namespace's root."""
    if 0 not in (os.getuid(), os.geteuid()):
        return False
    try:
        mapped = Path("/proc/self/uid_map").read_bytes().split()
    except OSError:  # no user namespaces: not Linux
        return True
    return mapped[:2] == [b"0", b"0"]  # root here is root of the host (a rootless container's is not)


def _default_tasks() -> float:
    """Linux's own ``ulimit -u``, half of ``kernel.threads-max``: a limit below it was set on purpose."""
    try:
        return int(Path("/proc/sys/kernel/threads-max").read_bytes()) // 2
    except (OSError, ValueError):
        return float("inf")


class ActorError(CogfabricError):
    """Base class of the errors raised by ``cogfabric.actors``."""


class ActorTimeoutError(ActorError, TimeoutError):
    """Raised when a call to an actor got no answer within its timeout (wraps ``pykka.Timeout``).

    The call may still take effect later: Pykka does not cancel it. Also the built-in
    ``TimeoutError``, which since Python 3.11 is ``concurrent.futures.TimeoutError``: a
    caller waiting on a future that runs a runtime call cannot tell the future's timeout
    from this one by the exception's class (``concurrent.futures.wait`` can).
    """


_NAMED = 5
"""Agents a ``SettleTimeoutError`` names before it counts the rest."""


class SettleTimeoutError(ActorTimeoutError):
    """Raised by ``Runtime.settle`` when messages were still in flight at its timeout.

    ``in_flight`` is how many messages the agents still held then (waiting in their
    mailboxes, or in hand), ``busy`` the ids of the agents holding them (the first
    five; the message counts the rest). Zero messages and no agents when what was left
    was the journal's commit of what they handed over (``__cause__`` is the
    ``ActorTimeoutError`` of that wait). Also an ``ActorTimeoutError``, and so the built-in
    ``TimeoutError``. Nothing is cancelled: the messages are handled all the same.
    """

    def __init__(self, in_flight: int, busy: tuple[str, ...], after: float, detail: str = "") -> None:
        """Say how many messages, held by which agents, were still in flight ``after`` seconds."""
        self.in_flight = in_flight
        self.busy = busy
        shown = ", ".join(map(repr, busy[:_NAMED]))
        if busy[_NAMED:]:
            shown += f" and {len(busy) - _NAMED:,} more"
        plural = "" if in_flight == 1 else "s"
        msg = f"settle: {in_flight:,} message{plural} still in flight after {after:g} s"
        if busy:
            msg += f" (held by {shown})"
        if detail:
            msg += f"; {detail}"
        super().__init__(msg)


class RuntimeClosedError(ActorError):
    """Raised when a closed runtime, or a handle of one, is used.

    Also when its actors were stopped from outside it (``STOPPED_FROM_OUTSIDE``).
    """


STOPPED_FROM_OUTSIDE = (
    "was stopped from outside the runtime, by pykka.ActorRegistry.stop_all() (which Pykka also "
    "calls when an actor raises a BaseException) or its ActorRef's stop(): close the runtime "
    "(Runtime.close()) before stopping every Pykka actor; what was journaled is kept, and "
    "reopening the runtime brings its agents back"
)
"""What a call says once one of a runtime's actors was stopped by something other than the runtime."""


class AgentNotFoundError(ActorError, LookupError):
    """Raised when no live agent has the given id (never spawned, or killed)."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"agentfabric: agent not found: {agent_id!r}")
        self.agent_id = agent_id


class AgentExistsError(ActorError):
    """Raised when spawning an agent whose id is taken."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"agentfabric: agent already exists: {agent_id!r}")
        self.agent_id = agent_id


class AgentRetiredError(ActorError):
    """Raised when suspending, resuming or recovering a retired agent."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"agentfabric: agent retired: {agent_id!r}")
        self.agent_id = agent_id


class AgentNotSuspendedError(ActorError):
    """Raised when resuming an agent that is not suspended."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(f"agentfabric: agent not suspended: {agent_id!r}")
        self.agent_id = agent_id


class AgentRunningError(ActorError):
    """Raised when retiring or recovering an agent while its behavior handles a message.

    Also when an agent's own behavior calls the runtime, or a handle, for an operation
    on that same agent, or the behavior of an agent it waits for (itself or through
    others) for a reply does (either would wait for itself); ``detail`` then says so.
    """

    def __init__(self, agent_id: str, detail: str = "") -> None:
        super().__init__(f"agentfabric: agent running: {agent_id!r}" + (f" ({detail})" if detail else ""))
        self.agent_id = agent_id


class InvalidSpawnSpecError(ActorError, ValueError):
    """Raised when a spawn's id contains white space, or its behavior is unknown."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"agentfabric: invalid spawn spec: {detail}")


class SpawnSpecTypeError(InvalidSpawnSpecError, TypeError):
    """A spawn argument of the wrong type (a capability or task id that is not a str, say).

    Both an ``InvalidSpawnSpecError`` and a ``TypeError``, as a wrong type is elsewhere.
    """


class AgentCapacityError(ActorError, RuntimeError):
    """The process could not start a thread for an agent (each agent runs on its own thread).

    Raised by ``spawn`` and ``spawn_many`` (nothing of the spawn is journaled, and no
    agent of it runs) and by ``Runtime.open`` (no agent runs; the journal holds nothing
    new but the expiry of sessions that expired while it was closed, which every open
    journals first). Also a ``RuntimeError``, what ``threading`` raises for it. The
    message names this process's ``ulimit -v``, when set (and, with glibc, what
    ``MALLOC_ARENA_MAX`` bounds), and its ``ulimit -u``, when below Linux's default and
    not the host's root: in a container these are the likely bounds.
    """

    def __init__(self, agent_id: str, running: int) -> None:
        """Name the agent and how many threads the process ran."""
        self.agent_id = agent_id
        self.running = running
        super().__init__(
            f"agentfabric: cannot start a thread for agent {agent_id!r}: the process runs "
            f"{running:,} threads and can start no more (on Linux, each thread takes memory "
            "mappings, which vm.max_map_count bounds; raise it, or ulimit -u, or run fewer "
            f"agents in one process){_thread_limits()}"
        )


class RuntimeCapacityError(ActorError, RuntimeError):
    """The process could not start a thread the runtime itself runs (``Runtime.open``), or one for a call.

    The journal writer's, the session actor's or the session ticker's (on a real
    clock): nothing of the open runs, and the
    actor whose thread did not start is not left registered with Pykka. A call's own:
    a retriever's worker (``build_context``: the call fails), an HTTP exchange of
    ``OpenAICompatibleProvider`` (``generate``; through ``ctx.llm``, its
    ``ProviderError``'s cause). ``thread`` names which, ``running`` how many threads the
    process ran, ``runtime`` the runtime's name (``Runtime.name``; None for a provider's
    exchange, which serves no one runtime). Also a ``RuntimeError``, what ``threading``
    raises for it. The message names the limits as ``AgentCapacityError``'s does.
    """

    def __init__(self, thread: str, running: int, runtime: str | None = None) -> None:
        """Name the runtime's thread, how many threads the process ran, and the runtime."""
        self.thread = thread
        self.running = running
        self.runtime = runtime
        of = "" if runtime is None else f" of runtime {runtime!r}"
        super().__init__(
            f"cannot start the thread of the {thread}{of}: the process runs {running:,} threads and "
            "can start no more (on Linux, each thread takes memory mappings, which "
            "vm.max_map_count bounds; raise it, or ulimit -u, or close runtimes this process "
            f"keeps open){_thread_limits()}"
        )


class MailboxFullError(ActorError):
    """Raised when an agent's mailbox stayed full for ``call_timeout`` seconds.

    Not raised for a slow agent whose mailbox has room: that is ``ActorTimeoutError``.
    From the bus (a send or request refused), ``message_id`` names the refused message,
    whose ``mailbox full`` dead letter holds it (``cogfabric trace JOURNAL --id
    MESSAGE_ID``), and ``correlation_id`` a request's correlation id; both are None for
    a handle's call.
    """

    message_id: str | None = None
    correlation_id: str | None = None


class IpcError(ActorError):
    """Base class of the IPC bus's errors.

    A request's failure (``IpcTimeoutError``, ``IpcHandlerError``, ``IpcNoHandlerError``,
    and ``AgentNotRegisteredError`` once the request was sent: its recipient's kill
    refused it) names the request: ``message_id`` is its ``IpcMessage``'s id, which its
    record and its dead letter, if any, carry (``cogfabric trace JOURNAL --id
    MESSAGE_ID`` shows what became of it), and ``correlation_id`` its correlation id.
    Both are None on other errors, also an ``AgentNotRegisteredError`` that refused the
    request before it was journaled (its recipient was gone already): no record holds it.
    """

    message_id: str | None = None
    correlation_id: str | None = None


class AgentNotRegisteredError(AgentNotFoundError, IpcError):
    """Raised by the bus for a recipient that is no live agent (``agentipc: agent not registered``).

    The original's IPC error for an unknown target; also an ``AgentNotFoundError``, the
    runtime's, so either catches it. One dead letter is journaled for it.
    """

    def __init__(self, agent_id: str) -> None:
        ActorError.__init__(self, f"agentipc: agent not registered: {agent_id!r}")
        self.agent_id = agent_id


class IpcTimeoutError(IpcError, TimeoutError):
    """Raised when a request got no reply within its timeout (``agentipc: request timed out``)."""


class IpcHandlerError(IpcError):
    """Raised to a requester when the recipient's behavior raised; ``__cause__`` is the error."""


class IpcNoHandlerError(IpcTimeoutError):
    """Raised at once to a requester whose recipient cannot handle the request.

    ``agentipc: no handler``: the recipient has no behavior, or is suspended or retired;
    the request is dead-lettered (journaled) instead of waiting out its timeout. It is
    an ``IpcTimeoutError``, what the request would have ended in, so code that handles
    a request's timeout handles it too, without the wait.
    """


class IpcInvalidMessageError(IpcError, ValueError):
    """Raised for an empty correlation id, topic or agent id (``agentipc: invalid message``).

    ``reply`` refuses an empty correlation id and ``subscribe`` an empty topic; ``send``
    and ``request`` take any topic, as the original does. An empty agent id given to
    ``subscribe`` or ``unsubscribe`` gives the original's ``Register`` text,
    ``agentipc: agent id required``.
    """


class InvalidConfigError(ActorError, ValueError):
    """Raised when a configuration value is out of range; the message names the field and value."""


class ClockError(ActorError, ValueError):
    """Raised when the runtime's clock gives a wall time the journal cannot store.

    ``now()`` must return a finite real number of seconds; anything else (a
    ``datetime``, a string, None, NaN, a number past a float's range) is refused
    before it reaches an event, so that no journaled time stops a replay. ``output``
    is None but from a ``turn`` (or ``continue_turn``) whose clock failed as its
    provider answered and was still down when the answer would go into the session:
    then it is that answer, which the journal holds (``LlmOutputRecorded``, at the time
    the call was made) and the session does not.
    """

    output: str | None = None


class SessionNotFoundError(ActorError, LookupError):
    """Raised for a session that does not exist, was deleted, expired or evicted (``session not found``).

    ``reason`` says which, where the runtime can tell: ``"expired"``, ``"deleted"`` or
    ``"evicted"`` (read from the session's last record, or for the latest sessions that
    ended, from memory: a runtime without a journal tells those only), None for an id it
    never had (and for one that ended before the latest 4,096 while the journal has not
    committed its ending yet: batch durability, or a reopen's expiries). ``output`` is
    None but from a ``turn`` (or ``continue_turn``) whose session ended (expired, was
    deleted or evicted) while its provider answered: then it is that answer, which the
    journal holds (``LlmOutputRecorded``, naming the session) and the session does not.
    """

    output: str | None = None

    def __init__(self, session_id: str, reason: str | None = None) -> None:
        super().__init__(f"session not found: {session_id!r}")
        self.session_id = session_id
        self.reason = reason


class AgentCheckpointNotSupportedError(ActorError):
    """Raised by ``get_latest_session_for_agent`` on a runtime opened without a journal.

    Also by ``Runtime.last_checkpoint`` and ``ctx.last_checkpoint``, which read the journal.
    Once the runtime is closed, each raises ``RuntimeClosedError`` instead, as with a journal.
    """

    def __init__(self) -> None:
        super().__init__("agent checkpoint lookup not supported by this memory backend")


class NoJournalError(ActorError):
    """Raised by ``Runtime.backup`` on a runtime opened without a journal (``path=None``)."""

    def __init__(self) -> None:
        super().__init__("this runtime has no journal (it was opened with path=None): nothing to back up")


class UserCodeError(ActorError):
    """Raised in place of a non-``Exception`` ``BaseException`` the user's code raised on an actor thread.

    An ``asyncio.CancelledError``, a ``KeyboardInterrupt`` or a ``SystemExit`` raised by
    a value's own methods or a clock while an agent or the session actor runs them.
    Pykka stops every actor of the process on such an exception; the runtime turns it
    into this error for the one call it broke (a behavior's reply that cannot be copied
    fails its request with ``IpcHandlerError`` instead). ``__cause__`` is the original.
    """
