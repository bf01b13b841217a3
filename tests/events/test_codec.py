"""The event codec: round trips, errors on bad input, and value copies across layers."""

from __future__ import annotations

import collections
import collections.abc
import types
from typing import Any, Literal, get_args, get_origin

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cogfabric import CogfabricError
from cogfabric.events import (
    DEFAULT_CODEC,
    EVENT_TYPES,
    MAX_VALUE_DEPTH,
    AgentFailed,
    AgentKilled,
    AgentRecovered,
    AgentSpawned,
    CheckpointTaken,
    CognitiveState,
    CognitiveStateSet,
    Event,
    EventDecodeError,
    EventError,
    EventVersionError,
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
    SessionEvicted,
    SessionExpired,
    SessionMessageAdded,
    SessionTouched,
    TaskContextPublished,
    TaskContextSet,
    ToolCall,
    ToolCallFunction,
    UnencodableValueError,
    UnknownEventTypeError,
    admit_mapping,
    admit_value,
    copy_mapping,
    copy_value,
    decode,
    encode,
    encode_value,
)
from cogfabric.events._codec import journal_repr, journal_text

STATE = CognitiveState(
    schema_version=1,
    context={"goal": "ship"},
    observation="obs",
    working_memory=[1, 2.5, {"k": [True, None]}],
    decision="go",
    tool_state={"search": {"page": 2}},
    checkpoint=b"\x00\x01",
)
MESSAGE = Message(
    role="assistant",
    content="calling",
    time=12.5,
    turn_id="t1",
    tool_calls=[ToolCall(id="c1", function=ToolCallFunction(name="search", arguments='{"q": 1}'))],
    event_kind="tool",
    parent_id="m0",
    artifact_refs=["art-1", "art-2"],
)
COMMON: dict[str, Any] = {"at": 1700000000.25, "cause": "cause-id"}

# One instance of every event type, with non-default values wherever there is a field.
SAMPLES: tuple[Event, ...] = (
    AgentSpawned(
        **COMMON,
        agent="a1",
        task_id="task",
        parent="p0",
        capabilities=("search", "write"),
        priority=2.0,
        task_context={"goal": "g", "nested": {"x": [1, 2]}},
        cognitive=STATE,
        behavior="echo",
    ),
    LifecycleChanged(**COMMON, agent="a1", state="SUSPENDED", previous="IDLE"),
    AgentKilled(**COMMON, agent="a1", cognitive=STATE, capabilities=("search",), parent="p0"),
    AgentRecovered(**COMMON, agent="a1", cognitive=STATE, has_checkpoint=True),
    AgentFailed(**COMMON, agent="a1", error="RuntimeError", detail="boom"),
    TaskContextSet(**COMMON, agent="a1", context={"goal": "g2"}),
    TaskContextPublished(**COMMON, task_id="task", context={"goal": "g3"}, agents=("a1", "a2")),
    PrivateSet(**COMMON, agent="a1", key="hypothesis", value={"h": [1, "two", 3.0, None, False]}),
    CognitiveStateSet(**COMMON, agent="a1", state=STATE),
    CheckpointTaken(**COMMON, agent="a1", state=STATE),
    IpcSubscribed(**COMMON, agent="a1", topic="news"),
    IpcUnsubscribed(**COMMON, agent="a1", topic="news"),
    IpcMessage(
        **COMMON,
        sender="a1",
        recipient="a2",
        topic="ask",
        payload={"q": "why"},
        correlation_id="corr",
        trace_id="trace",
    ),
    IpcDelivered(**COMMON, message_id="m1", recipient="a2"),
    IpcDeadLettered(
        **COMMON, message_id="m1", sender="a1", recipient="a9", topic="ask", reason="no_agent", error="E"
    ),
    SessionCreated(**COMMON, session="s1", user_id="u1", agent_id="a1", seed=MESSAGE),
    SessionMessageAdded(**COMMON, session="s1", message=MESSAGE),
    SessionTouched(**COMMON, session="s1"),
    SessionDeleted(**COMMON, session="s1"),
    SessionExpired(**COMMON, session="s1"),
    SessionEvicted(**COMMON, session="s1"),
    PromptRejected(**COMMON, agent="a1", length=9000, limit=8192, reason="too_long"),
    LlmOutputRecorded(
        **COMMON, agent="a1", provider="openai", model="m", prompt_hash="h", output="o", session="s1"
    ),
    LlmCallFailed(
        **COMMON, agent="a1", provider="openai", model="m", prompt_hash="h", error="e", session="s1"
    ),
)


def sample_id(event: Event) -> str:
    return type(event).__name__


def raw_record(**fields: Any) -> bytes:
    return msgspec.msgpack.encode(fields)


PRIVATE_SET_RECORD: dict[str, Any] = {
    "type": "PrivateSet",
    "v": 1,
    "at": 1.0,
    "id": "x",
    "agent": "a",
    "key": "k",
    "value": None,
}


class TestRoundTrip:
    def test_the_samples_cover_every_event_type_once(self) -> None:
        types_of_samples = [type(event) for event in SAMPLES]

        assert len(types_of_samples) == len(set(types_of_samples))
        assert set(types_of_samples) == set(EVENT_TYPES)

    @pytest.mark.parametrize("event", SAMPLES, ids=sample_id)
    def test_every_event_type_round_trips_through_encode_and_decode(self, event: Event) -> None:
        data = encode(event)

        decoded = decode(data)

        assert type(decoded) is type(event)
        assert decoded == event

    @pytest.mark.parametrize("event", SAMPLES, ids=sample_id)
    def test_every_event_type_decodes_from_a_memoryview(self, event: Event) -> None:
        assert decode(memoryview(encode(event))) == event

    @pytest.mark.parametrize("event", SAMPLES, ids=sample_id)
    def test_every_event_is_frozen(self, event: Event) -> None:
        with pytest.raises(AttributeError):
            event.at = 0.0  # type: ignore[misc]

    @pytest.mark.parametrize("cls", EVENT_TYPES, ids=lambda cls: cls.__name__)
    def test_every_event_type_round_trips_with_only_its_required_fields(self, cls: type[Event]) -> None:
        required = {f.name: f.type for f in msgspec.structs.fields(cls) if f.required and f.name != "at"}
        values: dict[str, Any] = {}
        for name, annotation in required.items():
            if annotation is CognitiveState:
                values[name] = CognitiveState(schema_version=1)
            elif annotation is Message:
                values[name] = Message(role="user", content="hi")
            elif annotation is int:
                values[name] = 3
            elif name == "context":
                values[name] = {}
            elif get_origin(annotation) is Literal:
                values[name] = get_args(annotation)[0]
            else:
                values[name] = "x"
        event = cls(at=2.0, **values)

        assert decode(encode(event)) == event

    def test_the_module_functions_use_the_default_codec(self) -> None:
        event = SAMPLES[0]

        assert encode(event) == DEFAULT_CODEC.encode(event)
        assert DEFAULT_CODEC.decode(encode(event)) == event
        assert set(DEFAULT_CODEC.types.values()) == set(EVENT_TYPES)

    def test_an_encoded_record_carries_its_type_tag_version_and_id(self) -> None:
        event = PrivateSet(at=1.0, agent="a", key="k", value=[1])

        record = msgspec.msgpack.decode(encode(event))

        assert record["type"] == "PrivateSet"
        assert record["v"] == 1
        assert record["id"] == event.id

    @given(
        value=st.recursive(
            st.none()
            | st.booleans()
            | st.integers(min_value=-(2**63), max_value=2**64 - 1)
            | st.floats(allow_nan=False)
            | st.text()
            | st.binary(),
            lambda children: (
                st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
            ),
            max_leaves=20,
        ),
        key=st.text(),
        at=st.floats(allow_nan=False),
    )
    def test_a_private_set_with_any_json_like_value_round_trips(
        self, value: Any, key: str, at: float
    ) -> None:
        event = PrivateSet(at=at, agent="a1", key=key, value=value)

        assert decode(encode(event)) == event


class TestDecodeErrors:
    def test_the_decode_errors_are_value_errors_and_cogfabric_errors(self) -> None:
        for cls in (EventDecodeError, UnknownEventTypeError, EventVersionError):
            assert issubclass(cls, EventDecodeError)
            assert issubclass(cls, ValueError)
            assert issubclass(cls, EventError)
            assert issubclass(cls, CogfabricError)

    def test_an_unknown_type_tag_raises_an_error_naming_the_tag(self) -> None:
        data = raw_record(**{**PRIVATE_SET_RECORD, "type": "NoSuchEvent"})

        with pytest.raises(UnknownEventTypeError, match="NoSuchEvent") as info:
            decode(data)

        assert info.value.type_name == "NoSuchEvent"

    def test_a_record_newer_than_known_raises_an_error_naming_the_type_and_both_versions(self) -> None:
        data = raw_record(**{**PRIVATE_SET_RECORD, "v": 7})

        with pytest.raises(EventVersionError) as info:
            decode(data)

        message = str(info.value)
        assert "PrivateSet" in message
        assert "7" in message
        assert "1" in message
        assert "newer" in message
        assert (info.value.type_name, info.value.stored, info.value.known) == ("PrivateSet", 7, 1)

    def test_a_newer_record_whose_fields_changed_still_raises_the_version_error(self) -> None:
        data = raw_record(type="PrivateSet", v=2, at=1.0, id="x", agent="a", renamed_key="k")

        with pytest.raises(EventVersionError, match="PrivateSet"):
            decode(data)

    def test_an_older_record_with_no_upcaster_raises_the_version_error(self) -> None:
        data = raw_record(**{**PRIVATE_SET_RECORD, "v": 0})

        with pytest.raises(EventVersionError, match="not upgradable") as info:
            decode(data)

        assert (info.value.stored, info.value.known) == (0, 1)

    @pytest.mark.parametrize(
        "data",
        [b"", b"\xff", b"garbage", b"\x80", b"\x90", b"\xc1", b"\x91\xa4type"],
        ids=["empty", "ff", "garbage", "empty-map", "empty-array", "never-used", "array"],
    )
    def test_garbage_bytes_raise_an_event_decode_error(self, data: bytes) -> None:
        with pytest.raises(EventDecodeError):
            decode(data)

    @pytest.mark.parametrize("event", SAMPLES, ids=sample_id)
    def test_every_truncation_of_a_record_raises_an_event_decode_error(self, event: Event) -> None:
        data = encode(event)

        for end in range(len(data)):
            with pytest.raises(EventDecodeError):
                decode(data[:end])

    def test_trailing_bytes_after_a_record_raise_an_event_decode_error(self) -> None:
        with pytest.raises(EventDecodeError):
            decode(encode(SAMPLES[0]) + b"\xc0")

    @pytest.mark.parametrize(
        "record",
        [
            {"v": 1, "at": 1.0},
            {"type": 5, "at": 1.0},
            {**PRIVATE_SET_RECORD, "v": "1"},
            {**PRIVATE_SET_RECORD, "v": True},
            {**PRIVATE_SET_RECORD, "v": 1.0},
            {**PRIVATE_SET_RECORD, "at": "yesterday"},
            {k: v for k, v in PRIVATE_SET_RECORD.items() if k != "agent"},
        ],
        ids=[
            "no-tag",
            "int-tag",
            "str-version",
            "bool-version",
            "float-version",
            "bad-field",
            "missing-field",
        ],
    )
    def test_a_malformed_record_raises_an_event_decode_error(self, record: dict[str, Any]) -> None:
        with pytest.raises(EventDecodeError) as info:
            decode(raw_record(**record))

        assert not isinstance(info.value, EventVersionError | UnknownEventTypeError)

    def test_a_deeply_nested_value_raises_an_event_decode_error_not_a_recursion_error(self) -> None:
        head = raw_record(**PRIVATE_SET_RECORD)
        assert head.endswith(b"\xa5value\xc0")
        data = head[:-1] + b"\x91" * 100_000 + b"\xc0"

        with pytest.raises(EventDecodeError) as info:
            decode(data)

        assert not isinstance(info.value, RecursionError)

    def test_a_deeply_nested_value_on_the_slow_path_raises_an_event_decode_error(self) -> None:
        head = raw_record(**{**PRIVATE_SET_RECORD, "v": 0})
        data = head[:-1] + b"\x91" * 100_000 + b"\xc0"

        with pytest.raises(EventDecodeError):
            decode(data)

    @given(data=st.binary(max_size=200))
    def test_arbitrary_bytes_either_decode_or_raise_an_event_decode_error(self, data: bytes) -> None:
        try:
            event = decode(data)
        except EventDecodeError:
            return
        assert isinstance(event, Event)

    @given(
        sample=st.sampled_from(SAMPLES),
        position=st.integers(min_value=0),
        byte=st.integers(min_value=0, max_value=255),
    )
    def test_a_record_with_one_corrupted_byte_decodes_or_raises_an_event_decode_error(
        self, sample: Event, position: int, byte: int
    ) -> None:
        data = bytearray(encode(sample))
        data[position % len(data)] = byte

        try:
            event = decode(bytes(data))
        except EventDecodeError:
            return
        assert isinstance(event, Event)

    @given(
        record=st.dictionaries(
            st.sampled_from(["type", "v", "at", "id", "agent", "key", "value", "session", "state", "extra"]),
            st.none()
            | st.booleans()
            | st.integers(min_value=-(2**63), max_value=2**64 - 1)
            | st.floats()
            | st.text(max_size=5)
            | st.sampled_from([cls.__name__ for cls in EVENT_TYPES]),
        )
    )
    def test_a_mapping_of_arbitrary_fields_decodes_or_raises_an_event_decode_error(
        self, record: dict[str, Any]
    ) -> None:
        try:
            event = decode(msgspec.msgpack.encode(record))
        except EventDecodeError:
            return
        assert isinstance(event, Event)


class TestEncodeErrors:
    @pytest.mark.parametrize(
        "value",
        [object(), 2**70, -(2**64), complex(1, 2)],
        ids=["object", "huge-int", "huge-negative-int", "complex"],
    )
    def test_an_event_holding_an_unencodable_value_raises_unencodable_value_error(
        self, value: object
    ) -> None:
        event = PrivateSet(at=1.0, agent="a", key="k", value=value)

        with pytest.raises(UnencodableValueError, match="PrivateSet"):
            encode(event)

    def test_an_event_holding_a_too_deeply_nested_value_raises_unencodable_value_error(self) -> None:
        value: list[Any] = []
        for _ in range(100_000):
            value = [value]

        with pytest.raises(UnencodableValueError):
            encode(PrivateSet(at=1.0, agent="a", key="k", value=value))

    @pytest.mark.parametrize("value", [1, {"type": "PrivateSet"}, None], ids=["int", "dict", "none"])
    def test_a_value_that_is_no_event_is_refused_not_encoded(self, value: object) -> None:
        # encode(1) returned b"\x01", which decode then refused: the error came a step late
        with pytest.raises(TypeError, match=f"only events are encoded here, not {type(value).__name__}"):
            encode(value)  # type: ignore[arg-type]


def _nested(levels: int, leaf: object = 0) -> object:
    """``leaf`` inside ``levels`` lists."""
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


class TestAdmittedDepth:
    """Values entering a layer nest at most MAX_VALUE_DEPTH lists and maps, wherever the caller is."""

    def test_a_value_at_the_limit_is_admitted_and_one_level_more_refused(self) -> None:
        assert admit_value(_nested(MAX_VALUE_DEPTH)) == _nested(MAX_VALUE_DEPTH)
        with pytest.raises(UnencodableValueError, match=f"deeper than {MAX_VALUE_DEPTH} levels"):
            admit_value(_nested(MAX_VALUE_DEPTH + 1))

    def test_maps_and_the_mapping_itself_count_as_levels(self) -> None:
        inner = _nested(MAX_VALUE_DEPTH - 2, {"leaf": 1})  # MAX - 1 levels
        assert admit_mapping({"k": inner}) == {"k": inner}
        with pytest.raises(UnencodableValueError, match="deeper than"):
            admit_mapping({"k": [inner]})
        with pytest.raises(UnencodableValueError, match="deeper than"):
            admit_value({"k": [inner]})

    def test_tuples_as_map_keys_count_as_levels(self) -> None:
        key: object = 1
        for _ in range(MAX_VALUE_DEPTH):
            key = (key,)
        with pytest.raises(UnencodableValueError, match="deeper than"):
            admit_value({key: "v"})  # the map, then the key's tuples

    def test_a_value_too_deep_for_any_encoding_is_refused_naming_the_limit(self) -> None:
        # Refused by msgspec's recursion guard ("too deeply ... may nest N levels"), or, where
        # the interpreter's recursion limit was raised (hypothesis raises it while it runs),
        # encoded and then refused by the depth check ("deeper than N levels"): seen once.
        limit = f"(too deeply .* nest|deeper than) {MAX_VALUE_DEPTH} levels"
        with pytest.raises(UnencodableValueError, match=limit):
            admit_value(_nested(5000))

    @pytest.mark.parametrize(
        "value",
        [
            [i * 0.37 for i in range(3000)],  # float bytes that look like list and map headers
            [[i, [i]] for i in range(1000)],  # many lists, two deep
            {f"k{i}": {"v": [i]} for i in range(1000)},
            "\u0080" * 5000,
        ],
        ids=["floats", "many-lists", "many-maps", "text"],
    )
    def test_a_wide_shallow_value_is_admitted(self, value: object) -> None:
        assert admit_value(value) == copy_value(value)

    def test_a_copy_for_reading_does_not_check_the_depth(self) -> None:
        # what is read out was admitted on the way in; copy_value stays the lean path
        assert copy_value(_nested(MAX_VALUE_DEPTH + 1)) == _nested(MAX_VALUE_DEPTH + 1)


class TestCopyValue:
    def test_a_copied_nested_list_does_not_change_when_the_original_does(self) -> None:
        original: dict[str, Any] = {"items": [1, [2, 3]], "meta": {"tags": ["a"]}}

        copy = copy_value(original)
        original["items"][1].append(4)
        original["meta"]["tags"].clear()

        assert copy == {"items": [1, [2, 3]], "meta": {"tags": ["a"]}}

    def test_a_copy_is_a_new_object_all_the_way_down(self) -> None:
        original: dict[str, Any] = {"a": [{"b": [1]}]}

        copy = copy_value(original)

        assert copy == original
        assert copy is not original
        assert copy["a"] is not original["a"]
        assert copy["a"][0]["b"] is not original["a"][0]["b"]

    @pytest.mark.parametrize(
        "value",
        [None, True, 0, -(2**63), 2**64 - 1, 1.5, "text", b"bytes", [1, "x"], {"k": None}],
        ids=["none", "bool", "zero", "min-int", "max-uint", "float", "str", "bytes", "list", "dict"],
    )
    def test_an_encodable_scalar_or_container_copies_to_an_equal_value(self, value: object) -> None:
        assert copy_value(value) == value

    def test_a_tuple_comes_back_as_a_list(self) -> None:
        assert copy_value((1, (2, 3))) == [1, [2, 3]]

    def test_a_struct_comes_back_as_a_dict(self) -> None:
        assert copy_value(ToolCallFunction(name="f", arguments="{}")) == {"name": "f", "arguments": "{}"}

    def test_a_set_comes_back_as_a_list(self) -> None:
        assert sorted(copy_value({3, 1, 2})) == [1, 2, 3]

    @pytest.mark.parametrize(
        "value",
        [object(), 2**70, complex(1, 1), {"k": object()}, [1, object()], {"deep": [{"er": 2**64}]}],
        ids=["object", "huge-int", "complex", "object-in-dict", "object-in-list", "huge-int-nested"],
    )
    def test_an_unencodable_value_raises_unencodable_value_error(self, value: object) -> None:
        with pytest.raises(UnencodableValueError, match="cannot cross a context layer"):
            copy_value(value)

    def test_unencodable_value_error_is_a_type_error_and_a_cogfabric_error(self) -> None:
        with pytest.raises(TypeError) as info:
            copy_value(object())

        assert isinstance(info.value, UnencodableValueError)
        assert isinstance(info.value, EventError)
        assert isinstance(info.value, CogfabricError)

    def test_encode_value_encodes_msgpack_and_refuses_what_it_cannot(self) -> None:
        assert msgspec.msgpack.decode(encode_value({"a": [1]})) == {"a": [1]}
        with pytest.raises(UnencodableValueError):
            encode_value(object())


class TestCopyMapping:
    def test_none_becomes_an_empty_dict(self) -> None:
        assert copy_mapping(None) == {}

    def test_a_copied_nested_list_does_not_change_when_the_original_does(self) -> None:
        original: dict[str, Any] = {"goal": "g", "steps": [["a"], ["b"]]}

        copy = copy_mapping(original)
        original["steps"][0].append("mutated")
        original["goal"] = "other"

        assert copy == {"goal": "g", "steps": [["a"], ["b"]]}

    def test_an_empty_mapping_copies_to_a_new_empty_dict(self) -> None:
        original: dict[str, Any] = {}

        copy = copy_mapping(original)

        assert copy == {}
        assert copy is not original

    @pytest.mark.parametrize(
        "value",
        [{1: "a"}, {None: "a"}, {"ok": 1, 2: "b"}, {b"k": 1}],
        ids=["int-key", "none-key", "mixed-keys", "bytes-key"],
    )
    def test_a_key_that_is_not_a_string_raises_unencodable_value_error(self, value: Any) -> None:
        with pytest.raises(UnencodableValueError):
            copy_mapping(value)

    @pytest.mark.parametrize(
        "value",
        [{"k": object()}, {"k": 2**70}, {"k": [complex(0, 1)]}],
        ids=["object", "huge-int", "complex-in-list"],
    )
    def test_an_unencodable_value_raises_unencodable_value_error(self, value: dict[str, Any]) -> None:
        with pytest.raises(UnencodableValueError):
            copy_mapping(value)

    @pytest.mark.parametrize("value", [[("k", 1)], "k", 42], ids=["list", "str", "int"])
    def test_a_value_that_is_not_a_mapping_raises_unencodable_value_error(self, value: Any) -> None:
        with pytest.raises(UnencodableValueError, match="expected a mapping"):
            copy_mapping(value)

    def test_a_dict_subclass_copies_to_a_plain_dict(self) -> None:
        original = collections.OrderedDict([("b", [1]), ("a", {"x": 2})])

        copy = copy_mapping(original)

        assert type(copy) is dict
        assert copy == {"b": [1], "a": {"x": 2}}

    def test_a_read_only_mapping_with_string_keys_is_copied(self) -> None:
        original = types.MappingProxyType({"goal": "g", "steps": [1, 2]})

        assert copy_mapping(original) == {"goal": "g", "steps": [1, 2]}

    def test_the_errors_are_type_errors(self) -> None:
        with pytest.raises(TypeError):
            copy_mapping({1: "a"})  # type: ignore[dict-item]


class _Lying(str):
    """A str whose own methods claim it is ASCII: only str's own may be trusted."""

    __slots__ = ()

    def isascii(self) -> bool:
        return True


class _Shows:
    def __init__(self, text: object = None, error: BaseException | None = None) -> None:
        self._text = text
        self._error = error

    def __str__(self) -> str:
        if self._error is not None:
            raise self._error
        return self._text  # type: ignore[return-value]

    __repr__ = __str__


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "plain"),
        ("lone \udc80", "lone \\udc80"),
        (_Shows(_Lying("x\udc80")), "x\\udc80"),
        (_Shows(error=RuntimeError()), "<_Shows whose str() failed>"),
    ],
    ids=["plain", "surrogate", "str subclass", "raising __str__"],
)
def test_journal_text_is_always_storable(value: object, expected: str) -> None:
    text = journal_text(value)

    assert text == expected
    assert type(text) is str
    text.encode()  # UTF-8 can encode it: an event holding it encodes


def test_journal_repr_and_the_limit() -> None:
    assert journal_repr(_Shows("\udcff"), limit=3) == "\\ud"
    assert journal_repr(_Shows(error=ValueError())) == "<_Shows whose repr() failed>"
    assert journal_text("x" * 2000, 1000) == "x" * 1000


def test_a_mapping_whose_own_methods_fail_is_refused_as_unencodable() -> None:
    class Broken(collections.abc.Mapping):  # type: ignore[type-arg]
        def __getitem__(self, key: str) -> Any:
            raise KeyError(key)

        def __iter__(self) -> Any:
            return iter(["k"])

        def __len__(self) -> int:
            return 1

    with pytest.raises(UnencodableValueError, match="cannot copy the mapping: KeyError"):
        copy_mapping(Broken())
