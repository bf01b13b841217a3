"""Records as the first format-5 code stored them read back whole (session 62, helper h1).

Journal format 5 began at commit 491a482; everything written since must read without
losing or changing anything. A round trip through this code's own types cannot see a
field renamed or removed (msgspec drops a field it does not know without a word), so
these are the maps 491a482 wrote, one of each event type and an agent's snapshot, taken
from journals it wrote (ids shortened). Each is decoded by this code and encoded again:
every stored field must come back with its value, and the only additions are the
defaults of the fields added since (``IpcDeadLettered``'s ``payload`` and ``trace_id``,
``PromptRejected``'s ``session`` with its version 2). A new event type adds its record
here; a changed one needs a version and an upcaster (``Event``, ``EventCodec``).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from cogfabric.actors._state import decode_snapshot
from cogfabric.events import DEFAULT_CODEC, EVENT_TYPES

_NO_COGNITION = {
    "context": None,
    "observation": None,
    "working_memory": None,
    "decision": None,
    "tool_state": None,
    "checkpoint": None,
}
_STATE = {
    "schema_version": 1,
    "context": {"c": 1},
    "observation": "r",
    "working_memory": ["w"],
    "decision": "pl",
    "tool_state": {"t": 1},
    "checkpoint": "cp",
}
_LLM = {"agent": "a1", "provider": "scripted", "model": "script", "prompt_hash": "fa983c9c3b27ffc7"}


def _at(type_name: str, n: int, cause: str | None = None) -> dict[str, Any]:
    return {"type": type_name, "at": 1800000000.0, "id": f"785841b2-{n:04x}", "cause": cause, "v": 1}


FORMAT5_RECORDS: dict[str, dict[str, Any]] = {
    "AgentSpawned": {
        **_at("AgentSpawned", 2),
        "agent": "b1",
        "task_id": "t1",
        "parent": "a1",
        "capabilities": ["x", "y"],
        "priority": 2.5,
        "task_context": {"goal": "g", "n": [1, 2]},
        "cognitive": {"schema_version": 0, **_NO_COGNITION},
        "behavior": "echo",
    },
    "LifecycleChanged": {
        **_at("LifecycleChanged", 0x12),
        "agent": "d1",
        "state": "SUSPENDED",
        "previous": "IDLE",
    },
    "AgentKilled": {
        **_at("AgentKilled", 0x44),
        "agent": "f1",
        "cognitive": {"schema_version": 1, **_NO_COGNITION},
        "capabilities": [],
        "parent": None,
    },
    "AgentRecovered": {
        **_at("AgentRecovered", 0x47),
        "agent": "d1",
        "cognitive": {"schema_version": 1, **_NO_COGNITION, "decision": "recovered"},
        "has_checkpoint": False,
    },
    "AgentFailed": {
        **_at("AgentFailed", 0x43, cause="785841b2-003d"),
        "agent": "a1",
        "error": "RuntimeError",
        "detail": "boom on purpose",
    },
    "TaskContextSet": {
        **_at("TaskContextSet", 0xF),
        "agent": "a1",
        "context": {"goal": "g2", "nested": {"deep": [1, {"x": 2}]}},
    },
    "TaskContextPublished": {
        **_at("TaskContextPublished", 0x16),
        "task_id": "t1",
        "context": {"shared": "pub", "v": 3},
        "agents": ["a1", "b1", "c1"],
    },
    "PrivateSet": {
        **_at("PrivateSet", 7),
        "agent": "a1",
        "key": "k0",
        "value": {"i": 0, "f": 0.5, "s": "é", "b": b"\x00\x01", "l": [0, None, True], 1: "int key"},
    },
    "CognitiveStateSet": {**_at("CognitiveStateSet", 0x10), "agent": "a1", "state": _STATE},
    "CheckpointTaken": {**_at("CheckpointTaken", 0x11), "agent": "a1", "state": _STATE},
    "IpcSubscribed": {**_at("IpcSubscribed", 0x17), "v": 2, "agent": "a1", "topic": "news", "order": 1},
    "IpcUnsubscribed": {**_at("IpcUnsubscribed", 0x1B), "agent": "f1", "topic": "news"},
    "IpcMessage": {
        **_at("IpcMessage", 0x1D),
        "sender": "a1",
        "recipient": "",
        "topic": "news",
        "payload": {"headline": "h"},
        "correlation_id": "",
        "trace_id": "785841b2-001c",
        "kind": "broadcast",
    },
    "IpcDelivered": {**_at("IpcDelivered", 0x20), "message_id": "785841b2-001d", "recipient": "a1"},
    "IpcDeadLettered": {
        **_at("IpcDeadLettered", 0x38, cause="785841b2-0037"),
        "message_id": "785841b2-0037",
        "sender": "a1",
        "recipient": "nobody",
        "topic": "lost",
        "reason": "agent not registered",
        "error": "",
    },
    "SessionCreated": {
        **_at("SessionCreated", 0x4C),
        "session": "session_alice_e4676df8b7f66471",
        "user_id": "alice",
        "agent_id": "a1",
        "seed": {"role": "system", "content": "New session started", "time": 1800000000.0},
    },
    "SessionMessageAdded": {
        **_at("SessionMessageAdded", 0x4F),
        "session": "session_alice_e4676df8b7f66471",
        "message": {
            "role": "assistant",
            "content": "",
            "time": 1800000000.0,
            "turn_id": "t-1",
            "tool_calls": [
                {"id": "call1", "function": {"name": "read", "arguments": '{"p": "/x"}'}, "type": "function"}
            ],
            "artifact_refs": ["art1"],
        },
    },
    "SessionTouched": {**_at("SessionTouched", 0x5E), "session": "session_alice_e4676df8b7f66471"},
    "SessionDeleted": {**_at("SessionDeleted", 0x59), "session": "session_bob_334e5b3e67b78621"},
    "SessionExpired": {**_at("SessionExpired", 0x5F), "session": "session_carol_218c763092421356"},
    "SessionEvicted": {**_at("SessionEvicted", 0x61), "session": "session_dave_1b0b514ab2775bd6"},
    "PromptRejected": {
        **_at("PromptRejected", 0x49),
        "agent": "a1",
        "length": 10000,
        "limit": 8192,
        "reason": "too_long",
    },
    "LlmOutputRecorded": {
        **_at("LlmOutputRecorded", 0x2F, cause="785841b2-0025"),
        **_LLM,
        "output": "answer one",
        "session": None,
    },
    "LlmCallFailed": {
        **_at("LlmCallFailed", 0x4A),
        **_LLM,
        "agent": "b1",
        "error": "provider failing failed: RuntimeError('provider down')",
        "session": "session_alice_e4676df8b7f66471",
    },
}

ADDED_SINCE: dict[str, dict[str, Any]] = {
    "IpcDeadLettered": {"payload": None, "trace_id": ""},  # 820866c
    "PromptRejected": {"session": None, "v": 2},  # 17a1c9f, 5555d20
}
"""What this code adds to a format-5 record of 491a482 when it reads it: the defaults of
fields added since, and a version an upcaster raised."""


def test_the_records_cover_every_event_type() -> None:
    # a new event type adds the record a release writes of it, so its fields are pinned too
    assert set(FORMAT5_RECORDS) == {cls.__name__ for cls in EVENT_TYPES}


@pytest.mark.parametrize("type_name", sorted(FORMAT5_RECORDS))
def test_a_format5_record_reads_back_with_every_field_and_value(type_name: str) -> None:
    stored = FORMAT5_RECORDS[type_name]

    event = DEFAULT_CODEC.decode(msgspec.msgpack.encode(stored))

    assert type(event).__name__ == type_name
    read_back = msgspec.msgpack.decode(msgspec.msgpack.encode(event))
    assert read_back == {**stored, **ADDED_SINCE.get(type_name, {})}


def test_an_agent_snapshot_as_491a482_stored_it_reads_back_whole() -> None:
    # Snapshots carry no version: a field renamed or removed in AgentSnapshot would be
    # dropped from every snapshot of an older journal, and the agent recovered without it.
    stored = {
        "id": "a1",
        "task_id": "t1",
        "parent": "root",
        "capabilities": ["x", "y"],
        "priority": 2.5,
        "lifecycle": "SUSPENDED",
        "task_context": {"shared": "pub", "v": 3},
        "private": {"k0": {"b": b"\x00\x01", "l": [0, None, True]}, "last_topic": "think"},
        "cognitive": _STATE,
        "behavior": "echo",
        "topics": ["news"],
        "topic_orders": {"news": 1},
        "spawned_at": 1800000000.0,
        "publish_seq": 22,
        "events": 18,
        "snapshot_events": 18,
    }

    state = decode_snapshot(msgspec.msgpack.encode(stored))

    assert msgspec.msgpack.decode(msgspec.msgpack.encode(state)) == stored
