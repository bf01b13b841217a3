"""Pins of the event model's promises that no other test held (found by mutation testing).

The events' layers and defaults, their ids in a forked child, their garbage-collector
opt-out, and the cognitive state's version bounds and accepted inputs.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import types
from pathlib import Path

import msgspec
import pytest

import cogfabric
from cogfabric.events import (
    DEFAULT_CODEC,
    EVENT_TYPES,
    AgentKilled,
    AgentSpawned,
    CognitiveState,
    CognitiveStateSchemaVersionError,
    CognitiveStateSet,
    ContextLayer,
    Event,
    EventDecodeError,
    IpcDeadLettered,
    IpcMessage,
    IpcSubscribed,
    PrivateSet,
    decode_cognitive_state,
    upgrade_cognitive_state,
)

LEAST = -(2**63)
"""The least version an int64 holds (README: a version below it is refused)."""

# The types whose fields hold a layer beyond their own ``layer`` (README, export --layer).
EXTRA_LAYERS = {
    AgentSpawned: frozenset({ContextLayer.TASK_SHARED, ContextLayer.AGENT_PRIVATE}),
    AgentKilled: frozenset({ContextLayer.AGENT_PRIVATE}),
}

FORKED_IDS = """
import os
from cogfabric.events import new_event_id

before = [new_event_id() for _ in range(3)]
read_end, write_end = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write_end, " ".join(new_event_id() for _ in range(3)).encode())
    os._exit(0)
os.close(write_end)
child = os.read(read_end, 4096).decode().split()
os.waitpid(pid, 0)
after = [new_event_id() for _ in range(3)]
print(" ".join(before + after))
print(" ".join(child))
"""


class TestLayers:
    # README (export --layer): a spawn is in task_shared and agent_private, a kill in agent_private
    def test_a_spawn_and_a_kill_hold_the_layers_of_their_fields(self) -> None:
        assert AgentSpawned.layer is ContextLayer.TASK_SHARED
        assert AgentSpawned.layers == {ContextLayer.TASK_SHARED, ContextLayer.AGENT_PRIVATE}
        assert AgentKilled.layer is None
        assert AgentKilled.layers == {ContextLayer.AGENT_PRIVATE}

    # Event.layers docstring: ``layer``'s own when a type declares no more, none for a type of no layer
    @pytest.mark.parametrize("cls", EVENT_TYPES, ids=lambda cls: cls.__name__)
    def test_every_other_type_holds_its_own_layer_alone(self, cls: type[Event]) -> None:
        own = frozenset() if cls.layer is None else frozenset({cls.layer})
        assert cls.layers == EXTRA_LAYERS.get(cls, own)


class TestEventObjects:
    # Event docstring: events are not tracked by Python's cyclic garbage collector (gc=False)
    def test_an_event_is_not_tracked_by_the_garbage_collector(self) -> None:
        assert not gc.is_tracked(PrivateSet(at=1.0, agent="a", key="k", value={"nested": [1]}))
        assert not gc.is_tracked(AgentSpawned(at=1.0, agent="a", task_context={"goal": "x"}))

    # _new_prefix docstring: a forked child gets ids of its own (else the journal drops them as retries)
    def test_a_forked_child_makes_ids_its_parent_never_makes(self) -> None:
        source = str(Path(cogfabric.__file__).resolve().parents[1])
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")])),
        }
        out = subprocess.run(
            [sys.executable, "-c", FORKED_IDS],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=True,
            env=env,
        ).stdout.splitlines()
        parent, child = out[0].split(), out[1].split()
        assert len(parent) == 6
        assert len(child) == 3
        assert not set(parent) & set(child)

    # IpcMessage docstring: kind is send, request, reply or broadcast; the bus's send leaves it to the default
    def test_an_ipc_message_made_without_a_kind_is_a_send(self) -> None:
        assert IpcMessage(at=1.0, sender="a", recipient="b", topic="t").kind == "send"


class TestRecords:
    # IpcDeadLettered docstring: records written before payload and trace_id read them as None and ""
    def test_a_dead_letter_written_before_its_payload_and_trace_id_reads_them_as_none_and_empty(self) -> None:
        raw = msgspec.to_builtins(
            IpcDeadLettered(at=1.0, message_id="m", sender="a", recipient="b", topic="t", reason="timeout")
        )
        del raw["payload"], raw["trace_id"], raw["error"]
        event = DEFAULT_CODEC.decode(msgspec.msgpack.encode(raw))
        assert isinstance(event, IpcDeadLettered)
        assert event.payload is None
        assert event.trace_id == ""
        assert event.error == ""

    # IpcSubscribed docstring: order is a count of subscriptions (0 the least); below it does not decode
    def test_a_negative_subscription_order_does_not_decode(self) -> None:
        raw = msgspec.to_builtins(IpcSubscribed(at=0.0, agent="a", topic="t"))
        raw["order"] = 0
        assert DEFAULT_CODEC.decode(msgspec.msgpack.encode(raw)) == IpcSubscribed(
            at=0.0, agent="a", topic="t", id=raw["id"]
        )
        raw["order"] = -1
        with pytest.raises(EventDecodeError, match="order"):
            DEFAULT_CODEC.decode(msgspec.msgpack.encode(raw))

    # upgrade_cognitive_state docstring, spec §2.3: a negative version is stored as it is, so it replays
    @pytest.mark.parametrize("version", [-1, LEAST], ids=["minus-one", "least-int64"])
    def test_a_state_of_a_negative_version_is_journaled_and_replays(self, version: int) -> None:
        state = upgrade_cognitive_state(CognitiveState(schema_version=version, decision="d"))
        assert state.schema_version == version
        event = CognitiveStateSet(at=1.0, agent="a", state=state)
        assert DEFAULT_CODEC.decode(DEFAULT_CODEC.encode(event)) == event


class TestCognitiveStateBounds:
    # README: a cognitive state's schema_version below what an int64 holds is refused
    def test_a_version_below_an_int64_is_refused_on_write_and_on_decode(self) -> None:
        with pytest.raises(CognitiveStateSchemaVersionError, match=str(LEAST - 1)):
            upgrade_cognitive_state(CognitiveState(schema_version=LEAST - 1))
        with pytest.raises(CognitiveStateSchemaVersionError, match=str(LEAST - 1)):
            decode_cognitive_state({"schema_version": LEAST - 1})
        with pytest.raises(CognitiveStateSchemaVersionError, match=str(LEAST - 1)):
            decode_cognitive_state(CognitiveState(schema_version=LEAST - 1))

    # decode_cognitive_state docstring: a negative version is accepted, down to the least an int64 holds
    def test_the_least_int64_version_is_accepted_on_decode(self) -> None:
        assert decode_cognitive_state({"schema_version": LEAST}).schema_version == LEAST
        state = CognitiveState(schema_version=LEAST)
        assert decode_cognitive_state(state) is state


class TestDecodeInputs:
    # decode_cognitive_state docstring: "a mapping" (any Mapping) with schema_version reads the fields
    def test_a_read_only_mapping_with_a_version_reads_its_fields(self) -> None:
        value = types.MappingProxyType({"schema_version": 1, "decision": "go", "checkpoint": 3})
        assert decode_cognitive_state(value) == CognitiveState(schema_version=1, decision="go", checkpoint=3)

    # decode_cognitive_state docstring: a mapping without schema_version is put whole into context
    def test_a_read_only_mapping_without_a_version_goes_whole_into_context(self) -> None:
        value = types.MappingProxyType({"goal": "x"})
        assert decode_cognitive_state(value).context is value

    # decode_cognitive_state docstring: a CognitiveState (a subclass adding no field too) is returned as is
    def test_a_subclass_without_fields_of_its_own_is_returned_as_it_is(self) -> None:
        class Tagged(CognitiveState, frozen=True, kw_only=True):
            """A subclass adding no field."""

        state = Tagged(schema_version=1, decision="d")
        assert decode_cognitive_state(state) is state
        with pytest.raises(CognitiveStateSchemaVersionError):
            decode_cognitive_state(Tagged(schema_version=2))
