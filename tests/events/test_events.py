"""Event types: context layers, streams, immutability and ids."""

from __future__ import annotations

import subprocess
import sys
import threading

import msgspec
import pytest

from cogfabric.events import (
    BUS_STREAM,
    EVENT_TYPES,
    RUNTIME_STREAM,
    AgentEvent,
    AgentFailed,
    AgentKilled,
    AgentRecovered,
    AgentSpawned,
    CheckpointTaken,
    CognitiveState,
    CognitiveStateSet,
    ContextLayer,
    Event,
    IpcDeadLettered,
    IpcDelivered,
    IpcMessage,
    IpcSubscribed,
    IpcUnsubscribed,
    LifecycleChanged,
    LlmCallFailed,
    LlmOutputRecorded,
    Message,
    PrivateSet,
    PromptRejected,
    SessionCreated,
    SessionDeleted,
    SessionEvent,
    SessionEvicted,
    SessionExpired,
    SessionMessageAdded,
    SessionTouched,
    TaskContextPublished,
    TaskContextSet,
    agent_stream,
    encode,
    new_event_id,
    session_stream,
)

EXPECTED_LAYERS: dict[type[Event], ContextLayer | None] = {
    AgentSpawned: ContextLayer.TASK_SHARED,
    LifecycleChanged: None,
    AgentKilled: None,
    AgentRecovered: ContextLayer.AGENT_PRIVATE,
    AgentFailed: None,
    TaskContextSet: ContextLayer.TASK_SHARED,
    TaskContextPublished: ContextLayer.TASK_SHARED,
    PrivateSet: ContextLayer.AGENT_PRIVATE,
    CognitiveStateSet: ContextLayer.AGENT_PRIVATE,
    CheckpointTaken: ContextLayer.AGENT_PRIVATE,
    IpcSubscribed: ContextLayer.IPC,
    IpcUnsubscribed: ContextLayer.IPC,
    IpcMessage: ContextLayer.IPC,
    IpcDelivered: ContextLayer.IPC,
    IpcDeadLettered: ContextLayer.IPC,
    SessionCreated: None,
    SessionMessageAdded: None,
    SessionTouched: None,
    SessionDeleted: None,
    SessionExpired: None,
    SessionEvicted: None,
    PromptRejected: None,
    LlmOutputRecorded: None,
    LlmCallFailed: None,
}


class TestContextLayer:
    def test_the_layers_have_the_values_of_the_original(self) -> None:
        assert ContextLayer.TASK_SHARED.value == 0
        assert ContextLayer.AGENT_PRIVATE.value == 1
        assert ContextLayer.IPC.value == 2
        assert list(ContextLayer) == [ContextLayer.TASK_SHARED, ContextLayer.AGENT_PRIVATE, ContextLayer.IPC]

    def test_a_layer_is_an_int(self) -> None:
        assert isinstance(ContextLayer.IPC, int)
        assert ContextLayer.IPC + 0 == 2
        assert ContextLayer(1) is ContextLayer.AGENT_PRIVATE

    def test_the_layer_table_covers_every_event_type(self) -> None:
        assert set(EXPECTED_LAYERS) == set(EVENT_TYPES)

    @pytest.mark.parametrize("cls", EVENT_TYPES, ids=lambda cls: cls.__name__)
    def test_each_event_type_records_the_layer_it_touches(self, cls: type[Event]) -> None:
        assert cls.layer is EXPECTED_LAYERS[cls]

    def test_private_set_touches_the_agent_private_layer(self) -> None:
        assert PrivateSet.layer is ContextLayer.AGENT_PRIVATE

    def test_task_context_set_touches_the_task_shared_layer(self) -> None:
        assert TaskContextSet.layer is ContextLayer.TASK_SHARED

    def test_an_ipc_message_touches_the_ipc_layer(self) -> None:
        assert IpcMessage.layer is ContextLayer.IPC

    def test_session_created_touches_no_layer(self) -> None:
        assert SessionCreated.layer is None

    def test_the_layer_is_a_class_attribute_and_not_an_encoded_field(self) -> None:
        event = PrivateSet(at=1.0, agent="a1", key="k", value=1)

        record = msgspec.msgpack.decode(encode(event))

        assert "layer" not in record
        assert "layer" not in {f.name for f in msgspec.structs.fields(PrivateSet)}


class TestStreams:
    def test_the_stream_helpers_build_agent_and_session_names(self) -> None:
        assert agent_stream("a1") == "agent/a1"
        assert session_stream("s1") == "session/s1"
        assert BUS_STREAM == "bus"
        assert RUNTIME_STREAM == "runtime"

    @pytest.mark.parametrize(
        "event",
        [
            AgentSpawned(at=1.0, agent="a1"),
            LifecycleChanged(at=1.0, agent="a1", state="SUSPENDED", previous="IDLE"),
            AgentKilled(at=1.0, agent="a1"),
            AgentRecovered(at=1.0, agent="a1", cognitive=CognitiveState(schema_version=1)),
            AgentFailed(at=1.0, agent="a1", error="boom"),
            TaskContextSet(at=1.0, agent="a1", context={}),
            PrivateSet(at=1.0, agent="a1", key="k"),
            CognitiveStateSet(at=1.0, agent="a1", state=CognitiveState(schema_version=1)),
            CheckpointTaken(at=1.0, agent="a1", state=CognitiveState(schema_version=1)),
            IpcSubscribed(at=1.0, agent="a1", topic="news"),
            IpcUnsubscribed(at=1.0, agent="a1", topic="news"),
        ],
        ids=lambda event: type(event).__name__,
    )
    def test_an_agent_event_belongs_to_the_agent_stream(self, event: AgentEvent) -> None:
        assert event.stream == "agent/a1" == agent_stream(event.agent)

    @pytest.mark.parametrize(
        "event",
        [
            SessionCreated(at=1.0, session="s1", user_id="u1"),
            SessionMessageAdded(at=1.0, session="s1", message=Message(role="user", content="hi")),
            SessionTouched(at=1.0, session="s1"),
            SessionDeleted(at=1.0, session="s1"),
            SessionExpired(at=1.0, session="s1"),
            SessionEvicted(at=1.0, session="s1"),
        ],
        ids=lambda event: type(event).__name__,
    )
    def test_a_session_event_belongs_to_the_session_stream(self, event: SessionEvent) -> None:
        assert event.stream == "session/s1" == session_stream(event.session)

    @pytest.mark.parametrize(
        "event",
        [
            IpcMessage(at=1.0, sender="a", recipient="b", topic="t"),
            IpcDelivered(at=1.0, message_id="m", recipient="b"),
            IpcDeadLettered(at=1.0, message_id="m", sender="a", recipient="b", topic="t", reason="no_agent"),
        ],
        ids=lambda event: type(event).__name__,
    )
    def test_an_ipc_event_belongs_to_the_bus_stream(self, event: Event) -> None:
        assert event.stream == "bus"

    def test_task_context_published_belongs_to_the_runtime_stream(self) -> None:
        event = TaskContextPublished(at=1.0, task_id="t1", context={"goal": "g"}, agents=("a1", "a2"))

        assert event.stream == "runtime"

    def test_a_prompt_rejected_without_an_agent_belongs_to_the_runtime_stream(self) -> None:
        event = PromptRejected(at=1.0, agent=None, length=9000, limit=8192)

        assert event.stream == "runtime"

    def test_a_prompt_rejected_for_an_agent_belongs_to_its_agent_stream(self) -> None:
        event = PromptRejected(at=1.0, agent="a1", length=9000, limit=8192)

        assert event.stream == "agent/a1"

    def test_a_failed_llm_call_belongs_to_its_agent_or_the_runtime_stream(self) -> None:
        for agent, stream in ((None, "runtime"), ("a1", "agent/a1")):
            event = LlmCallFailed(at=1.0, agent=agent, provider="p", model="m", prompt_hash="h", error="e")
            assert event.stream == stream

    def test_an_llm_output_without_an_agent_belongs_to_the_runtime_stream(self) -> None:
        event = LlmOutputRecorded(at=1.0, agent=None, provider="p", model="m", prompt_hash="h", output="o")

        assert event.stream == "runtime"

    def test_an_llm_output_for_an_agent_belongs_to_its_agent_stream(self) -> None:
        event = LlmOutputRecorded(at=1.0, agent="a1", provider="p", model="m", prompt_hash="h", output="o")

        assert event.stream == "agent/a1"

    def test_the_base_event_has_no_stream(self) -> None:
        event = Event(at=1.0)

        with pytest.raises(NotImplementedError):
            _ = event.stream


class TestEventFields:
    def test_an_event_is_frozen(self) -> None:
        event = PrivateSet(at=1.0, agent="a1", key="k", value=[1])

        with pytest.raises(AttributeError):
            event.key = "other"  # type: ignore[misc]

    def test_new_events_are_at_version_one_with_no_cause(self) -> None:
        event = SessionTouched(at=1.0, session="s1")

        assert event.v == 1
        assert event.cause is None

    def test_prompt_rejected_defaults_to_the_too_long_reason(self) -> None:
        assert PromptRejected(at=1.0, agent=None, length=2, limit=1).reason == "too_long"

    def test_agent_spawned_starts_with_the_zero_cognitive_state(self) -> None:
        event = AgentSpawned(at=1.0, agent="a1")

        assert event.cognitive == CognitiveState()
        assert event.task_context == {}
        assert event.capabilities == ()
        assert event.priority == 0.0

    def test_the_type_tag_is_the_class_name(self) -> None:
        record = msgspec.msgpack.decode(encode(SessionTouched(at=1.0, session="s1")))

        assert record["type"] == "SessionTouched"


class TestEventIds:
    def test_each_new_event_gets_a_different_id(self) -> None:
        ids = {SessionTouched(at=1.0, session="s").id for _ in range(10_000)}

        assert len(ids) == 10_000

    def test_an_explicit_id_is_kept(self) -> None:
        assert SessionTouched(at=1.0, session="s", id="given").id == "given"

    def test_ids_made_on_many_threads_at_once_are_unique(self) -> None:
        threads_count = 8
        per_thread = 2_000
        barrier = threading.Barrier(threads_count, timeout=5)
        results: list[list[str]] = [[] for _ in range(threads_count)]

        def make(slot: int) -> None:
            barrier.wait()
            results[slot].extend(new_event_id() for _ in range(per_thread))

        threads = [threading.Thread(target=make, args=(i,)) for i in range(threads_count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)

        assert not any(thread.is_alive() for thread in threads)
        all_ids = [event_id for chunk in results for event_id in chunk]
        assert len(all_ids) == threads_count * per_thread
        assert len(set(all_ids)) == len(all_ids)

    def test_ids_made_by_two_processes_differ(self) -> None:
        code = "from cogfabric.events import new_event_id; print(new_event_id())"

        first, second = (
            subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                encoding="utf-8",
                timeout=60,
                check=True,
            ).stdout.strip()
            for _ in range(2)
        )

        assert first
        assert first != second
