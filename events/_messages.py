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

    ``tool_calls`` and ``artifact_refs`` are lists, as the original's slices are, and
    typed so. A tuple given for one is taken as a list at run time (a type checker asks
    for the list), so a message equals itself read back. The session memory hands out
    copies of them: changing a list you were given changes
    nothing stored. ``time`` is wall seconds from the runtime's clock; 0.0 means unset
    and is filled in when the message is added.
    """

    role: str
    content: str
    time: float = 0.0
    turn_id: str = ""
    tool_call_id: str = ""
    tool_calls: list[ToolCall] = []
    event_kind: str = ""
    parent_id: str = ""
    artifact_refs: list[str] = []

    def __post_init__(self) -> None:
        # Tuples only, not other iterables: a str would become its letters.
        calls: object = self.tool_calls
        if type(calls) is tuple:
            msgspec.structs.force_setattr(self, "tool_calls", list(calls))
        refs: object = self.artifact_refs
        if type(refs) is tuple:
            msgspec.structs.force_setattr(self, "artifact_refs", list(refs))
