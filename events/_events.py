"""The concrete events: every state change the runtime makes is one of these.

Replay alone rebuilds every agent and session from them: agents from the ``agent/``
streams plus ``TaskContextPublished`` on ``runtime``, sessions from ``session/``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Final, Literal, get_args

import msgspec

from ._base import BUS_STREAM, RUNTIME_STREAM, ContextLayer, Event
from ._cognitive import CognitiveState
from ._messages import Message

__all__ = [
    "EVENT_TYPES",
    "MAX_SUBSCRIPTION_ORDER",
    "AgentEvent",
    "AgentFailed",
    "AgentKilled",
    "AgentRecovered",
    "AgentSpawned",
    "AnyEvent",
    "CheckpointTaken",
    "CognitiveStateSet",
    "IpcDeadLettered",
    "IpcDelivered",
    "IpcMessage",
    "IpcSubscribed",
    "IpcUnsubscribed",
    "LifecycleChanged",
    "LlmCallFailed",
    "LlmOutputRecorded",
    "PrivateSet",
    "PromptRejected",
    "SessionCreated",
    "SessionDeleted",
    "SessionEvent",
    "SessionEvicted",
    "SessionExpired",
    "SessionMessageAdded",
    "SessionTouched",
    "TaskContextPublished",
    "TaskContextSet",
]

MAX_SUBSCRIPTION_ORDER: Final = 2**62
"""The largest ``IpcSubscribed.order`` a journal holds (a record past it does not decode)."""


class AgentEvent(Event, frozen=True, kw_only=True):
    """An event on one agent's stream, ``agent/<agent>``."""

    agent: str

    @property
    def stream(self) -> str:
        """``agent/<agent>``."""
        return "agent/" + self.agent


class AgentSpawned(AgentEvent, frozen=True, kw_only=True):
    """An agent was spawned with its task layer and initial cognitive state."""

    task_id: str | None = None
    parent: str | None = None
    capabilities: tuple[str, ...] = ()
    priority: float = 0.0
    task_context: dict[str, Any] = {}
    cognitive: CognitiveState = CognitiveState()
    behavior: str | None = None

    layer: ClassVar[ContextLayer | None] = ContextLayer.TASK_SHARED
    layers: ClassVar[frozenset[ContextLayer]] = frozenset(
        {ContextLayer.TASK_SHARED, ContextLayer.AGENT_PRIVATE}
    )


Lifecycle = Literal["IDLE", "RUNNING", "SUSPENDED", "RETIRED"]
"""The values of ``AgentState``: a record naming another is refused when it is read."""


class LifecycleChanged(AgentEvent, frozen=True, kw_only=True):
    """An agent moved between IDLE, SUSPENDED and RETIRED."""

    state: Lifecycle
    previous: Lifecycle


class AgentKilled(AgentEvent, frozen=True, kw_only=True):
    """An agent was killed; the death snapshot outlives it (spec §2.3 Kill)."""

    cognitive: CognitiveState = CognitiveState()
    capabilities: tuple[str, ...] = ()
    parent: str | None = None

    layers: ClassVar[frozenset[ContextLayer]] = frozenset({ContextLayer.AGENT_PRIVATE})


class AgentRecovered(AgentEvent, frozen=True, kw_only=True):
    """An agent's cognitive state was replaced by ``recover`` and it became IDLE."""

    cognitive: CognitiveState
    has_checkpoint: bool = False

    layer: ClassVar[ContextLayer | None] = ContextLayer.AGENT_PRIVATE


class AgentFailed(AgentEvent, frozen=True, kw_only=True):
    """An agent's behavior raised on the message ``cause`` names; the agent was restarted from the journal.

    A reply its behavior returned that cannot be encoded counts as raising. A journal
    append that fails writes none: the journal is fail-stop then, and the agent drops
    what it does not hold.
    """

    error: str
    detail: str = ""


class TaskContextSet(AgentEvent, frozen=True, kw_only=True):
    """One agent's task layer was replaced."""

    context: dict[str, Any]

    layer: ClassVar[ContextLayer | None] = ContextLayer.TASK_SHARED


class TaskContextPublished(Event, frozen=True, kw_only=True):
    """The task layer of every listed agent of a task was replaced, as one fact."""

    task_id: str
    context: dict[str, Any]
    agents: tuple[str, ...] = ()

    layer: ClassVar[ContextLayer | None] = ContextLayer.TASK_SHARED

    @property
    def stream(self) -> str:
        """``runtime``."""
        return RUNTIME_STREAM


class PrivateSet(AgentEvent, frozen=True, kw_only=True):
    """One key of an agent's private layer was set."""

    key: str
    value: Any = None

    layer: ClassVar[ContextLayer | None] = ContextLayer.AGENT_PRIVATE


class CognitiveStateSet(AgentEvent, frozen=True, kw_only=True):
    """An agent's cognitive state was replaced."""

    state: CognitiveState

    layer: ClassVar[ContextLayer | None] = ContextLayer.AGENT_PRIVATE


class CheckpointTaken(AgentEvent, frozen=True, kw_only=True):
    """A copy of an agent's cognitive state was taken as a checkpoint."""

    state: CognitiveState

    layer: ClassVar[ContextLayer | None] = ContextLayer.AGENT_PRIVATE


class IpcSubscribed(AgentEvent, frozen=True, kw_only=True):
    """An agent subscribed to a broadcast topic.

    Version 2 added ``order``, the runtime's count of subscriptions when this one was
    made: a topic lists its subscribers in that order, after a reopen too. A version-1
    record reads as order 0, before every later subscription. An order is at most
    2**62 (``MAX_SUBSCRIPTION_ORDER``): no runtime counts that far, and the ones after
    it must still fit the journal's 64-bit integers.
    """

    topic: str
    order: Annotated[int, msgspec.Meta(ge=0, le=MAX_SUBSCRIPTION_ORDER)] = 0
    v: Annotated[int, msgspec.Meta(ge=2, le=2)] = 2

    layer: ClassVar[ContextLayer | None] = ContextLayer.IPC


def _subscribed_v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "order": 0}


class IpcUnsubscribed(AgentEvent, frozen=True, kw_only=True):
    """An agent unsubscribed from a broadcast topic."""

    topic: str

    layer: ClassVar[ContextLayer | None] = ContextLayer.IPC


class _BusEvent(Event, frozen=True, kw_only=True):
    layer: ClassVar[ContextLayer | None] = ContextLayer.IPC

    @property
    def stream(self) -> str:
        """``bus``."""
        return BUS_STREAM


class IpcMessage(_BusEvent, frozen=True, kw_only=True):
    """An IPC message as sent; its event ``id`` is the message id.

    ``recipient`` is empty for a broadcast as journaled (and as ``broadcast`` builds
    it); the copy each subscriber's behavior gets, and a dead letter of it, names that
    subscriber instead, so a behavior tells a broadcast by ``kind``. ``correlation_id``
    links a request and its reply; ``cause`` names the message this one answers.
    """

    sender: str
    recipient: str
    topic: str
    payload: Any = None
    correlation_id: str = ""
    trace_id: str = ""
    kind: str = "send"
    """``send``, ``request``, ``reply`` or ``broadcast``."""


class IpcDelivered(_BusEvent, frozen=True, kw_only=True):
    """An IPC message reached its recipient's behavior (or was turned away by it).

    Noted as the agent starts on the message and committed with its first change or at
    the message's end: a crash while the behavior runs can leave one for a message whose
    handling never finished.
    """

    message_id: str
    recipient: str


class IpcDeadLettered(_BusEvent, frozen=True, kw_only=True):
    """An IPC message could not be delivered or handled.

    It carries the message's ``payload`` and ``trace_id`` as the original's dead
    letters do, for diagnosis and redelivery: a message refused before it was
    journaled (an unknown recipient, a full mailbox) is kept by its dead letter alone.
    Records written before these fields existed read them as None and "".
    """

    message_id: str
    sender: str
    recipient: str
    topic: str
    reason: str
    error: str = ""
    payload: Any = None
    trace_id: str = ""


class SessionEvent(Event, frozen=True, kw_only=True):
    """An event on one session's stream, ``session/<session>``."""

    session: str

    @property
    def stream(self) -> str:
        """``session/<session>``."""
        return "session/" + self.session


class SessionCreated(SessionEvent, frozen=True, kw_only=True):
    """A session was created, with its seed message."""

    user_id: str
    agent_id: str | None = None
    seed: Message | None = None


class SessionMessageAdded(SessionEvent, frozen=True, kw_only=True):
    """A message was added to a session."""

    message: Message


class SessionTouched(SessionEvent, frozen=True, kw_only=True):
    """A session was read; journaled coarsely to restore last-access times."""


class SessionDeleted(SessionEvent, frozen=True, kw_only=True):
    """A session was deleted."""


class SessionExpired(SessionEvent, frozen=True, kw_only=True):
    """A session was removed because its TTL passed."""


class SessionEvicted(SessionEvent, frozen=True, kw_only=True):
    """A session was evicted as least recently used to make room for a new one."""


class _AgentOrRuntimeEvent(Event, frozen=True, kw_only=True):
    """An event on an agent's stream, or on ``runtime`` when it has no agent."""

    agent: str | None

    @property
    def stream(self) -> str:
        """The agent's stream, or ``runtime`` for a client without an agent."""
        return RUNTIME_STREAM if self.agent is None else "agent/" + self.agent


class PromptRejected(_AgentOrRuntimeEvent, frozen=True, kw_only=True):
    """The prompt gate refused a prompt before any provider was called.

    Version 2 added ``session``; a version-1 record without one reads as None.
    """

    length: int
    limit: int
    reason: str = "too_long"
    session: str | None = None
    """The session whose turn's prompt window was refused (None for any other refusal)."""
    v: Annotated[int, msgspec.Meta(ge=2, le=2)] = 2


def _rejected_v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    # a version-1 record may name its session already (written for a while before the bump)
    return {"session": None, **raw}


class _LlmCallEvent(_AgentOrRuntimeEvent, frozen=True, kw_only=True):
    """A provider's call on a prompt the gate let through (the prompt kept as its hash only)."""

    provider: str
    model: str
    prompt_hash: str


class LlmOutputRecorded(_LlmCallEvent, frozen=True, kw_only=True):
    """A provider's output, journaled so an audit replays without calling a model."""

    output: str
    session: str | None = None


class LlmCallFailed(_LlmCallEvent, frozen=True, kw_only=True):
    """A provider failed on a prompt the gate let through (the caller got ``ProviderError``)."""

    error: str
    """The ``ProviderError``'s message, which names the provider's own error (cut to 1,000 characters)."""
    session: str | None = None


AnyEvent = (
    AgentSpawned
    | LifecycleChanged
    | AgentKilled
    | AgentRecovered
    | AgentFailed
    | TaskContextSet
    | TaskContextPublished
    | PrivateSet
    | CognitiveStateSet
    | CheckpointTaken
    | IpcSubscribed
    | IpcUnsubscribed
    | IpcMessage
    | IpcDelivered
    | IpcDeadLettered
    | SessionCreated
    | SessionMessageAdded
    | SessionTouched
    | SessionDeleted
    | SessionExpired
    | SessionEvicted
    | PromptRejected
    | LlmOutputRecorded
    | LlmCallFailed
)

EVENT_TYPES: tuple[type[Event], ...] = get_args(AnyEvent)
"""Every concrete event type, in the order of the ``AnyEvent`` union."""


BUILTIN_UPCASTERS: Final[Mapping[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]]] = {
    ("IpcSubscribed", 1): _subscribed_v1_to_v2,
    ("PromptRejected", 1): _rejected_v1_to_v2,
}
"""The upcasters of the built-in event types, by (type name, from version): every codec
that holds one of those types starts with them."""
