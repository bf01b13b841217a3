"""cogfabric: an event-sourced actor runtime that manages the context of LLM agents.

The names below are resolved lazily (PEP 562), so ``import cogfabric.events`` stays
free of pykka and lmdb even though the package root exports the runtime.
"""

from __future__ import annotations

import importlib as _importlib
import logging as _logging
from typing import TYPE_CHECKING, Any

from cogfabric._errors import CogfabricError

if TYPE_CHECKING:
    from cogfabric.actors import (
        DEFAULT_MAX_PROMPT_LENGTH,
        ActorError,
        ActorTimeoutError,
        Agent,
        AgentCapacityError,
        AgentCheckpointNotSupportedError,
        AgentContext,
        AgentExistsError,
        AgentNotFoundError,
        AgentNotRegisteredError,
        AgentNotSuspendedError,
        AgentRetiredError,
        AgentRunningError,
        AgentState,
        Behavior,
        CleanOptions,
        Clock,
        ClockError,
        Config,
        ContextView,
        FakeClock,
        InvalidArgumentError,
        InvalidConfigError,
        InvalidSpawnSpecError,
        IpcBus,
        IpcError,
        IpcHandlerError,
        IpcInvalidMessageError,
        IpcNoHandlerError,
        IpcTimeoutError,
        JournalConfig,
        JournaledLLM,
        LLMClient,
        LLMConfig,
        LLMProvider,
        MailboxFullError,
        MemoryConfig,
        MemoryManager,
        NoJournalError,
        NoLLMProviderError,
        OpenAICompatibleProvider,
        PromptTooLongError,
        ProviderError,
        Retriever,
        Runtime,
        RuntimeCapacityError,
        RuntimeClosedError,
        RuntimeConfig,
        RuntimeStats,
        ScriptedProvider,
        SessionData,
        SessionNotFoundError,
        SettleTimeoutError,
        Snippet,
        SpawnSpecTypeError,
        SystemClock,
        UserCodeError,
        default_memory_config,
    )
    from cogfabric.config import load_config
    from cogfabric.events import (
        COGNITIVE_STATE_SCHEMA_VERSION,
        CognitiveState,
        CognitiveStateSchemaVersionError,
        ContextLayer,
        EventDecodeError,
        EventError,
        EventVersionError,
        InvalidEventError,
        InvalidTextError,
        IpcDeadLettered,
        IpcMessage,
        LlmCallFailed,
        LlmOutputRecorded,
        Message,
        NewerCognitiveStateError,
        PromptRejected,
        ToolCall,
        ToolCallFunction,
        UnencodableValueError,
        UnknownEventTypeError,
        decode_cognitive_state,
    )
    from cogfabric.store import (
        InvalidStreamError,
        Journal,
        JournalClosedError,
        JournalConflictError,
        JournalDamagedError,
        JournalError,
        JournalFailedError,
        JournalFormatError,
        JournalFullError,
        JournalHeaderError,
        JournalIntegrityError,
        JournalKeyError,
        JournalLockedError,
        JournalNotFoundError,
        JournalReadOnlyError,
        JournalRecordDecodeError,
        JournalRecordError,
        JournalRecordTypeError,
        JournalRecordVersionError,
        JournalStillFullError,
        JournalUnavailableError,
        Record,
        Snapshot,
        VerifyReport,
    )

# A library never configures logging; applications attach their own handlers.
_logging.getLogger("cogfabric").addHandler(_logging.NullHandler())


def _version() -> str:
    """The installed distribution's version (``__version__``, read on first use).

    Read lazily: ``importlib.metadata`` and the search for the distribution took about a
    third of ``import cogfabric``, which every command's start pays.
    """
    from importlib import metadata  # noqa: PLC0415

    try:
        # None: a distribution whose metadata names no version (a broken install's)
        return metadata.version("cogfabric") or "0+unknown"
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


# name -> the module that defines it; imported on first access.
_LAZY: dict[str, str] = {
    "COGNITIVE_STATE_SCHEMA_VERSION": "cogfabric.events",
    "CognitiveState": "cogfabric.events",
    "CognitiveStateSchemaVersionError": "cogfabric.events",
    "ContextLayer": "cogfabric.events",
    "Message": "cogfabric.events",
    "ToolCall": "cogfabric.events",
    "ToolCallFunction": "cogfabric.events",
    "InvalidTextError": "cogfabric.events",
    "UnencodableValueError": "cogfabric.events",
    "decode_cognitive_state": "cogfabric.events",
    "PromptRejected": "cogfabric.events",
    "IpcMessage": "cogfabric.events",
    "IpcDeadLettered": "cogfabric.events",
    "LlmOutputRecorded": "cogfabric.events",
    "LlmCallFailed": "cogfabric.events",
    "ActorError": "cogfabric.actors",
    "ActorTimeoutError": "cogfabric.actors",
    "Agent": "cogfabric.actors",
    "AgentContext": "cogfabric.actors",
    "AgentExistsError": "cogfabric.actors",
    "AgentNotFoundError": "cogfabric.actors",
    "AgentNotRegisteredError": "cogfabric.actors",
    "AgentNotSuspendedError": "cogfabric.actors",
    "AgentRetiredError": "cogfabric.actors",
    "AgentRunningError": "cogfabric.actors",
    "AgentState": "cogfabric.actors",
    "Behavior": "cogfabric.actors",
    "Clock": "cogfabric.actors",
    "Config": "cogfabric.actors",
    "load_config": "cogfabric.config",
    "ContextView": "cogfabric.actors",
    "FakeClock": "cogfabric.actors",
    "InvalidSpawnSpecError": "cogfabric.actors",
    "SpawnSpecTypeError": "cogfabric.actors",
    "IpcBus": "cogfabric.actors",
    "IpcError": "cogfabric.actors",
    "IpcHandlerError": "cogfabric.actors",
    "IpcInvalidMessageError": "cogfabric.actors",
    "IpcNoHandlerError": "cogfabric.actors",
    "IpcTimeoutError": "cogfabric.actors",
    "JournalConfig": "cogfabric.actors",
    "MailboxFullError": "cogfabric.actors",
    "NoJournalError": "cogfabric.actors",
    "Runtime": "cogfabric.actors",
    "ScriptedProvider": "cogfabric.actors",
    "ProviderError": "cogfabric.actors",
    "PromptTooLongError": "cogfabric.actors",
    "OpenAICompatibleProvider": "cogfabric.actors",
    "LLMProvider": "cogfabric.actors",
    "LLMConfig": "cogfabric.actors",
    "LLMClient": "cogfabric.actors",
    "JournaledLLM": "cogfabric.actors",
    "InvalidArgumentError": "cogfabric.actors",
    "NoLLMProviderError": "cogfabric.actors",
    "DEFAULT_MAX_PROMPT_LENGTH": "cogfabric.actors",
    "default_memory_config": "cogfabric.actors",
    "Snippet": "cogfabric.actors",
    "SessionData": "cogfabric.actors",
    "SessionNotFoundError": "cogfabric.actors",
    "SettleTimeoutError": "cogfabric.actors",
    "Retriever": "cogfabric.actors",
    "MemoryManager": "cogfabric.actors",
    "MemoryConfig": "cogfabric.actors",
    "ClockError": "cogfabric.actors",
    "InvalidConfigError": "cogfabric.actors",
    "CleanOptions": "cogfabric.actors",
    "AgentCapacityError": "cogfabric.actors",
    "RuntimeCapacityError": "cogfabric.actors",
    "AgentCheckpointNotSupportedError": "cogfabric.actors",
    "RuntimeClosedError": "cogfabric.actors",
    "UserCodeError": "cogfabric.actors",
    "RuntimeConfig": "cogfabric.actors",
    "RuntimeStats": "cogfabric.actors",
    "SystemClock": "cogfabric.actors",
    "Journal": "cogfabric.store",
    "Record": "cogfabric.store",
    "Snapshot": "cogfabric.store",
    "VerifyReport": "cogfabric.store",
    "JournalError": "cogfabric.store",
    "JournalIntegrityError": "cogfabric.store",
    "JournalRecordError": "cogfabric.store",
    "JournalKeyError": "cogfabric.store",
    "JournalHeaderError": "cogfabric.store",
    "JournalFullError": "cogfabric.store",
    "InvalidStreamError": "cogfabric.store",
    "JournalClosedError": "cogfabric.store",
    "JournalConflictError": "cogfabric.store",
    "JournalDamagedError": "cogfabric.store",
    "JournalFailedError": "cogfabric.store",
    "JournalFormatError": "cogfabric.store",
    "JournalLockedError": "cogfabric.store",
    "JournalNotFoundError": "cogfabric.store",
    "JournalReadOnlyError": "cogfabric.store",
    "JournalRecordDecodeError": "cogfabric.store",
    "JournalRecordTypeError": "cogfabric.store",
    "JournalRecordVersionError": "cogfabric.store",
    "JournalStillFullError": "cogfabric.store",
    "JournalUnavailableError": "cogfabric.store",
    "EventDecodeError": "cogfabric.events",
    "EventError": "cogfabric.events",
    "EventVersionError": "cogfabric.events",
    "InvalidEventError": "cogfabric.events",
    "NewerCognitiveStateError": "cogfabric.events",
    "UnknownEventTypeError": "cogfabric.events",
}

__all__ = [  # noqa: RUF022 - grouped: events, then the runtime, then the journal
    "COGNITIVE_STATE_SCHEMA_VERSION",
    "CogfabricError",
    "CognitiveState",
    "CognitiveStateSchemaVersionError",
    "ContextLayer",
    "Message",
    "ToolCall",
    "ToolCallFunction",
    "InvalidTextError",
    "UnencodableValueError",
    "__version__",
    "decode_cognitive_state",
    "PromptRejected",
    "LlmOutputRecorded",
    "LlmCallFailed",
    "IpcMessage",
    "IpcDeadLettered",
    "ActorError",
    "ActorTimeoutError",
    "Agent",
    "AgentContext",
    "AgentExistsError",
    "AgentNotFoundError",
    "AgentNotRegisteredError",
    "AgentNotSuspendedError",
    "AgentRetiredError",
    "AgentRunningError",
    "AgentState",
    "Behavior",
    "Clock",
    "Config",
    "load_config",
    "ContextView",
    "FakeClock",
    "InvalidSpawnSpecError",
    "SpawnSpecTypeError",
    "IpcBus",
    "IpcError",
    "IpcHandlerError",
    "IpcInvalidMessageError",
    "IpcNoHandlerError",
    "IpcTimeoutError",
    "JournalConfig",
    "MailboxFullError",
    "NoJournalError",
    "Runtime",
    "ScriptedProvider",
    "ProviderError",
    "PromptTooLongError",
    "OpenAICompatibleProvider",
    "LLMProvider",
    "LLMConfig",
    "LLMClient",
    "JournaledLLM",
    "InvalidArgumentError",
    "NoLLMProviderError",
    "DEFAULT_MAX_PROMPT_LENGTH",
    "default_memory_config",
    "Snippet",
    "SessionData",
    "SessionNotFoundError",
    "SettleTimeoutError",
    "Retriever",
    "MemoryManager",
    "MemoryConfig",
    "ClockError",
    "InvalidConfigError",
    "CleanOptions",
    "AgentCapacityError",
    "RuntimeCapacityError",
    "AgentCheckpointNotSupportedError",
    "RuntimeClosedError",
    "UserCodeError",
    "RuntimeConfig",
    "RuntimeStats",
    "SystemClock",
    "Journal",
    "Record",
    "Snapshot",
    "VerifyReport",
    "JournalError",
    "JournalIntegrityError",
    "JournalRecordError",
    "JournalKeyError",
    "JournalHeaderError",
    "JournalFullError",
    "InvalidStreamError",
    "JournalClosedError",
    "JournalConflictError",
    "JournalDamagedError",
    "JournalFailedError",
    "JournalFormatError",
    "JournalLockedError",
    "JournalNotFoundError",
    "JournalReadOnlyError",
    "JournalRecordDecodeError",
    "JournalRecordTypeError",
    "JournalRecordVersionError",
    "JournalStillFullError",
    "JournalUnavailableError",
    "EventDecodeError",
    "EventError",
    "EventVersionError",
    "InvalidEventError",
    "NewerCognitiveStateError",
    "UnknownEventTypeError",
]


_SUBPACKAGES = frozenset({"actors", "events", "store", "config"})
"""Subpackages ``cogfabric.<name>`` also resolves after a bare ``import cogfabric``."""


if TYPE_CHECKING:
    # what the lazy names resolve to, for type checkers (the exports above, and these)
    __version__: str
    from cogfabric import actors as actors
    from cogfabric import config as config
    from cogfabric import events as events
    from cogfabric import store as store
else:
    # Hidden from type checkers: one they saw would take any name of the package,
    # a misspelt one too, as Any.
    def __getattr__(name: str) -> Any:  # noqa: ANN401 - returns whatever the export is
        if name == "__version__":
            version = globals()["__version__"] = _version()
            return version
        if name in _SUBPACKAGES:
            return _importlib.import_module(f"cogfabric.{name}")  # which also binds it here
        module = _LAZY.get(name)
        if module is None:
            msg = f"module 'cogfabric' has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(_importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    """The public names (and the subpackages), not the helpers this module imports."""
    return sorted({*__all__, *_SUBPACKAGES})
