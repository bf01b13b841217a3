"""Pykka actors: agents, the journal writer and the IPC bus, behind the ``Runtime`` facade."""

from __future__ import annotations

from ._agent import AgentContext, Behavior
from ._bus import IpcBus
from ._clock import Clock, FakeClock, SystemClock
from ._config import Config, JournalConfig, RuntimeConfig
from ._core import replay_agent
from ._errors import (
    ActorError,
    ActorTimeoutError,
    AgentExistsError,
    AgentNotFoundError,
    AgentNotSuspendedError,
    AgentRetiredError,
    AgentRunningError,
    InvalidSpawnSpecError,
    IpcError,
    IpcHandlerError,
    IpcInvalidMessageError,
    IpcTimeoutError,
    MailboxFullError,
    RuntimeClosedError,
)
from ._handle import Agent, ContextView
from ._runtime import Runtime
from ._state import AgentSnapshot, AgentState
from ._writer import JournalWriter

__all__ = [
    "ActorError",
    "ActorTimeoutError",
    "Agent",
    "AgentContext",
    "AgentExistsError",
    "AgentNotFoundError",
    "AgentNotSuspendedError",
    "AgentRetiredError",
    "AgentRunningError",
    "AgentSnapshot",
    "AgentState",
    "Behavior",
    "Clock",
    "Config",
    "ContextView",
    "FakeClock",
    "InvalidSpawnSpecError",
    "IpcBus",
    "IpcError",
    "IpcHandlerError",
    "IpcInvalidMessageError",
    "IpcTimeoutError",
    "JournalConfig",
    "JournalWriter",
    "MailboxFullError",
    "Runtime",
    "RuntimeClosedError",
    "RuntimeConfig",
    "SystemClock",
    "replay_agent",
]
