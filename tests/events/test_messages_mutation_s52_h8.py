"""Mutation round s52 (h8): session messages (spec §4.1) beyond what test_messages pins.

- Only a tuple given for ``tool_calls`` or ``artifact_refs`` is taken as a list: a str
  (an easy slip for one artifact ref) is refused where it is added, not split into its
  letters and stored as so many refs.
- A message holding a key this code does not declare reads back (the original's
  ``encoding/json`` ignores unknown keys, and ``register_upcaster`` documents that
  msgspec drops them): a message written by a newer original, or a record of a newer
  cogfabric whose message gained a field, still decodes.
"""

from __future__ import annotations

import msgspec
import pytest

from cogfabric import Runtime
from cogfabric.actors import FakeClock
from cogfabric.events import Message, SessionMessageAdded, ToolCall, ToolCallFunction, decode, encode


@pytest.mark.parametrize("field", ["artifact_refs", "tool_calls"])
def test_a_str_for_a_list_field_is_refused_not_split_into_letters(field: str) -> None:
    with Runtime.open(None, clock=FakeClock()) as rt:
        session = rt.memory.create_session("u")
        before = rt.memory.get_messages(session)
        message = Message(role="user", content="x", **{field: "ab"})  # type: ignore[arg-type]

        assert getattr(message, field) == "ab"
        with pytest.raises(TypeError):
            rt.memory.add_structured_message(session, message)
        assert rt.memory.get_messages(session) == before


def test_a_message_with_a_key_this_code_does_not_know_decodes_from_json() -> None:
    written = (
        b'{"role":"assistant","content":"hi","time":1.0,"reasoning":"newer field",'
        b'"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"},"index":0}]}'
    )

    message = msgspec.json.decode(written, type=Message)

    assert message == Message(
        role="assistant",
        content="hi",
        time=1.0,
        tool_calls=[ToolCall(id="c", function=ToolCallFunction(name="f", arguments="{}"))],
    )


def test_a_stored_message_with_a_key_this_code_does_not_know_decodes() -> None:
    record = msgspec.msgpack.decode(
        encode(SessionMessageAdded(at=1.0, session="s", message=Message(role="user", content="x", time=1.0)))
    )
    record["message"]["added_by_a_newer_version"] = [1, 2]

    event = decode(msgspec.msgpack.encode(record))

    assert isinstance(event, SessionMessageAdded)
    assert event.message == Message(role="user", content="x", time=1.0)
