"""Structured session messages (spec §4.1), with snake_case fields."""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = [
    "ROLE_ASSISTANT",
    "ROLE_SYSTEM",
    "ROLE_TOOL_CALL",
    "ROLE_TOOL_RESULT",
    "ROLE_USER",
    "Message",
    "ToolCall",
    "ToolCallFunction",
]

ROLE_USER: Final = "user"
ROLE_ASSISTANT: Final = "assistant"
ROLE_SYSTEM: Final = "system"
ROLE_TOOL_CALL: Final = "tool_call"
ROLE_TOOL_RESULT: Final = "tool_result"


class ToolCallFunction(msgspec.Struct, frozen=True, kw_only=True):
    """The function a tool call names, with its arguments as a JSON string."""

    name: str
    arguments: str = ""


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call an assistant message asks for."""

    id: str
    function: ToolCallFunction
    type: str = "function"


class Message(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One message of a session.

    Immutable all the way down (sequences are tuples), so a message handed out by the
    session memory can be shared without copying. A list given for ``tool_calls`` or
    ``artifact_refs`` is taken as a tuple, so a message built with lists equals itself
    read back. ``time`` is wall seconds from the runtime's clock; 0.0 means unset and is
    filled in when the message is added.
    """

    role: str
    content: str
    time: float = 0.0
    turn_id: str = ""
    tool_call_id: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    event_kind: str = ""
    parent_id: str = ""
    artifact_refs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Lists only, not other iterables: a str would become its letters.
        calls: object = self.tool_calls
        if type(calls) is list:
            msgspec.structs.force_setattr(self, "tool_calls", tuple(calls))
        refs: object = self.artifact_refs
        if type(refs) is list:
            msgspec.structs.force_setattr(self, "artifact_refs", tuple(refs))
