"""Pykka actors: agents, the journal writer and the IPC bus, behind the ``Runtime`` facade."""

from __future__ import annotations

from ._agent import AgentContext, Behavior
from ._bus import IpcBus
from ._cleaner import CleanOptions
from ._clock import Clock, FakeClock, SystemClock
from ._config import Config, JournalConfig, RuntimeConfig
from ._core import replay_agent, snapshot_problem
from ._errors import (
    ActorError,
    ActorTimeoutError,
    AgentCapacityError,
    AgentCheckpointNotSupportedError,
    AgentExistsError,
    AgentNotFoundError,
    AgentNotRegisteredError,
    AgentNotSuspendedError,
    AgentRetiredError,
    AgentRunningError,
    ClockError,
    InvalidConfigError,
    InvalidSpawnSpecError,
    IpcError,
    IpcHandlerError,
    IpcInvalidMessageError,
    IpcNoHandlerError,
    IpcTimeoutError,
    MailboxFullError,
    NoJournalError,
    RuntimeClosedError,
    SessionNotFoundError,
    SpawnSpecTypeError,
    UserCodeError,
)
from ._handle import Agent, ContextView
from ._llm import (
    DEFAULT_MAX_PROMPT_LENGTH,
    InvalidArgumentError,
    JournaledLLM,
    LLMClient,
    LLMConfig,
    LLMProvider,
    NoLLMProviderError,
    OpenAICompatibleProvider,
    PromptTooLongError,
    ProviderError,
    ScriptedProvider,
    render_messages,
)
from ._memory import MemoryManager, Retriever, SessionData, SessionState, Snippet, apply_session_event
from ._memory_config import MemoryConfig, default_memory_config
from ._runtime import Runtime
from ._state import AgentSnapshot, AgentState
from ._stats import RuntimeStats
from ._writer import JournalWriter

__all__ = [
    "DEFAULT_MAX_PROMPT_LENGTH",
    "ActorError",
    "ActorTimeoutError",
    "Agent",
    "AgentCapacityError",
    "AgentCheckpointNotSupportedError",
    "AgentContext",
    "AgentExistsError",
    "AgentNotFoundError",
    "AgentNotRegisteredError",
    "AgentNotSuspendedError",
    "AgentRetiredError",
    "AgentRunningError",
    "AgentSnapshot",
    "AgentState",
    "Behavior",
    "CleanOptions",
    "Clock",
    "ClockError",
    "Config",
    "ContextView",
    "FakeClock",
    "InvalidArgumentError",
    "InvalidConfigError",
    "InvalidSpawnSpecError",
    "IpcBus",
    "IpcError",
    "IpcHandlerError",
    "IpcInvalidMessageError",
    "IpcNoHandlerError",
    "IpcTimeoutError",
    "JournalConfig",
    "JournalWriter",
    "JournaledLLM",
    "LLMClient",
    "LLMConfig",
    "LLMProvider",
    "MailboxFullError",
    "MemoryConfig",
    "MemoryManager",
    "NoJournalError",
    "NoLLMProviderError",
    "OpenAICompatibleProvider",
    "PromptTooLongError",
    "ProviderError",
    "Retriever",
    "Runtime",
    "RuntimeClosedError",
    "RuntimeConfig",
    "RuntimeStats",
    "ScriptedProvider",
    "SessionData",
    "SessionNotFoundError",
    "SessionState",
    "Snippet",
    "SpawnSpecTypeError",
    "SystemClock",
    "UserCodeError",
    "apply_session_event",
    "default_memory_config",
    "render_messages",
    "replay_agent",
    "snapshot_problem",
]
