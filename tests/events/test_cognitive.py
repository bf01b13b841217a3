"""CognitiveState, decode_cognitive_state and upgrade_cognitive_state (spec §2.3, §2.4, §10)."""

from __future__ import annotations

import numbers
from fractions import Fraction
from typing import Any

import msgspec
import pytest

from cogfabric import CogfabricError
from cogfabric.events import (
    COGNITIVE_STATE_FIELDS,
    COGNITIVE_STATE_SCHEMA_VERSION,
    DEFAULT_CODEC,
    CognitiveState,
    CognitiveStateSchemaVersionError,
    EventError,
    EventVersionError,
    decode_cognitive_state,
    upgrade_cognitive_state,
)

MISMATCH = "schema version mismatch"


def full_state(version: int = 1) -> CognitiveState:
    return CognitiveState(
        schema_version=version,
        context={"goal": "ship"},
        observation="saw a thing",
        working_memory=[1, 2, {"note": "x"}],
        decision="go",
        tool_state={"tool": "search"},
        checkpoint={"step": 3},
    )


class TestCognitiveStateType:
    def test_the_current_schema_version_is_one(self) -> None:
        assert COGNITIVE_STATE_SCHEMA_VERSION == 1

    def test_the_zero_state_is_version_zero_with_every_field_none(self) -> None:
        state = CognitiveState()

        assert state.schema_version == 0
        assert all(getattr(state, name) is None for name in COGNITIVE_STATE_FIELDS)

    def test_the_six_fields_are_the_snake_case_names_of_the_original(self) -> None:
        names = tuple(f.name for f in msgspec.structs.fields(CognitiveState))

        assert COGNITIVE_STATE_FIELDS == (
            "context",
            "observation",
            "working_memory",
            "decision",
            "tool_state",
            "checkpoint",
        )
        assert names == ("schema_version", *COGNITIVE_STATE_FIELDS)

    def test_a_cognitive_state_is_frozen(self) -> None:
        state = full_state()

        with pytest.raises(AttributeError):
            state.decision = "stop"  # type: ignore[misc]

    def test_the_schema_version_error_is_a_value_error_and_a_cogfabric_error(self) -> None:
        assert issubclass(CognitiveStateSchemaVersionError, ValueError)
        assert issubclass(CognitiveStateSchemaVersionError, EventError)
        assert issubclass(CognitiveStateSchemaVersionError, CogfabricError)


class TestDecodeAcceptedInputs:
    def test_none_decodes_to_the_zero_state(self) -> None:
        state = decode_cognitive_state(None)

        assert state == CognitiveState()
        assert state.schema_version == 0

    def test_a_current_version_struct_is_returned_unchanged(self) -> None:
        original = full_state(1)

        state = decode_cognitive_state(original)

        assert state == original

    def test_a_version_zero_struct_is_not_upgraded_by_decode(self) -> None:
        original = CognitiveState(context="legacy")

        state = decode_cognitive_state(original)

        assert state.schema_version == 0
        assert state.context == "legacy"

    def test_a_mapping_with_float_schema_version_one_reads_the_snake_case_fields(self) -> None:
        mapping = {
            "schema_version": 1.0,
            "context": {"goal": "ship"},
            "observation": "saw",
            "working_memory": [1, 2],
            "decision": "go",
            "tool_state": {"t": 1},
            "checkpoint": {"step": 3},
        }

        state = decode_cognitive_state(mapping)

        assert state == CognitiveState(
            schema_version=1,
            context={"goal": "ship"},
            observation="saw",
            working_memory=[1, 2],
            decision="go",
            tool_state={"t": 1},
            checkpoint={"step": 3},
        )
        assert type(state.schema_version) is int

    def test_a_mapping_with_int_schema_version_one_reads_the_snake_case_fields(self) -> None:
        state = decode_cognitive_state({"schema_version": 1, "context": "c", "decision": "d"})

        assert state == CognitiveState(schema_version=1, context="c", decision="d")

    def test_a_mapping_with_schema_version_zero_stays_at_version_zero(self) -> None:
        state = decode_cognitive_state({"schema_version": 0, "context": "c"})

        assert state == CognitiveState(schema_version=0, context="c")

    def test_a_mapping_with_only_some_fields_leaves_the_others_none(self) -> None:
        state = decode_cognitive_state({"schema_version": 1, "working_memory": ["w"]})

        assert state.working_memory == ["w"]
        assert state.context is None
        assert state.checkpoint is None

    def test_a_mapping_without_schema_version_goes_whole_into_context_at_version_zero(self) -> None:
        state = decode_cognitive_state({"foo": 1})

        assert state == CognitiveState(schema_version=0, context={"foo": 1})

    def test_a_mapping_with_pascal_case_keys_and_no_schema_version_is_legacy(self) -> None:
        go_json = {"SchemaVersion": 1, "Context": "c"}

        state = decode_cognitive_state(go_json)

        assert state.schema_version == 0
        assert state.context == go_json

    @pytest.mark.parametrize(
        "value",
        [42, "opaque", 3.5, [1, 2, 3], b"raw", True],
        ids=["int", "str", "float", "list", "bytes", "bool"],
    )
    def test_any_other_value_goes_whole_into_context_at_version_zero(self, value: object) -> None:
        state = decode_cognitive_state(value)

        assert state.schema_version == 0
        assert state.context == value
        assert all(getattr(state, name) is None for name in COGNITIVE_STATE_FIELDS[1:])

    def test_decoding_forty_two_gives_context_forty_two(self) -> None:
        assert decode_cognitive_state(42).context == 42

    def test_a_state_survives_a_json_round_trip_through_its_snake_case_keys(self) -> None:
        original = full_state(1)

        state = decode_cognitive_state(msgspec.json.decode(msgspec.json.encode(original)))

        assert state == original

    def test_a_state_survives_a_msgpack_round_trip_through_its_snake_case_keys(self) -> None:
        original = full_state(1)

        state = decode_cognitive_state(msgspec.msgpack.decode(msgspec.msgpack.encode(original)))

        assert state == original

    def test_a_state_survives_a_round_trip_through_to_builtins(self) -> None:
        original = full_state(0)

        state = decode_cognitive_state(msgspec.to_builtins(original))

        assert state == original


class TestDecodeRejections:
    def test_a_struct_with_version_two_raises_a_schema_version_mismatch(self) -> None:
        with pytest.raises(CognitiveStateSchemaVersionError, match=MISMATCH):
            decode_cognitive_state(CognitiveState(schema_version=2))

    def test_a_mapping_with_version_two_raises_a_schema_version_mismatch(self) -> None:
        with pytest.raises(CognitiveStateSchemaVersionError, match=MISMATCH):
            decode_cognitive_state({"schema_version": 2, "context": "c"})

    def test_a_mapping_with_float_version_two_raises_a_schema_version_mismatch(self) -> None:
        with pytest.raises(CognitiveStateSchemaVersionError, match=MISMATCH):
            decode_cognitive_state({"schema_version": 2.0})

    def test_a_struct_with_a_negative_version_is_returned_as_it_is(self) -> None:
        state = CognitiveState(schema_version=-1, context="c")

        assert decode_cognitive_state(state) is state

    def test_a_mapping_with_a_negative_version_is_accepted_as_in_the_original(self) -> None:
        state = decode_cognitive_state({"schema_version": -1, "context": "c"})

        assert state == CognitiveState(schema_version=-1, context="c")

    def test_every_refusal_starts_with_the_originals_sentinel_string(self) -> None:
        for value in ({"schema_version": 2}, {"schema_version": "1"}, {"schema_version": 1, "mood": 1}):
            with pytest.raises(CognitiveStateSchemaVersionError) as info:
                decode_cognitive_state(value)
            assert str(info.value).startswith("agentfabric: cognitive state schema version mismatch: ")

    @pytest.mark.parametrize(
        "version",
        ["1", "0", True, False, None, [1], {"v": 1}, b"1"],
        ids=["str-1", "str-0", "true", "false", "none", "list", "dict", "bytes"],
    )
    def test_a_non_numeric_schema_version_raises_instead_of_reading_as_zero(self, version: object) -> None:
        with pytest.raises(CognitiveStateSchemaVersionError, match=MISMATCH):
            decode_cognitive_state({"schema_version": version})

    @pytest.mark.parametrize(
        "version",
        [1.5, -0.5, float("nan"), float("inf"), float("-inf")],
        ids=["one-and-a-half", "minus-half", "nan", "inf", "minus-inf"],
    )
    def test_a_schema_version_that_is_not_a_whole_number_raises(self, version: float) -> None:
        with pytest.raises(CognitiveStateSchemaVersionError, match=MISMATCH):
            decode_cognitive_state({"schema_version": version})

    def test_a_whole_schema_version_of_any_real_number_type_is_read(self) -> None:
        # a NumPy integer or a Fraction is a number too (numbers.Real), if whole
        assert decode_cognitive_state({"schema_version": Fraction(2, 2), "context": "c"}).schema_version == 1
        for version in (Fraction(3, 2), Fraction(10**400, 3)):
            with pytest.raises(CognitiveStateSchemaVersionError, match=MISMATCH):
                decode_cognitive_state({"schema_version": version})

    def test_a_whole_schema_version_of_an_integer_type_without_trunc_is_read(self) -> None:
        # NumPy's integers are numbers.Integral with __index__ but no __trunc__
        assert decode_cognitive_state({"schema_version": _IndexOnly(1), "context": "c"}).schema_version == 1
        assert decode_cognitive_state({"schema_version": _IndexOnly(0)}).schema_version == 0
        with pytest.raises(CognitiveStateSchemaVersionError, match=MISMATCH):
            decode_cognitive_state({"schema_version": _IndexOnly(2)})

    def test_unknown_keys_in_a_versioned_mapping_raise_instead_of_being_dropped(self) -> None:
        with pytest.raises(ValueError, match="unknown cognitive state keys") as info:
            decode_cognitive_state({"schema_version": 1, "context": "c", "mood": "happy"})

        assert "mood" in str(info.value)
        assert isinstance(info.value, CognitiveStateSchemaVersionError)

    def test_pascal_case_keys_in_a_versioned_mapping_raise(self) -> None:
        with pytest.raises(ValueError, match="Context"):
            decode_cognitive_state({"schema_version": 1, "Context": "c"})

    def test_a_non_string_key_in_a_versioned_mapping_raises(self) -> None:
        with pytest.raises(ValueError, match="unknown cognitive state keys"):
            decode_cognitive_state({"schema_version": 1, 7: "c"})

    def test_a_future_version_is_reported_before_unknown_keys(self) -> None:
        with pytest.raises(CognitiveStateSchemaVersionError, match=MISMATCH):
            decode_cognitive_state({"schema_version": 2, "brand_new_field": 1})


class TestCognitiveStateSchemaVersionMigration:
    """Port of the original's table test (a2_schema_test.go); Go pointers have no Python twin."""

    @pytest.mark.parametrize(
        ("value", "expected_version"),
        [
            (CognitiveState(schema_version=1, context="c"), 1),
            (CognitiveState(schema_version=0, context="c"), 0),
            ({"schema_version": 1.0, "context": "c"}, 1),
        ],
        ids=["current-version", "zero-version", "map-with-float-version"],
    )
    def test_accepted_inputs_decode_with_their_context(self, value: object, expected_version: int) -> None:
        state = decode_cognitive_state(value)

        assert state.schema_version == expected_version
        assert state.context == "c"

    @pytest.mark.parametrize(
        "value",
        [CognitiveState(schema_version=2, context="c"), {"schema_version": 2, "context": "c"}],
        ids=["struct-version-2", "map-version-2"],
    )
    def test_future_versions_are_rejected(self, value: object) -> None:
        with pytest.raises(CognitiveStateSchemaVersionError, match=MISMATCH):
            decode_cognitive_state(value)


class TestUpgradeCognitiveState:
    def test_version_zero_is_upgraded_to_the_current_version_keeping_the_fields(self) -> None:
        original = full_state(0)

        upgraded = upgrade_cognitive_state(original)

        assert upgraded.schema_version == COGNITIVE_STATE_SCHEMA_VERSION
        assert msgspec.structs.replace(upgraded, schema_version=0) == original
        assert original.schema_version == 0

    def test_the_current_version_is_returned_as_it_is(self) -> None:
        original = full_state(1)

        assert upgrade_cognitive_state(original) == original

    @pytest.mark.parametrize("version", [2, 99], ids=["two", "ninety-nine"])
    def test_a_version_it_cannot_replay_is_refused_on_write(self, version: int) -> None:
        with pytest.raises(CognitiveStateSchemaVersionError, match=MISMATCH):
            upgrade_cognitive_state(CognitiveState(schema_version=version))

    @pytest.mark.parametrize(
        "version",
        [True, 1.0, 0.5, type("MyInt", (int,), {})(1)],
        ids=["bool", "float-one", "half", "int-subclass"],
    )
    def test_a_version_that_is_not_an_int_is_refused_on_write(self, version: Any) -> None:
        with pytest.raises(CognitiveStateSchemaVersionError, match="must be an int") as info:
            upgrade_cognitive_state(CognitiveState(schema_version=version))
        assert isinstance(info.value, TypeError)

    def test_a_negative_version_is_stored_as_it_is_as_in_the_original(self) -> None:
        state = CognitiveState(schema_version=-1, context="c")

        assert upgrade_cognitive_state(state) == state

    @pytest.mark.parametrize(
        "value",
        [None, {"schema_version": 0}, 42],
        ids=["none", "mapping", "int"],
    )
    def test_a_value_that_is_not_a_cognitive_state_raises_type_error(self, value: Any) -> None:
        with pytest.raises(TypeError, match="expected a CognitiveState"):
            upgrade_cognitive_state(value)

    def test_a_subclass_with_fields_of_its_own_is_refused_as_they_would_be_lost(self) -> None:
        class WithMood(CognitiveState, frozen=True, kw_only=True):
            mood: str = ""

        class Plain(CognitiveState, frozen=True, kw_only=True):
            pass

        with pytest.raises(TypeError, match=r"fields of its own \(mood\)"):
            upgrade_cognitive_state(WithMood(schema_version=1, mood="anxious"))
        assert upgrade_cognitive_state(Plain(schema_version=1, context="c")).context == "c"

    @pytest.mark.parametrize(
        ("event_type", "field"),
        [("CognitiveStateSet", "state"), ("CheckpointTaken", "state"), ("AgentSpawned", "cognitive")],
    )
    def test_a_record_holding_a_state_of_a_newer_schema_version_names_both_versions(
        self, event_type: str, field: str
    ) -> None:
        # As a newer cogfabric would store it: the event at its version 1, the state at 2.
        raw = {"type": event_type, "v": 1, "at": 1.0, "id": "x", "agent": "a"}
        raw[field] = {"schema_version": COGNITIVE_STATE_SCHEMA_VERSION + 1, "context": "c"}

        with pytest.raises(CognitiveStateSchemaVersionError) as info:
            DEFAULT_CODEC.decode(msgspec.msgpack.encode(raw))

        assert isinstance(info.value, EventVersionError)
        assert (info.value.stored, info.value.known) == (COGNITIVE_STATE_SCHEMA_VERSION + 1, 1)
        assert f"{event_type}.{field}" in str(info.value)


class _IndexOnly:
    """An integer type as NumPy's are: numbers.Integral, with __index__ but no __trunc__."""

    def __init__(self, value: int) -> None:
        self._value = value

    def __index__(self) -> int:
        return self._value

    def __eq__(self, other: object) -> bool:
        return self._value == other

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return f"_IndexOnly({self._value})"


numbers.Integral.register(_IndexOnly)
