"""``Agent``: a caller's handle on one agent; every call goes through the agent's actor."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from ._state import AgentState

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cogfabric.events import CognitiveState

    from ._agent import Shared
    from ._runtime import Runtime
    from ._state import AgentSnapshot

__all__ = ["Agent", "ContextView"]


class ContextView:
    """A read-only snapshot of an agent's task and private layers, side by side.

    IPC is not part of it (as in the original): the view exists to check that private
    values never leak into the task layer. Its two mappings are read-only; the values in
    them are the view's own deep copies, so changing one changes that view alone. Equality
    is Python's (``1``, ``1.0`` and ``True`` are equal, a NaN is not equal to itself):
    compare ``msgspec.msgpack.encode(dict(view.private))`` for type-exact equality.
    """

    __slots__ = ("_private", "_task_shared")

    def __init__(self, task_shared: dict[str, Any], private: dict[str, Any]) -> None:
        self._task_shared = types.MappingProxyType(task_shared)
        self._private = types.MappingProxyType(private)

    @property
    def task_shared(self) -> Mapping[str, Any]:
        """The task layer, as it was when the view was taken."""
        return self._task_shared

    @property
    def private(self) -> Mapping[str, Any]:
        """The private layer, as it was when the view was taken."""
        return self._private

    def __eq__(self, other: object) -> bool:
        """Views are equal when both layers hold equal values (say, before and after a reopen)."""
        if not isinstance(other, ContextView):
            return NotImplemented
        return self._task_shared == other._task_shared and self._private == other._private

    __hash__ = None  # type: ignore[assignment]  # equal by value, and its layers are dicts

    def __repr__(self) -> str:
        return f"ContextView(task_shared={dict(self._task_shared)!r}, private={dict(self._private)!r})"


class Agent:
    """A handle on one agent. Values in and out are deep copies.

    Every method is a call into the agent's actor, in its mailbox order (a read of an
    agent idle with an empty mailbox is answered on the calling thread instead, under the
    agent's lock, as the actor would answer it then: ``AgentActor.read_now``), and raises
    ``AgentNotFoundError`` once the agent it was given is gone (killed; a new agent
    spawned with its id is another one), ``RuntimeClosedError`` once the runtime is
    closed, ``MailboxFullError`` when the mailbox stays full for ``call_timeout``,
    ``ActorTimeoutError`` when the agent does not answer within it, and
    ``AgentRunningError`` when called from the agent's own behavior (use ``ctx``), or
    from the behavior of an agent whose reply it waits for. A
    state change refuses a key that is not a str with ``TypeError`` and a value
    msgspec cannot encode with ``UnencodableValueError`` (also a ``TypeError``); one the
    journal refuses raises the journal's error (a ``JournalError``).
    """

    __slots__ = (
        "_behavior",
        "_capabilities",
        "_id",
        "_parent",
        "_priority",
        "_runtime",
        "_shared",
        "_spawned_at",
        "_task_id",
    )

    def __init__(self, runtime: Runtime, state: AgentSnapshot, shared: Shared) -> None:
        self._runtime = runtime
        self._id = state.id
        self._parent = state.parent
        self._task_id = state.task_id
        self._capabilities = state.capabilities
        self._priority = state.priority
        self._behavior = state.behavior
        self._spawned_at = state.spawned_at
        self._shared = shared

    @property
    def capabilities(self) -> tuple[str, ...]:
        """What the agent was spawned able to do."""
        return self._capabilities

    @property
    def priority(self) -> float:
        """The agent's scheduling priority (default 0)."""
        return self._priority

    @property
    def id(self) -> str:
        """The agent's id."""
        return self._id

    @property
    def parent(self) -> str | None:
        """The id of the agent that spawned it (provenance, not hierarchy)."""
        return self._parent

    @property
    def spawned_at(self) -> float:
        """When the agent was spawned: the clock's wall seconds its spawn was stamped with.

        The original's ``SpawnedAt``; the same after a reopen (it is the spawn's record).
        """
        return self._spawned_at

    @property
    def task_id(self) -> str | None:
        """The task the agent works on."""
        return self._task_id

    @property
    def behavior(self) -> str | None:
        """The name of the behavior the agent was spawned with, as journaled (None: none).

        A name registered in ``behaviors``, or, for an instance of a class that is not,
        its class's module and qualified name (``"mymodule.Reviewer"``). The name, whether
        or not this runtime has a behavior of it: see ``has_behavior``.
        """
        return self._behavior

    @property
    def has_behavior(self) -> bool:
        """Whether the agent has a behavior to handle its messages.

        False for an agent spawned without one, and for one recovered with a behavior
        name the runtime was not given in ``behaviors``, or whose factory raised or made
        something without ``on_message`` (or with an ``async`` one): messages to it are
        dead-lettered ("no behavior", the letter's text saying which of these it was).
        Recovery only logs that; this is how a program finds such agents:
        ``[a for a in rt.agents() if rt.agent(a).behavior and not rt.agent(a).has_behavior]``.
        (A suspended or retired agent's messages are dead-lettered all the same: see
        ``lifecycle``.)

        Read without asking the agent's actor, as ``lifecycle``: after its behavior
        failed on a message, the restart that makes a new one may still be under way
        (the requester hears of the failure first), and this says what it made once it
        is done; ``runtime.flush()`` waits for that.

        Raises:
            AgentNotFoundError: the agent was killed (also when a new agent took its id).
            RuntimeClosedError: the runtime is closed.

        """
        self._runtime._incarnation(self._id, self._shared)  # noqa: SLF001 - the handle's own check
        return self._shared.has_behavior

    @property
    def lifecycle(self) -> AgentState:
        """IDLE, RUNNING (while its behavior handles a message), SUSPENDED or RETIRED.

        Read without asking the agent's actor, so it answers at once even while the
        behavior runs.

        Raises:
            AgentNotFoundError: the agent was killed (also when a new agent took its id).
            RuntimeClosedError: the runtime is closed.

        """
        self._runtime._incarnation(self._id, self._shared)  # noqa: SLF001 - the handle's own check
        return AgentState(self._shared.lifecycle)

    @property
    def state(self) -> AgentState:
        """The original's name (``Agent.State``) for ``lifecycle``: IDLE, RUNNING, SUSPENDED or RETIRED.

        Raises:
            AgentNotFoundError: the agent was killed (also when a new agent took its id).
            RuntimeClosedError: the runtime is closed.

        """
        return self.lifecycle

    @property
    def queued(self) -> int:
        """How many messages wait in the agent's mailbox now, not yet taken up: its backlog.

        What counts against ``runtime.mailbox_size`` (a sender waits, then gets
        ``MailboxFullError``, once it reaches that), plus the lifecycle calls and task
        context publications that go past it, and the runtime's own no-ops (a ``flush()``
        under way asks each busy agent one). A message admitted waits here from
        before its commit (sync durability) until the agent takes it up: the one its
        behavior handles is no longer counted. Read without asking the agent's
        actor, as ``lifecycle``, so it answers at once even while the behavior runs.
        A snapshot: senders and the agent move it meanwhile.

        Raises:
            AgentNotFoundError: the agent was killed (also when a new agent took its id).
            RuntimeClosedError: the runtime is closed.

        """
        self._runtime._incarnation(self._id, self._shared)  # noqa: SLF001 - the handle's own check
        return self._shared.slots.waiting

    def _call(self, name: str, *args: object) -> Any:  # noqa: ANN401 - each operation's own result
        # Bound to the agent it was given: after a kill, a new agent with the same id is
        # another agent, and this handle raises AgentNotFoundError (runtime.agent(id)
        # gives the new one).
        return self._runtime._ask(self._id, name, *args, incarnation=self._shared)  # noqa: SLF001

    def set_task_context(self, mapping: Mapping[str, Any] | None) -> None:
        """Replace the task layer with a deep copy of ``mapping`` (None means empty)."""
        self._call("set_task_context", mapping)

    def task_context(self) -> dict[str, Any]:
        """A deep copy of the task layer."""
        result: dict[str, Any] = self._call("task_context")
        return result

    def set_private(self, key: str, value: object) -> None:
        """Set a private value (a deep copy; refused with a TypeError if not encodable)."""
        self._call("set_private", key, value)

    def private(self, key: str) -> Any:  # noqa: ANN401 - stored values are any encodable value
        """A deep copy of a private value, or None when the key is missing.

        Raises:
            InvalidTextError: ``key`` is not a ``str``, or UTF-8 cannot encode it (also a
                ``TypeError``), as ``set_private``.

        """
        return self._call("private", key)

    def context_view(self) -> ContextView:
        """The task and private layers side by side, read-only."""
        task, private = self._call("context_view")
        return ContextView(task, private)

    def set_cognitive_state(self, state: CognitiveState) -> None:
        """Replace the cognitive state (version 0 becomes 1; future versions are refused).

        Raises:
            TypeError: ``state`` is not a ``CognitiveState`` (a mapping, such as a checkpoint
                read back from a layer, is pointed to ``decode_cognitive_state``).
            CognitiveStateSchemaVersionError: ``state`` is of a future schema version, or
                its version is no int (then also a ``TypeError``).

        """
        self._call("set_cognitive_state", state)

    def cognitive_state(self) -> CognitiveState:
        """A deep copy of the cognitive state."""
        result: CognitiveState = self._call("cognitive_state")
        return result

    def checkpoint_cognitive(self) -> CognitiveState:
        """Journal a checkpoint and return a copy of the cognitive state.

        In sync durability the checkpoint is durable when this returns; in batch
        durability, as any change, once flushed (``runtime.flush()``): a crash before that
        loses it, and ``last_checkpoint`` then finds an earlier one (or None).
        """
        result: CognitiveState = self._call("checkpoint_cognitive")
        return result

    def __repr__(self) -> str:
        return f"<Agent {self._id!r} {self._shared.lifecycle}>"

    def __eq__(self, other: object) -> bool:
        """Handles are equal when they reach the same agent: same runtime, id and incarnation."""
        return (
            isinstance(other, Agent)
            and other._id == self._id
            and other._runtime is self._runtime
            and other._shared is self._shared
        )

    def __hash__(self) -> int:
        return hash(self._id)
