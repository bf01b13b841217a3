"""An agent's state and the one fold that both the live actor and replay apply.

Because the live agent changes its state only by applying the events it journals,
with this same function, replay rebuilds exactly what the live runtime had.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from cogfabric.events import (
    AgentEvent,
    AgentKilled,
    AgentRecovered,
    AgentSpawned,
    CognitiveState,
    CognitiveStateSet,
    Event,
    IpcSubscribed,
    IpcUnsubscribed,
    LifecycleChanged,
    PrivateSet,
    TaskContextPublished,
    TaskContextSet,
)

__all__ = ["AgentSnapshot", "AgentState", "apply_event", "decode_snapshot", "encode_snapshot"]


class AgentState(enum.StrEnum):
    """An agent's lifecycle state (spec §2.1)."""

    IDLE = "IDLE"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    RETIRED = "RETIRED"


class AgentSnapshot(msgspec.Struct, kw_only=True):
    """Everything the journal knows of one live agent.

    Mutable, and owned by the agent's actor; never handed out (reads return copies).
    ``task_context`` is replaced, never changed in place, so it may be shared with
    the event that set it.
    """

    id: str
    task_id: str | None = None
    parent: str | None = None
    capabilities: tuple[str, ...] = ()
    priority: float = 0.0
    lifecycle: str = AgentState.IDLE
    task_context: dict[str, Any] = {}
    private: dict[str, Any] = {}
    cognitive: CognitiveState = CognitiveState()
    behavior: str | None = None
    topics: list[str] = []
    topic_orders: dict[str, int] = {}
    """Each topic's subscription order (``IpcSubscribed.order``): where the agent stands
    among the topic's subscribers. Absent from a snapshot of an older version: order 0."""
    spawned_at: float = 0.0
    publish_seq: int = 0
    """The seq of the last task context published to this agent that it handled."""
    events: int = 0
    """How many events of its stream this state has applied, its spawn included."""
    snapshot_events: int = 0
    """``events`` when the agent's latest snapshot was taken (0: none yet), so a snapshot
    comes every ``snapshot_interval`` of its events, counted across a reopen too."""

    def __post_init__(self) -> None:
        """Read an empty parent as none, a root agent, as a spawn takes it now.

        So it reads from a journal whose spawns, and snapshots, stored it as it was.
        """
        if self.parent == "":
            self.parent = None


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AgentSnapshot)


def encode_snapshot(state: AgentSnapshot) -> bytes:
    """Encode an agent's state for the journal's snapshot store."""
    return _encoder.encode(state)


def decode_snapshot(data: bytes) -> AgentSnapshot:
    """Decode what ``encode_snapshot`` wrote.

    A lifecycle of RUNNING (which no writer stores: it is the time a behavior handles
    a message) is read as IDLE, as ``apply_event`` reads it.
    """
    state = _decoder.decode(data)
    if state.lifecycle == AgentState.RUNNING:
        state.lifecycle = AgentState.IDLE
    return state


def apply_event(state: AgentSnapshot | None, event: Event) -> AgentSnapshot | None:  # noqa: PLR0912 - one branch per event type
    """Return the agent's state after ``event``; None once the agent is killed.

    Events of no agent leave ``state`` as it is. The event is not checked to be this
    agent's: the callers give only the agent's own stream, and only the publications
    that list it (``replay_agent``, ``Core.load_agent``).
    """
    if type(event) is PrivateSet and state is not None:  # the most common by far: no match chain
        state.events += 1
        state.private[event.key] = event.value
        return state
    match event:
        case AgentSpawned():
            return AgentSnapshot(
                id=event.agent,
                task_id=event.task_id,
                parent=event.parent,
                capabilities=event.capabilities,
                priority=event.priority,
                task_context=event.task_context,
                cognitive=event.cognitive,
                behavior=event.behavior,
                spawned_at=event.at,
                events=1,
            )
        case TaskContextPublished() if state is not None:
            state.task_context = event.context
            return state
        case _ if state is None or not isinstance(event, AgentEvent):
            return state
    state.events += 1
    match event:
        case PrivateSet():
            state.private[event.key] = event.value
        case TaskContextSet():
            state.task_context = event.context
        case CognitiveStateSet():
            state.cognitive = event.state
        case LifecycleChanged():
            # RUNNING is only the time a behavior handles a message, and never journaled:
            # a record of it (written by hand) is read as IDLE, or the agent recovered from
            # it would refuse every lifecycle call as running, for good.
            state.lifecycle = AgentState.IDLE if event.state == AgentState.RUNNING else event.state
        case AgentRecovered():
            state.cognitive = event.cognitive
            state.lifecycle = AgentState.IDLE
        case IpcSubscribed() if event.topic not in state.topics:
            state.topics.append(event.topic)
            state.topic_orders[event.topic] = event.order
        case IpcUnsubscribed() if event.topic in state.topics:
            state.topics.remove(event.topic)
            state.topic_orders.pop(event.topic, None)
        case AgentKilled():
            return None
        case _:
            pass  # checkpoints, failures: journaled facts that change no state
    return state
