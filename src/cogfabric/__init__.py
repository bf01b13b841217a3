"""cogfabric: an event-sourced actor runtime that manages the context of LLM agents.

The names below are resolved lazily (PEP 562), so ``import cogfabric.events`` stays
free of pykka and lmdb even though the package root exports the runtime.
"""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from cogfabric._errors import CogfabricError

if TYPE_CHECKING:
    from cogfabric.actors import (
        DEFAULT_MAX_PROMPT_LENGTH,
        ActorError,
        ActorTimeoutError,
        Agent,
        AgentCheckpointNotSupportedError,
        AgentContext,
        AgentExistsError,
        AgentNotFoundError,
        AgentNotSuspendedError,
        AgentRetiredError,
        AgentRunningError,
        AgentState,
        Behavior,
        CleanOptions,
        Clock,
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
        OpenAICompatibleProvider,
        PromptTooLongError,
        ProviderError,
        Retriever,
        Runtime,
        RuntimeClosedError,
        RuntimeConfig,
        ScriptedProvider,
        SessionNotFoundError,
        Snippet,
        SystemClock,
        default_memory_config,
    )
    from cogfabric.events import (
        COGNITIVE_STATE_SCHEMA_VERSION,
        CognitiveState,
        CognitiveStateSchemaVersionError,
        ContextLayer,
        LlmOutputRecorded,
        Message,
        PromptRejected,
        ToolCall,
        ToolCallFunction,
        UnencodableValueError,
        decode_cognitive_state,
    )
    from cogfabric.store import (
        Journal,
        JournalError,
        JournalFullError,
        JournalHeaderError,
        JournalIntegrityError,
        JournalKeyError,
        JournalRecordError,
        Record,
        Snapshot,
        VerifyReport,
    )

# A library never configures logging; applications attach their own handlers.
logging.getLogger("cogfabric").addHandler(logging.NullHandler())

try:
    __version__ = version("cogfabric")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

# name -> the module that defines it; imported on first access.
_LAZY: dict[str, str] = {
    "COGNITIVE_STATE_SCHEMA_VERSION": "cogfabric.events",
    "CognitiveState": "cogfabric.events",
    "CognitiveStateSchemaVersionError": "cogfabric.events",
    "ContextLayer": "cogfabric.events",
    "Message": "cogfabric.events",
    "ToolCall": "cogfabric.events",
    "ToolCallFunction": "cogfabric.events",
    "UnencodableValueError": "cogfabric.events",
    "decode_cognitive_state": "cogfabric.events",
    "PromptRejected": "cogfabric.events",
    "LlmOutputRecorded": "cogfabric.events",
    "ActorError": "cogfabric.actors",
    "ActorTimeoutError": "cogfabric.actors",
    "Agent": "cogfabric.actors",
    "AgentContext": "cogfabric.actors",
    "AgentExistsError": "cogfabric.actors",
    "AgentNotFoundError": "cogfabric.actors",
    "AgentNotSuspendedError": "cogfabric.actors",
    "AgentRetiredError": "cogfabric.actors",
    "AgentRunningError": "cogfabric.actors",
    "AgentState": "cogfabric.actors",
    "Behavior": "cogfabric.actors",
    "Clock": "cogfabric.actors",
    "Config": "cogfabric.actors",
    "ContextView": "cogfabric.actors",
    "FakeClock": "cogfabric.actors",
    "InvalidSpawnSpecError": "cogfabric.actors",
    "IpcBus": "cogfabric.actors",
    "IpcError": "cogfabric.actors",
    "IpcHandlerError": "cogfabric.actors",
    "IpcInvalidMessageError": "cogfabric.actors",
    "IpcNoHandlerError": "cogfabric.actors",
    "IpcTimeoutError": "cogfabric.actors",
    "JournalConfig": "cogfabric.actors",
    "MailboxFullError": "cogfabric.actors",
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
    "DEFAULT_MAX_PROMPT_LENGTH": "cogfabric.actors",
    "default_memory_config": "cogfabric.actors",
    "Snippet": "cogfabric.actors",
    "SessionNotFoundError": "cogfabric.actors",
    "Retriever": "cogfabric.actors",
    "MemoryManager": "cogfabric.actors",
    "MemoryConfig": "cogfabric.actors",
    "InvalidConfigError": "cogfabric.actors",
    "CleanOptions": "cogfabric.actors",
    "AgentCheckpointNotSupportedError": "cogfabric.actors",
    "RuntimeClosedError": "cogfabric.actors",
    "RuntimeConfig": "cogfabric.actors",
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
    "UnencodableValueError",
    "__version__",
    "decode_cognitive_state",
    "PromptRejected",
    "LlmOutputRecorded",
    "ActorError",
    "ActorTimeoutError",
    "Agent",
    "AgentContext",
    "AgentExistsError",
    "AgentNotFoundError",
    "AgentNotSuspendedError",
    "AgentRetiredError",
    "AgentRunningError",
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
    "IpcNoHandlerError",
    "IpcTimeoutError",
    "JournalConfig",
    "MailboxFullError",
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
    "DEFAULT_MAX_PROMPT_LENGTH",
    "default_memory_config",
    "Snippet",
    "SessionNotFoundError",
    "Retriever",
    "MemoryManager",
    "MemoryConfig",
    "InvalidConfigError",
    "CleanOptions",
    "AgentCheckpointNotSupportedError",
    "RuntimeClosedError",
    "RuntimeConfig",
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
]


def __getattr__(name: str) -> Any:  # noqa: ANN401 - returns whatever the export is
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'cogfabric' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
