"""Session messages (spec §4.1): Message, ToolCall and ToolCallFunction."""

from __future__ import annotations

import msgspec
import pytest

from cogfabric.events import (
    ROLE_ASSISTANT,
    ROLE_SYSTEM,
    ROLE_TOOL_CALL,
    ROLE_TOOL_RESULT,
    ROLE_USER,
    Message,
    SessionMessageAdded,
    ToolCall,
    ToolCallFunction,
    decode,
    encode,
)

FULL = Message(
    role=ROLE_ASSISTANT,
    content="let me look",
    time=1700000000.5,
    turn_id="turn-1",
    tool_call_id="call-0",
    tool_calls=[
        ToolCall(id="call-1", function=ToolCallFunction(name="search", arguments='{"q": "x"}')),
        ToolCall(id="call-2", type="function", function=ToolCallFunction(name="noop")),
    ],
    event_kind="tool_use",
    parent_id="msg-0",
    artifact_refs=["artifact-1", "artifact-2"],
)


class TestMessageFields:
    def test_the_role_constants_are_those_of_the_original(self) -> None:
        assert (ROLE_USER, ROLE_ASSISTANT, ROLE_SYSTEM, ROLE_TOOL_CALL, ROLE_TOOL_RESULT) == (
            "user",
            "assistant",
            "system",
            "tool_call",
            "tool_result",
        )

    def test_a_message_has_the_fields_of_the_original_in_snake_case(self) -> None:
        names = [f.name for f in msgspec.structs.fields(Message)]

        assert names == [
            "role",
            "content",
            "time",
            "turn_id",
            "tool_call_id",
            "tool_calls",
            "event_kind",
            "parent_id",
            "artifact_refs",
        ]

    def test_a_message_needs_only_a_role_and_content(self) -> None:
        message = Message(role=ROLE_USER, content="hi")

        assert message.time == 0.0
        assert message.turn_id == ""
        assert message.tool_call_id == ""
        assert message.tool_calls == []
        assert message.event_kind == ""
        assert message.parent_id == ""
        assert message.artifact_refs == []

    def test_a_tool_call_defaults_to_the_function_type(self) -> None:
        call = ToolCall(id="c", function=ToolCallFunction(name="f"))

        assert call.type == "function"
        assert call.function.arguments == ""

    def test_a_message_and_its_tool_calls_are_frozen(self) -> None:
        with pytest.raises(AttributeError):
            FULL.content = "changed"  # type: ignore[misc]
        with pytest.raises(AttributeError):
            FULL.tool_calls[0].id = "changed"  # type: ignore[misc]
        with pytest.raises(AttributeError):
            FULL.tool_calls[0].function.name = "changed"  # type: ignore[misc]

    def test_its_sequences_are_lists_and_tuples_given_are_taken_as_lists(self) -> None:
        # spec §4.1's fields are Go slices; a message built with tuples is the same message
        built = msgspec.structs.replace(
            FULL, tool_calls=tuple(FULL.tool_calls), artifact_refs=("artifact-1", "artifact-2")
        )

        assert built.tool_calls == FULL.tool_calls
        assert built.artifact_refs == ["artifact-1", "artifact-2"]
        assert built == FULL
        event = decode(encode(SessionMessageAdded(at=1.0, session="s", message=built)))
        assert isinstance(event, SessionMessageAdded)
        assert event.message == built
        assert event.message.artifact_refs == ["artifact-1", "artifact-2"]

    def test_the_fields_are_keyword_only(self) -> None:
        with pytest.raises(TypeError):
            Message("user", "hi")  # type: ignore[call-arg]


class TestMessageJson:
    def test_a_full_message_round_trips_through_json(self) -> None:
        assert msgspec.json.decode(msgspec.json.encode(FULL), type=Message) == FULL

    def test_a_full_message_encodes_with_the_snake_case_keys_of_the_original(self) -> None:
        document = msgspec.json.decode(msgspec.json.encode(FULL))

        assert set(document) == {
            "role",
            "content",
            "time",
            "turn_id",
            "tool_call_id",
            "tool_calls",
            "event_kind",
            "parent_id",
            "artifact_refs",
        }
        assert document["tool_calls"][0] == {
            "id": "call-1",
            "type": "function",
            "function": {"name": "search", "arguments": '{"q": "x"}'},
        }
        assert document["artifact_refs"] == ["artifact-1", "artifact-2"]

    def test_the_optional_fields_are_omitted_when_empty(self) -> None:
        document = msgspec.json.decode(msgspec.json.encode(Message(role=ROLE_USER, content="hi", time=2.0)))

        assert document == {"role": "user", "content": "hi", "time": 2.0}

    def test_a_message_decodes_from_json_written_by_the_original(self) -> None:
        go_json = (
            b'{"role":"assistant","content":"","time":3.0,"turn_id":"t","tool_calls":'
            b'[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}],'
            b'"artifact_refs":["a"]}'
        )

        message = msgspec.json.decode(go_json, type=Message)

        assert message == Message(
            role="assistant",
            content="",
            time=3.0,
            turn_id="t",
            tool_calls=[ToolCall(id="c1", function=ToolCallFunction(name="f", arguments="{}"))],
            artifact_refs=["a"],
        )
        assert isinstance(message.tool_calls, list)
        assert isinstance(message.artifact_refs, list)

    def test_a_tool_result_carries_its_tool_call_id(self) -> None:
        message = msgspec.json.decode(
            b'{"role":"tool_result","content":"42","time":1.0,"tool_call_id":"call-1"}', type=Message
        )

        assert message.role == ROLE_TOOL_RESULT
        assert message.tool_call_id == "call-1"

    def test_a_message_round_trips_through_msgpack(self) -> None:
        assert msgspec.msgpack.decode(msgspec.msgpack.encode(FULL), type=Message) == FULL

    def test_a_message_round_trips_inside_a_session_event(self) -> None:
        event = SessionMessageAdded(at=1.0, session="s1", message=FULL)

        decoded = decode(encode(event))

        assert isinstance(decoded, SessionMessageAdded)
        assert decoded.message == FULL
