"""cogfabric: an event-sourced actor runtime that manages the context of LLM agents.

The names below are resolved lazily (PEP 562), so ``import cogfabric.events`` stays
free of pykka and lmdb even though the package root exports the runtime.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from cogfabric._errors import CogfabricError

if TYPE_CHECKING:
    from cogfabric.events import (
        COGNITIVE_STATE_SCHEMA_VERSION,
        CognitiveState,
        CognitiveStateSchemaVersionError,
        ContextLayer,
        Message,
        ToolCall,
        ToolCallFunction,
        decode_cognitive_state,
    )

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
    "decode_cognitive_state": "cogfabric.events",
}

__all__ = [
    "COGNITIVE_STATE_SCHEMA_VERSION",
    "CogfabricError",
    "CognitiveState",
    "CognitiveStateSchemaVersionError",
    "ContextLayer",
    "Message",
    "ToolCall",
    "ToolCallFunction",
    "__version__",
    "decode_cognitive_state",
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
